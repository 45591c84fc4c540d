"""Round 0 for the scheduler, read from what rank 0 already gathered (no new measurement).

The distributed run has already said two things about every node: whether each of its
ranks reported (missing ranks, named by the heartbeats) and how its exchange with node 0
went (``workloads.links.run_star``). Feeding both to the scheduler first means a dead
node is never paired, and a node that was slow with node 0 needs only one more test
against a known-good partner to be convicted. What each node measured alone (its node
checks, its node-local collectives) is passed on as ``local`` evidence, which only
breaks a tie that pair tests cannot (two nodes).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .model import FAILED, OK, TIMEOUT, WRONG, Measurement, NodeEvidence

LOCAL_SLOW_FRACTION = 0.5  # a node-local all_reduce under half the best node's is node-local evidence


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


def node_local_evidence(gathered: dict[str, Any]) -> list[NodeEvidence]:
    """What each node measured on its own that looked wrong, as ``local`` evidence (tie-breaks only).

    A node check that FAILed on the node (ERROR is a failure to measure, which says
    nothing about the node's fabric), a node-local collective that failed, or a
    node-local all_reduce under ``LOCAL_SLOW_FRACTION`` of the best node's. With two
    nodes these are what can still say which end of a failing pair is at fault.
    """
    topo = gathered.get("topology", {})
    per_node = max(int(topo.get("local_world_size", 1)), 1)
    why: dict[int, list[str]] = defaultdict(list)
    for rank, payload in sorted((int(r), p) for r, p in gathered.get("payloads", {}).items()):
        entry = payload.get("node_entry") or {}
        failed = sorted({str(f.get("check_id")) for f in entry.get("findings", []) if f.get("status") == "FAIL"})
        if failed:
            why[rank // per_node].append(f"node checks failed: {', '.join(failed)}")
    busbw: dict[int, float] = {}
    for bundle in gathered.get("collectives", []):
        for _, e in bundle.get("failures", []):
            if e.get("scope") == "intra_node" and e.get("ranks"):
                why[int(e["ranks"][0]) // per_node].append(f"node-local {e.get('op')} failed: {e.get('error')}")
        for _, e in bundle.get("groups", []):
            if e.get("scope") == "intra_node" and e.get("op") == "all_reduce" and e.get("ranks") and e.get("results"):
                busbw[int(e["ranks"][0]) // per_node] = max(float(r.get("busbw_gbps", 0.0)) for r in e["results"])
    best = max(busbw.values(), default=0.0)
    for node, value in sorted(busbw.items()):
        if value < LOCAL_SLOW_FRACTION * best:
            why[node].append(f"node-local all_reduce {value:.4g} GB/s, under half the best node's {best:.4g}")
    return [NodeEvidence(node, "local", "; ".join(dict.fromkeys(reasons))) for node, reasons in sorted(why.items())]
