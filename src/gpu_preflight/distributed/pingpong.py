"""A libfabric ``fi_pingpong`` between pairs of nodes: can the fabric carry traffic node to node?

``fi_pingpong`` exercises the provider a job will use (EFA in production) below NCCL,
so a failure here is the fabric's, not the job's. Nodes are paired by rank, as the
SageMaker health check's ``efa_communication_test`` does: node 2k serves, node 2k+1
connects; with an odd number of nodes the last one also connects to node 0, which then
serves a second, later round, so no node goes untested. Pair k uses control port
``base_port + k``.

The server may start after its client: the client retries a refused connection until
its time is up. Each side runs under a time limit; what comes back is a JSON-able record
for the rank payload (the ``fabric.pingpong`` cluster check judges it).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from ..backends.commands import run_tool

if TYPE_CHECKING:
    from ..config.diagnostics import DiagnosticsConfig
    from .store import KVStore

__all__ = ["PairRole", "exchange_pingpong", "local_address_towards", "pingpong_plan", "run_pingpong_pair", "run_plan"]

Role = Literal["server", "client"]
ECONNREFUSED = 111
RAW_LIMIT = 16 << 10  # the table is under 1 KiB; an error storm must not bloat the payload


class PairRole(msgspec.Struct, frozen=True):
    """This node's part in one pair: serve or connect, to which node, on which port."""

    role: Role
    peer_node: int
    pair: int
    port: int


def pingpong_plan(node_rank: int, num_nodes: int, base_port: int) -> list[PairRole]:
    """The pairs node ``node_rank`` takes part in, in the order it must run them."""
    plan: list[PairRole] = []
    if num_nodes < 2:
        return plan
    pairs = num_nodes // 2
    k = node_rank // 2
    if k < pairs:
        if node_rank % 2 == 0:
            plan.append(PairRole("server", node_rank + 1, k, base_port + k))
        else:
            plan.append(PairRole("client", node_rank - 1, k, base_port + k))
    if num_nodes % 2:
        last = num_nodes - 1
        if node_rank == 0:
            plan.append(PairRole("server", last, pairs, base_port + pairs))
        elif node_rank == last:
            plan.append(PairRole("client", 0, pairs, base_port + pairs))
    return plan


def local_address_towards(peer: str, port: int = 9) -> str:
    """This host's address on the route to ``peer`` (the address a server should announce).

    A connected UDP socket sends nothing; it only makes the kernel pick the route.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((peer, port))
        return str(s.getsockname()[0])


def _argv(role: Role, peer_addr: str | None, provider: str, endpoint: str, port: int, iterations: int,
          size: int | None, bind_addr: str | None) -> list[str]:
    argv = ["fi_pingpong", "-p", provider, "-e", endpoint, "-I", str(iterations)]
    if size is not None:
        argv += ["-S", str(size)]
    if role == "server":
        argv += ["-B", str(port)]
        if bind_addr:
            argv += ["-s", bind_addr]
    else:
        if not peer_addr:
            raise ValueError("a client needs the server's address")
        argv += ["-P", str(port), peer_addr]
    return argv


def run_pingpong_pair(role: Role, peer_addr: str | None, provider: str, *, port: int, endpoint: str = "rdm",
                      iterations: int = 10, size: int | None = None, timeout_s: float = 60.0,
                      bind_addr: str | None = None, tool_dirs: Iterable[str] = (),
                      retry_interval_s: float = 0.2) -> dict[str, Any]:
    """Run one side of a pair and return its record (JSON-able, bounded).

    ``role="server"`` listens on control port ``port`` until the client has run its
    sizes; ``role="client"`` connects to ``peer_addr:port``, retrying a refused
    connection (the server may not be up yet) until ``timeout_s`` is spent. The record
    holds ``success``, the ``raw_output`` (the result table both sides print), the exit
    status, whether the tool was missing or timed out, and what was run.
    """
    argv = _argv(role, peer_addr, provider, endpoint, port, iterations, size, bind_addr)
    dirs = list(tool_dirs)
    deadline = time.monotonic() + timeout_s
    attempts = 0
    while True:
        attempts += 1
        result = run_tool(argv, max(1.0, deadline - time.monotonic()), extra_dirs=dirs)
        refused = result.rc == ECONNREFUSED or "Connection refused" in result.output
        if role == "client" and refused and time.monotonic() + retry_interval_s < deadline:
            time.sleep(retry_interval_s)
            continue
        break
    raw = result.output
    provider_missing = "-61" in raw and "fi_getinfo" in raw
    return {
        "test_role": role, "peer": peer_addr, "provider": provider, "endpoint": endpoint, "port": port,
        "argv": result.argv, "rc": result.rc, "timed_out": result.timed_out, "missing": result.missing,
        "provider_missing": provider_missing, "attempts": attempts, "duration_s": round(result.duration_s, 3),
        "success": result.rc == 0 and "MB/sec" in raw,
        "error": result.problem() or (None if result.rc == 0 else f"exit status {result.rc}: {result.last_line()}"),
        "raw_output": raw[-RAW_LIMIT:],
    }


def run_plan(plan: Sequence[PairRole], addresses: dict[int, str], provider: str, **kwargs: Any) -> list[dict[str, Any]]:
    """Run this node's pairs in order; ``addresses`` maps node rank → reachable address."""
    records = []
    for step in plan:
        peer = addresses.get(step.peer_node) if step.role == "client" else None
        record = run_pingpong_pair(step.role, peer, provider, port=step.port, **kwargs)
        record.update({"pair": step.pair, "peer_node": step.peer_node})
        records.append(record)
    return records


def exchange_pingpong(store: KVStore, node_rank: int, num_nodes: int, master_addr: str | None, cfg: DiagnosticsConfig,
                      *, wait_s: float, prefix: str = "gpu-preflight") -> list[dict[str, Any]]:
    """The distributed runner's stage, on each node leader: publish my address, run my pairs.

    Addresses travel through the job's key-value store (``<prefix>/pingpong/addr/<node>``):
    each leader announces the address it uses towards the store host, and a client waits
    up to ``wait_s`` for its server's. The records go into the rank payload under
    ``"pingpong"``; the ``fabric.pingpong`` cluster check judges them.
    """
    plan = pingpong_plan(node_rank, num_nodes, cfg.pingpong_base_port)
    if not plan:
        return []
    store.set(f"{prefix}/pingpong/addr/{node_rank}", local_address_towards(master_addr or "127.0.0.1"))
    addresses: dict[int, str] = {}
    failed: list[dict[str, Any]] = []
    for step in plan:
        if step.role != "client":
            continue
        key = f"{prefix}/pingpong/addr/{step.peer_node}"
        try:
            store.wait([key], timedelta(seconds=wait_s))
            addresses[step.peer_node] = bytes(store.get(key)).decode()
        except Exception as exc:  # the server's node never announced itself: no exchange possible
            # a run's record's keys in its order (the report's PingpongPair), those of a run that never started left out
            failed.append({"test_role": "client", "provider": cfg.pingpong_provider, "rc": None, "timed_out": True,
                           "success": False,
                           "error": f"node {step.peer_node} published no address within {wait_s:g} s: {exc}",
                           "raw_output": "", "pair": step.pair, "peer_node": step.peer_node})
    runnable = [s for s in plan if s.role == "server" or s.peer_node in addresses]
    return failed + run_plan(runnable, addresses, cfg.pingpong_provider, endpoint=cfg.pingpong_endpoint,
                             iterations=cfg.pingpong_iterations, timeout_s=cfg.pingpong_timeout_s,
                             tool_dirs=cfg.tool_dirs)
