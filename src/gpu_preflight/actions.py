"""What an operator (or a scheduler hook) does about a finding: one small vocabulary.

Health-check suites that drain nodes route on a handful of verbs (AWS's p4d/p5 suite uses
ISOLATE / REBOOT / RESET / MONITOR); a free-text recommendation cannot be routed on. Every
finding that calls for an action carries one :class:`Action` value under
``details["operator_action"]`` (:data:`DETAIL_KEY`); findings that call for none carry no key,
so their output stays as it was.

The values are ordered by how much they take out of service, so the action for a node is the
:func:`strongest` of its findings' actions. NVIDIA's Xid resolution buckets map onto them
through :data:`BY_NVIDIA_ACTION` (the catalogue keeps NVIDIA's words, the report ours).

Pure: no I/O, no imports from the rest of the package.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["BY_NVIDIA_ACTION", "DETAIL_KEY", "SUMMARY_KEY", "Action", "action_of", "node_action", "strongest",
           "with_action"]

DETAIL_KEY = "operator_action"
SUMMARY_KEY = "operator_action"  # a node section's summary: the strongest action of the node's findings


class Action(enum.StrEnum):
    """An operator action, weakest first."""

    NONE = "none"  # nothing to do
    MONITOR = "monitor"  # keep the node in service and watch the counter or log
    RESTART_JOB = "restart_job"  # the job died or is suspect; the node is fine
    CHECK_MECHANICALS = "check_mechanicals"  # cables, seating, power connectors: a visit, no reset
    RESET_GPU = "reset_gpu"  # drain the GPU's work and reset it (nvidia-smi -r)
    REBOOT_NODE = "reboot_node"  # drain the node and restart (cold restart where the text says so)
    ISOLATE_NODE = "isolate_node"  # drain the node and keep it out until it is repaired or replaced

    @property
    def rank(self) -> int:
        return _ORDER.index(self)


_ORDER = tuple(Action)

# NVIDIA's "Resolution Bucket (Immediate Action)" words and our older policy words, to ours.
BY_NVIDIA_ACTION: Mapping[str, Action] = {
    "NONE": Action.NONE, "IGNORE": Action.NONE,
    "MONITOR": Action.MONITOR, "CHECK_UVM": Action.MONITOR, "UPDATE_SWFW": Action.MONITOR,
    "RESTART_APP": Action.RESTART_JOB, "WORKFLOW_XID_45": Action.RESTART_JOB,
    "CHECK_MECHANICALS": Action.CHECK_MECHANICALS,
    "RESET_GPU": Action.RESET_GPU, "WORKFLOW_XID_48": Action.RESET_GPU, "WORKFLOW_NVLINK_ERR": Action.RESET_GPU,
    "WORKFLOW_NVLINK5_ERR": Action.RESET_GPU,
    "REBOOT": Action.REBOOT_NODE, "POWER_CYCLE": Action.REBOOT_NODE, "RESTART_BM": Action.REBOOT_NODE,
    "RESTART_VM": Action.REBOOT_NODE,
    "CONTACT_SUPPORT": Action.ISOLATE_NODE, "ISOLATE": Action.ISOLATE_NODE,
}


def strongest(actions: Iterable[Action | None]) -> Action:
    """The action that covers all of ``actions`` (``NONE`` when there is none)."""
    return max((a for a in actions if a is not None), key=lambda a: a.rank, default=Action.NONE)


def with_action(details: Mapping[str, Any], action: Action | None) -> dict[str, Any]:
    """``details`` plus the operator action, when there is one to take (``NONE`` adds nothing)."""
    out = dict(details)
    if action is not None and action is not Action.NONE:
        out[DETAIL_KEY] = action.value
    return out


_BY_VALUE: Mapping[str, Action] = {a.value: a for a in Action}


def action_of(details: Mapping[str, Any] | None) -> Action | None:
    """The action a finding's details name; None when they name none (or a value this version
    does not know: a report written by a newer version is read, never guessed at)."""
    if not details:
        return None
    value = details.get(DETAIL_KEY)
    return _BY_VALUE.get(value) if isinstance(value, str) else None


def node_action(details: Iterable[Mapping[str, Any] | None]) -> Action:
    """The one action a scheduler hook routes a node on: the strongest its findings' ``details``
    call for. The report's node summary, the Slurm drain reason and the Kubernetes label all
    come from this function over the same findings (the drain reason leaves out the checks
    ``slurm.ignore_checks`` names, as its verdict does)."""
    return strongest(action_of(d) for d in details)
