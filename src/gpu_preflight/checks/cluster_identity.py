"""Does every node of the report stand for one machine, under one name of its own?

Part of ``cluster.consistency``. The report names nodes by what each said about itself
(:mod:`gpu_preflight.backends.launcher.identity`); these rules catch the cases where that cannot be
trusted, because then a drain, an exclude list or a label would hit the wrong host:

- two node sections hold the same GPU (one UUID): two torchrun agents, or a rank started twice,
  on one machine were counted as two nodes — FAIL naming both;
- two nodes claim one name (a copied ``GPU_PREFLIGHT_NODE_NAME``, a cloned image's host
  name) — FAIL naming both, with the host names and addresses that tell them apart;
- a node's name is not in the job's own host list, or overrides the scheduler's name for it —
  WARN, with the node's own words.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from ..model import Finding, Status
from ..records import ClusterView
from ..registry import CheckContext

__all__ = ["identity_findings"]

SHOWN = 8  # GPUs or nodes named in one finding; the rest are counted


def identity_findings(ctx: CheckContext, c: ClusterView) -> Iterator[Finding]:
    """The FAIL and WARN findings above, none when every node is one machine under its own name."""
    yield from _shared_gpus(ctx, c)
    yield from _shared_names(ctx, c)
    for node, payload in sorted(c.leaders.items()):
        identity = payload.get("identity")
        for conflict in (identity.get("conflicts") or []) if isinstance(identity, dict) else []:
            name = c.node_names.get(node, f"node{node}")
            yield ctx.finding(Status.WARN, name, "name_conflict", f"{name}: {conflict}", observed=_described(identity),
                              recommendation="Give each node the scheduler's own name for it (SLURMD_NODENAME, "
                                             "SM_CURRENT_HOST, the pod's spec.nodeName), or fix the job's host list.")


def _shared_gpus(ctx: CheckContext, c: ClusterView) -> Iterator[Finding]:
    holders: dict[str, list[int]] = defaultdict(list)
    for node, payload in sorted(c.leaders.items()):  # the section's GPU block: in full and summarised reports
        gpus = ((payload.get("node_entry") or {}).get("section") or {}).get("gpu") or {}
        for record in gpus.values() if isinstance(gpus, dict) else ():
            uuid = record.get("uuid") if isinstance(record, dict) else None
            if isinstance(uuid, str) and uuid.strip():
                holders[uuid].append(node)
    shared: dict[tuple[int, ...], list[str]] = defaultdict(list)
    for uuid, holding in holders.items():
        if len(set(holding)) > 1:
            shared[tuple(sorted(set(holding)))].append(uuid)
    for nodes, uuids in sorted(shared.items()):
        names = [c.node_names.get(n, f"node{n}") for n in nodes]
        more = f" and {len(uuids) - SHOWN} more" if len(uuids) > SHOWN else ""
        yield ctx.finding(Status.FAIL, "<->".join(names), "duplicate_gpu",
                          f"{' and '.join(names)} report the same {len(uuids)} GPU(s) ({', '.join(uuids[:SHOWN])}"
                          f"{more}): one machine was counted as {len(names)} nodes",
                          observed={"nodes": names, "uuids": uuids}, expected="each GPU on one node",
                          recommendation="Start one torchrun agent per machine (or set --nproc_per_node to the "
                                         "GPU count), and check the job's node list for a host given twice.")


def _shared_names(ctx: CheckContext, c: ClusterView) -> Iterator[Finding]:
    claims: dict[str, list[int]] = defaultdict(list)
    for node, payload in sorted(c.leaders.items()):
        name = c.claimed_name(payload)
        if name:
            claims[name].append(node)
    for name, nodes in sorted(claims.items()):
        if len(nodes) < 2:
            continue
        labels = [c.node_names.get(n, f"node{n}") for n in nodes]
        who = "; ".join(f"node rank {n}: {_described(c.leaders[n].get('identity'))}" for n in nodes[:SHOWN])
        yield ctx.finding(Status.FAIL, "<->".join(labels), "duplicate_node_name",
                          f"{len(nodes)} nodes call themselves {name!r} ({who}): a drain or exclude list by that "
                          "name would hit the wrong host", observed=labels, expected="one node per name",
                          recommendation="Give every node its own name: unset a GPU_PREFLIGHT_NODE_NAME copied "
                                         "between nodes, or let the scheduler's name (SLURMD_NODENAME, "
                                         "SM_CURRENT_HOST) speak.")


def _described(identity: Any) -> str:
    """``host ip-10-1-2-3, address 10.1.2.3, from SLURMD_NODENAME``: what tells two claimants apart."""
    if not isinstance(identity, dict):
        return "no identity sent"
    parts = [f"host {identity.get('hostname')}"]
    if identity.get("address"):
        parts.append(f"address {identity['address']}")
    parts.append(f"name from {identity.get('source')}")
    return ", ".join(parts)
