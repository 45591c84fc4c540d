"""Connectivity blocks as node leaders send them (``distributed/connectivity.py``), for the check's
and the report's tests: every probe healthy unless a pair's steps are overridden."""

from __future__ import annotations

import copy
from typing import Any

Steps = dict[str, dict[str, Any]]  # step name ("forward", "reverse", "connect", "via_name") -> its record


def address(node: int) -> str:
    return f"10.1.0.{node + 1}"


def block(node: int, nodes: int, *, names: list[str] | None = None, faults: dict[tuple[int, int], Steps] | None = None,
          peers: list[int] | None = None, port: int | None = 41000, listen_error: str | None = None,
          rendezvous: dict[str, Any] | None = None, fwd_ms: float = 0.4, conn_ms: float = 0.2) -> dict[str, Any]:
    """Node ``node``'s block: it advertised itself and probed ``peers`` (all others by default);
    ``faults[(node, peer)]`` replaces that probe's steps."""
    names = names or [f"h{i}" for i in range(nodes)]
    me = {"node": node, "name": names[node], "hostname": names[node], "fqdn": f"{names[node]}.cluster.local",
          "listed": True, "address": address(node), "token": f"t{node}", "lookup": names[node], "source": "host list",
          "port": None if listen_error else port}
    if listen_error:
        me["listen_error"] = listen_error
    probes = []
    for j in peers if peers is not None else [k for k in range(nodes) if k != node]:
        probe: dict[str, Any] = {
            "peer": j, "name": names[j], "source": "host list", "address": address(j), "port": port,
            "forward": {"outcome": "ok", "ms": fwd_ms, "addresses": [address(j)]},
            "reverse": {"outcome": "ok", "ms": fwd_ms, "of": address(j), "name": f"{names[j]}.cluster.local"},
            "connect": {"outcome": "ok", "ms": conn_ms, "target": f"{address(j)}:{port}", "node": j}}
        probe.update(copy.deepcopy((faults or {}).get((node, j), {})))
        probes.append(probe)
    return {"node": node, "self": me, "sampled": False, "peers": len(probes), "timeout_s": 5.0,
            "rendezvous": rendezvous or {"outcome": "ok", "ms": 0.1, "target": "10.1.0.1:29500"}, "probes": probes}


def add_connectivity(gathered: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """``gathered`` (``report_data.gathered_cluster``'s shape) with a block in every node leader's
    payload; ``kwargs`` go to :func:`block` (``faults`` keyed by node pairs)."""
    topo = gathered["topology"]
    nodes, per_node = int(topo["num_nodes"]), int(topo["local_world_size"])
    names = kwargs.pop("names", None) or [str(gathered["payloads"][n * per_node]["node_name"]) for n in range(nodes)
                                          if n * per_node in gathered["payloads"]]
    for n in range(nodes):
        leader = gathered["payloads"].get(n * per_node)
        if leader is not None:
            leader["connectivity"] = block(n, nodes, names=names, **kwargs)
    return gathered
