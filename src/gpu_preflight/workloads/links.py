"""Node-to-node links: a timed, verified exchange between node 0 and every other node.

An all-node collective runs at the pace of its slowest link, so it says *that* the
network is slow, not *where*. Exchanging with one reference node at a time gives one
figure per node: a single slow figure names that node; every figure slow names the
reference node itself. The cost is one exchange per node (pairwise and group testing
at scale is the localisation step's job).
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from .collectives import CollectiveTimeout


def _wait(work: Any, timeout_s: float, what: str) -> None:
    try:
        work.wait(timeout=timedelta(seconds=timeout_s))
    except RuntimeError as exc:
        if "time" in str(exc).lower():
            raise CollectiveTimeout(f"{what} did not complete within {timeout_s:g} s") from exc
        raise


def run_star(leaders: list[int], *, nbytes: int, iters: int, device: Any, timeout_s: float) -> list[dict[str, Any]]:
    """Exchange ``nbytes`` both ways between ``leaders[0]`` and each other leader, in turn.

    Every leader calls this; others return at once. Each peer waits at most its turn's
    share of the time budget, so a dead reference node costs one timeout, not a hang.
    """
    # optional: torch comes with the [torch] extra, not with a node-only install
    import torch
    import torch.distributed as dist

    me = dist.get_rank()
    if me not in leaders or len(leaders) < 2:
        return []
    ref, results = leaders[0], []
    count = max(1, nbytes // 4)
    for turn, peer in enumerate(leaders[1:], start=1):
        if me not in (ref, peer):
            continue
        other = peer if me == ref else ref
        budget = timeout_s * (turn if me == peer else 1)
        send = torch.full((count,), float(me + 1), dtype=torch.float32, device=device)
        recv = torch.empty(count, dtype=torch.float32, device=device)
        entry: dict[str, Any] = {"pair": [ref, peer], "bytes": count * 4, "iters": iters}
        try:
            for i in range(iters + 1):  # the first exchange warms up the connection
                if i == 1:
                    t0 = time.perf_counter()
                works = [dist.isend(send, other), dist.irecv(recv, other)]
                for w in works:
                    _wait(w, budget if i == 0 else timeout_s, f"exchange {ref}<->{peer}")
            elapsed = time.perf_counter() - t0
            entry["gbps"] = 2 * count * 4 * iters / elapsed / 1e9
            entry["time_us"] = elapsed / iters * 1e6
            entry["wrong"] = int((recv != float(other + 1)).sum().item())
        except (CollectiveTimeout, RuntimeError) as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"
            results.append(entry)
            if me == peer:
                break
            continue
        results.append(entry)
    return results
