"""Round 0 for the scheduler, read from what rank 0 already gathered (no new measurement).

The distributed run has already said two things about every node: whether each of its
ranks reported (missing ranks, named by the heartbeats) and how its exchange with node 0
went (``workloads.links.run_star``). Feeding both to the scheduler first means a dead
node is never paired, and a node that was slow with node 0 needs only one more test
against a known-good partner to be convicted.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .model import FAILED, OK, TIMEOUT, WRONG, Measurement, NodeEvidence


def evidence_from_gathered(gathered: dict[str, Any]) -> list[NodeEvidence]:
    """Missing ranks as node evidence: a node whose leader (local rank 0) or every rank is
    missing is dead; a missing other rank makes only its rail a suspect."""
    topo = gathered.get("topology", {})
    per_node = max(int(topo.get("local_world_size", 1)), 1)
    missing: dict[int, dict[int, str]] = defaultdict(dict)
    for rank, why in gathered.get("missing", {}).items():
        missing[int(rank) // per_node][int(rank) % per_node] = str(why)
    out = []
    for node, ranks in sorted(missing.items()):
        if 0 in ranks or len(ranks) == per_node:
            out.append(NodeEvidence(node, "dead", ranks.get(0) or next(iter(ranks.values()))))
        else:
            out += [NodeEvidence(node, "suspect", why, rail=local) for local, why in sorted(ranks.items())]
    return out


def star_measurements(gathered: dict[str, Any]) -> list[Measurement]:
    """Rank 0's node-link exchanges as round-0 measurements of kind ``star``.

    The star's figure (both directions of one large message) is on a different scale from
    a pair round's all_reduce busbw, which is why it is judged against its own kind.
    """
    topo = gathered.get("topology", {})
    per_node = max(int(topo.get("local_world_size", 1)), 1)
    payload = gathered.get("payloads", {}).get(0) or gathered.get("payloads", {}).get("0") or {}
    out = []
    for entry in payload.get("links", []):
        ref, peer = (int(r) // per_node for r in entry["pair"])
        if ref == peer:
            continue
        error = entry.get("error")
        if error:
            status = TIMEOUT if "within" in error or "Timeout" in error else FAILED
        elif entry.get("wrong"):
            status = WRONG
        else:
            status = OK
        out.append(Measurement(f"star{peer}", (ref, peer), status, entry.get("gbps") if status == OK else None,
                               kind="star", error=error))
    return out
