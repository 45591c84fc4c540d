"""Collective bandwidth and correctness on any process group (torch.distributed).

Conventions follow nccl-tests so numbers compare directly: ``size`` is the bytes of the
larger buffer, algbw = size / time, busbw = algbw × 2(n−1)/n for all_reduce, × (n−1)/n
for all_gather, reduce_scatter and all_to_all, × 1 for broadcast and send/recv. Every
collective is verified with exactly representable values and wrong elements are counted
(nccl-tests' ``#wrong``). Every call waits under a timeout, so a dead or stopped peer
is an error naming the operation, never a hang. Groups are arbitrary (node-local,
one-rank-per-node, a pair), which is what bad-node localisation builds on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import msgspec

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "sendrecv")
ELEMENT = 4  # float32: small integers and their sums are exact
Inspect = Callable[[str, int, Any], None]  # (op, rank, output) before the output is verified


def bus_factor(op: str, n: int) -> float:
    if n <= 1:
        return 1.0
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


class SizeResult(msgspec.Struct):
    """One message size of the all-reduce test: time, algorithm and bus bandwidth, wrong elements, fastest and slowest
    rank."""

    size_bytes: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int
    time_us_min: float
    time_us_max: float

    @property
    def latency_ms(self) -> float:
        return self.time_us / 1000.0


class CollectiveResult(msgspec.Struct):
    """One collective on one group across a sweep of sizes."""

    op: str
    group: str
    ranks: list[int]
    results: list[SizeResult] = []
    error: str | None = None

    @property
    def peak_busbw_gbps(self) -> float:
        return max((r.busbw_gbps for r in self.results), default=0.0)

    @property
    def wrong(self) -> int:
        return sum(r.wrong for r in self.results)

    @property
    def success(self) -> bool:
        return self.error is None and self.wrong == 0 and bool(self.results)

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op, "group": self.group, "ranks": self.ranks, "success": self.success,
            "processes_tested": len(self.ranks), "error": self.error, "wrong": self.wrong,
            "peak_bandwidth_gbps": round(self.peak_busbw_gbps, 4),
            "results": [{
                "size_bytes": r.size_bytes, "time_us": round(r.time_us, 2), "algbw_gbps": round(r.algbw_gbps, 4),
                "busbw_gbps": round(r.busbw_gbps, 4), "bandwidth_gbps": round(r.busbw_gbps, 4),
                "latency_ms": round(r.latency_ms, 4), "wrong": r.wrong,
                "time_us_min": round(r.time_us_min, 2), "time_us_max": round(r.time_us_max, 2)}
                for r in self.results],
        }


class CollectiveTimeout(RuntimeError):
    """A collective did not complete in time: a peer is dead, stopped or cut off."""


def _wait(work: Any, timeout_s: float, what: str) -> None:
    try:
        ok = work.wait(timeout=timedelta(seconds=timeout_s))
    except RuntimeError as exc:
        if "timed out" in str(exc).lower() or "timeout" in str(exc).lower():
            raise CollectiveTimeout(f"{what} did not complete within {timeout_s:g} s") from exc
        raise
    if ok is False:
        raise CollectiveTimeout(f"{what} did not complete within {timeout_s:g} s")


class _Op:
    """Buffers, one timed call, and the verification of one collective at one size."""

    def __init__(self, op: str, dist: Any, torch: Any, group: Any, ranks: list[int], me: int, count: int,
                 device: Any) -> None:
        self.op, self.dist, self.torch, self.group, self.ranks = op, dist, torch, group, ranks
        self.n, self.me, self.count, self.device = len(ranks), me, count, device
        self.idx = ranks.index(me)
        chunk = count // self.n
        f32 = torch.float32
        if op in ("all_gather", "reduce_scatter", "all_to_all"):
            self.inp = torch.empty(count if op != "all_gather" else chunk, dtype=f32, device=device)
            self.out = torch.empty(chunk if op == "reduce_scatter" else count, dtype=f32, device=device)
        else:
            self.inp = torch.empty(count, dtype=f32, device=device)
            self.out = self.inp
        self.chunk = chunk

    def fill(self) -> None:
        t, n, i = self.torch, self.n, self.idx
        if self.op == "all_to_all":
            # chunk j on rank i holds 1000*(i+1) + j: after the exchange chunk j holds 1000*(j+1) + i
            self.inp.copy_(t.arange(n, dtype=t.float32, device=self.device).repeat_interleave(self.chunk)
                           + 1000.0 * (i + 1))
        else:
            self.inp.fill_(float(i + 1))

    def launch(self) -> Any:
        d, g = self.dist, self.group
        if self.op == "all_reduce":
            return d.all_reduce(self.inp, group=g, async_op=True)
        if self.op == "all_gather":
            gather = getattr(d, "all_gather_single", None) or d.all_gather_into_tensor
            return gather(self.out, self.inp, group=g, async_op=True)
        if self.op == "reduce_scatter":
            scatter = getattr(d, "reduce_scatter_single", None) or d.reduce_scatter_tensor
            return scatter(self.out, self.inp, group=g, async_op=True)
        if self.op == "broadcast":
            return d.broadcast(self.inp, src=self.ranks[0], group=g, async_op=True)
        if self.op == "all_to_all":
            return d.all_to_all_single(self.out, self.inp, group=g, async_op=True)
        nxt, prv = self.ranks[(self.idx + 1) % self.n], self.ranks[(self.idx - 1) % self.n]
        if self.out is self.inp:
            self.out = self.torch.empty_like(self.inp)
        ops = [d.P2POp(d.isend, self.inp, nxt, group=g), d.P2POp(d.irecv, self.out, prv, group=g)]
        return _Batch(d.batch_isend_irecv(ops))

    def expected(self) -> Any:
        t, n = self.torch, self.n
        if self.op in ("all_reduce", "reduce_scatter"):
            return t.full_like(self.out, float(n * (n + 1) // 2))
        if self.op == "all_gather":
            return t.arange(1, n + 1, dtype=t.float32, device=self.device).repeat_interleave(self.chunk)
        if self.op == "broadcast":
            return t.full_like(self.out, 1.0)
        if self.op == "all_to_all":
            return (1000.0 * t.arange(1, n + 1, dtype=t.float32, device=self.device)).repeat_interleave(
                self.chunk) + float(self.idx)
        return t.full_like(self.out, float((self.idx - 1) % n + 1))

    def wrong(self, inspect: Inspect | None = None) -> int:
        if inspect is not None:
            inspect(self.op, self.me, self.out)
        return int((self.out != self.expected()).sum().item())


class _Batch:
    """Several P2P works waited on as one."""

    def __init__(self, works: list[Any]) -> None:
        self.works = works

    def wait(self, timeout: timedelta) -> bool:
        deadline = time.monotonic() + timeout.total_seconds()
        for w in self.works:
            left = max(0.001, deadline - time.monotonic())
            _wait(w, left, "send/recv")
        return True


def _sync(torch: Any, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_collective(op: str, *, group: Any, ranks: list[int], group_name: str, sizes: list[int], iters: int,
                   warmup: int, device: Any, timeout_s: float, inspect: Inspect | None = None) -> CollectiveResult:
    """Sweep ``sizes`` for one collective on ``group``; every member of the group must call it.

    ``inspect`` sees each size's output on this rank before it is verified (the run's rank
    hooks, :mod:`gpu_preflight.distributed.hooks`: a test plays a corrupting GPU through it).
    Raises :class:`CollectiveTimeout` when a call does not complete (the group is then
    unusable); other failures are recorded in the result's ``error``.
    """
    # optional: torch comes with the [torch] extra, not with a node-only install
    import torch
    import torch.distributed as dist

    me = dist.get_rank()
    n = len(ranks)
    result = CollectiveResult(op, group_name, list(ranks))
    if n < 2:
        result.error = f"{op} needs at least 2 ranks in group {group_name}"
        return result
    for size in sizes:
        count = max(n, (size // ELEMENT) // n * n)
        o = _Op(op, dist, torch, group, ranks, me, count, device)
        o.fill()
        for _ in range(warmup):
            _wait(o.launch(), timeout_s, f"{op} {size} B warm-up")
        _sync(torch, device)
        t0 = time.perf_counter()
        works = [o.launch() for _ in range(iters)]
        for w in works:
            _wait(w, timeout_s, f"{op} {size} B")
        _sync(torch, device)
        elapsed_us = (time.perf_counter() - t0) / iters * 1e6
        o.fill()
        _wait(o.launch(), timeout_s, f"{op} {size} B verification")
        _sync(torch, device)
        wrong = o.wrong(inspect)
        stats = torch.tensor([elapsed_us, -elapsed_us, float(wrong)], dtype=torch.float64, device=device)
        agg = torch.tensor([elapsed_us, elapsed_us, float(wrong)], dtype=torch.float64, device=device)
        _wait(dist.all_reduce(stats, op=dist.ReduceOp.MAX, group=group, async_op=True), timeout_s, f"{op} stats")
        _wait(dist.all_reduce(agg, op=dist.ReduceOp.SUM, group=group, async_op=True), timeout_s, f"{op} stats")
        t_max, t_min, total_wrong = float(stats[0]), -float(stats[1]), int(agg[2])
        nbytes = count * ELEMENT
        algbw = nbytes / (t_max * 1e-6) / 1e9 if t_max > 0 else 0.0
        result.results.append(SizeResult(nbytes, t_max, algbw, algbw * bus_factor(op, n), total_wrong,
                                          t_min, t_max))
    return result
