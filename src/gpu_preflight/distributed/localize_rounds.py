"""Localisation rounds in a running job: rank 0 plans, node leaders measure, the store carries both.

Rank 0 owns the pure :class:`~gpu_preflight.localize.scheduler.Localizer`; each round's
plan goes into the job's key-value store, every node leader (local rank 0) runs the tests
its node is in — a verified exchange with each partner over point-to-point sends on the
world group, so no collective subgroup has to be created or torn down — and the lowest
member writes the result back. A partner that is dead or stopped costs that test its time
limit and nothing else: rank 0 records a missing result as a timeout.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any

from msgspec.structs import replace

from ..config.localize import LocalizeSettings
from ..localize.model import LocalizeConfig, Measurement
from ..localize.round0 import evidence_from_gathered, node_local_evidence, star_measurements
from ..localize.scheduler import Localizer
from ..localize.settings import localize_config
from .store import PREFIX, STALE_S, KVStore

LOC = f"{PREFIX}/loc"
POLL_S = 0.05


def _exchange(members: list[int], me: int, nbytes: int, iters: int, timeout_s: float, device: Any,
              tag: int, group: Any = None) -> dict[str, Any]:
    """A ring exchange among ``members`` (a pair: both ways); bidirectional GB/s and wrong count."""
    # optional: torch comes with the [torch] extra, not with a node-only install
    import torch
    import torch.distributed as dist

    i = members.index(me)
    nxt, prv = members[(i + 1) % len(members)], members[(i - 1) % len(members)]
    count = max(1, nbytes // 4)
    send = torch.full((count,), float(me + 1), dtype=torch.float32, device=device)
    recv = torch.empty(count, dtype=torch.float32, device=device)
    deadline = time.monotonic() + timeout_s
    t0 = time.perf_counter()
    try:
        for it in range(iters + 1):
            if it == 1:
                t0 = time.perf_counter()
            works = [dist.isend(send, nxt, group=group, tag=tag), dist.irecv(recv, prv, group=group, tag=tag)]
            for w in works:
                assert w is not None  # point-to-point on the default group always returns a work
                left = deadline - time.monotonic()
                if left <= 0 or not w.wait(timeout=timedelta(seconds=left)):
                    return {"status": "timeout", "error": f"no answer within {timeout_s:g} s"}
    except RuntimeError as exc:
        status = "timeout" if "time" in str(exc).lower() else "failed"
        return {"status": status, "error": f"{type(exc).__name__}: {exc}"}
    elapsed = max(time.perf_counter() - t0, 1e-9)
    wrong = int((recv != float(prv + 1)).sum().item())
    gbps = 2 * count * 4 * iters / elapsed / 1e9
    return {"status": "wrong" if wrong else "ok", "gbps": gbps, "latency_us": elapsed / iters * 1e6,
            "duration_s": elapsed}


def fresh_group(alive: list[int], me: int) -> Any:
    """A new group of the ranks that reported, on fresh connections.

    After a peer died mid-collective the world group's connections may still hold the
    broken operation's traffic; measuring on them would blame healthy nodes.
    """
    # optional: torch comes with the [torch] extra, not with a node-only install
    import torch.distributed as dist

    if me not in alive or len(alive) < 2:
        return None
    return dist.new_group(alive, use_local_synchronization=True)


def follow(store: KVStore, topo: Any, *, nbytes: int, iters: int, device: Any, budget_s: float) -> None:
    """Every rank: run this node's tests of each published round until rank 0 says done."""
    per_node = max(topo.local_world_size, 1)
    node = topo.node_rank
    leader = topo.local_rank == 0
    index = 1
    deadline = time.monotonic() + budget_s
    group = None
    while time.monotonic() < deadline and not store.check([f"{LOC}/alive"]):
        time.sleep(POLL_S)
    if store.check([f"{LOC}/alive"]):
        alive = json.loads(bytes(store.get(f"{LOC}/alive")).decode())
        if topo.rank not in alive:
            return  # rank 0 did not hear from this rank: it is judged dead, not measured
        group = fresh_group(alive, topo.rank)
    while time.monotonic() < deadline:
        plan_key, done_key = f"{LOC}/plan/{index}", f"{LOC}/done"
        if store.check([done_key]):
            return
        if not store.check([plan_key]):
            time.sleep(POLL_S)
            continue
        plan = json.loads(bytes(store.get(plan_key)).decode())
        if leader:
            for test in plan["tests"]:
                if node not in test["members"]:
                    continue
                ranks = [m * per_node for m in test["members"]]
                result = _exchange(ranks, topo.rank, nbytes, iters, float(plan["timeout_s"]), device, tag=index,
                                   group=group)
                if node == min(test["members"]):
                    store.set(f"{LOC}/result/{index}/{test['test_id']}", json.dumps(result))
        index += 1


def lead(store: KVStore, topo: Any, gathered: dict[str, Any], *, mode: str, floor_gbps: float | None,
         timeout_s: float, nbytes: int, iters: int, device: Any,
         settings: LocalizeSettings | None = None) -> tuple[Any, float]:
    """Rank 0: plan rounds until the localiser is done; returns its outcome and the wall time.

    ``settings``: the run's ``[localize]`` section (defaults when not given); its GPU values
    judge CUDA workers, its CPU values gloo workers on CPUs.
    """
    started = time.monotonic()
    config = localize_config(settings, cpu=getattr(device, "type", "cpu") != "cuda", mode=mode,
                             floor_gbps=floor_gbps, test_timeout_s=timeout_s)
    loc = Localizer(topo.num_nodes, config, seed=topo.world_size)
    for evidence in [*evidence_from_gathered(gathered), *node_local_evidence(gathered)]:
        loc.add_evidence(evidence)
    loc.record(star_measurements(gathered))
    per_node = max(topo.local_world_size, 1)
    alive = sorted(int(r) for r in gathered.get("payloads", {}))
    store.set(f"{LOC}/alive", json.dumps(alive))
    group = fresh_group(alive, topo.rank)
    while (plan := loc.next_round()) is not None:
        store.set(f"{LOC}/plan/{plan.index}", json.dumps(plan.to_dict()))
        mine = [t for t in plan.tests if 0 in t.members]
        for test in mine:  # rank 0 leads node 0's test itself, then collects the others
            result = _exchange([m * per_node for m in test.members], topo.rank, nbytes, iters, plan.timeout_s,
                               device, tag=plan.index, group=group)
            store.set(f"{LOC}/result/{plan.index}/{test.test_id}", json.dumps(result))
        wait_until = time.monotonic() + plan.timeout_s + STALE_S
        measurements = []
        pending = {t.test_id: t for t in plan.tests}
        while pending and time.monotonic() < wait_until:
            for test_id in list(pending):
                key = f"{LOC}/result/{plan.index}/{test_id}"
                if store.check([key]):
                    test = pending.pop(test_id)
                    r = json.loads(bytes(store.get(key)).decode())
                    measurements.append(Measurement(test_id, test.members, r["status"], r.get("gbps"),
                                                    r.get("latency_us"), kind=test.kind, round=plan.index,
                                                    error=r.get("error"), duration_s=r.get("duration_s")))
            if pending:
                time.sleep(POLL_S)
        loc.record(measurements)  # tests without a result count as timeouts
    store.set(f"{LOC}/done", "1")
    return loc.outcome(), time.monotonic() - started


def on_cpu(config: LocalizeConfig, settings: LocalizeSettings | None = None) -> LocalizeConfig:
    """``config`` with the CPU (gloo) judging values of the ``[localize]`` section (its defaults
    when not given): why they differ from the GPU values is in :mod:`gpu_preflight.config.localize`."""
    s = settings or LocalizeSettings()
    return replace(config, slow_fraction=s.slow_fraction_cpu, assumed_noise=s.assumed_noise_cpu,
                   latency_factor=s.latency_factor_cpu)


