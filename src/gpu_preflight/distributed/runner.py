"""The distributed run's public entry points, kept under their old names.

The run is split by theme: :mod:`.plan` (what each rank runs, the group layout),
:mod:`.store` (the key-value store, heartbeat, formation), :mod:`.gather` (node bundles and
the gather to the reporting rank), :mod:`.payload` (what travels between ranks) and
:mod:`.rank` (one rank's flow and its way out). New code imports from those.
"""

from __future__ import annotations

from collections.abc import Mapping

from .gather import collect, gather, post_node_bundle
from .payload import FORMATION_OP, NodeBundle, RankPayload
from .plan import Group, Plan, layout, make_plan, node_ranks, steps_for
from .rank import MAX_PAYLOAD, RankOutcome, RankRun, node_payload, run_rank
from .store import HEARTBEAT_S, PREFIX, RDZV_NAMES_KEY, REPORTER_KEY, STALE_S, Heartbeat, silent, wait_key

__all__ = ["FORMATION_OP", "HEARTBEAT_S", "MAX_PAYLOAD", "PREFIX", "RDZV_NAMES_KEY", "REPORTER_KEY", "STALE_S",
           "Group", "Heartbeat", "NodeBundle", "Plan", "RankOutcome", "RankPayload", "RankRun", "collect",
           "gather", "layout", "make_plan", "node_payload", "node_ranks", "post_node_bundle",
           "run_rank", "silent", "steps_for", "wait_key"]


def _bundle(texts: Mapping[int, str], missing: Mapping[int, str]) -> str:
    """A node leader's bundle of these payload texts, as the store value it posts."""
    return NodeBundle.from_texts(texts, missing).to_json()
