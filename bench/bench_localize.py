"""Benchmark: the localisation scheduler against the simulated cluster, scored against the truth.

Targets (issue #8), measured over many seeds, rounds counted after round 0:

* one bad node among 1,024 found in <= 2 rounds;
* two bad nodes found in <= ceil(log2 N) + 2 rounds;
* no false positive over 100 seeds at 10 % measurement noise.

Each row runs the real ``Localizer`` to completion against ``SimCluster``; "found by" is
the round in which the last injected fault was convicted, "rounds" is when the scheduler
had nothing left to learn (noise blips cost extra rounds to clear, never a drain).

    python bench/bench_localize.py [--nodes 1024] [--seeds 100] [--noise 0.1]

``--scale`` times the planning itself (issue 16: 65,536 simulated nodes in <= 5 s, full
mode at 1,024 nodes in under a minute): quick mode up to 65,536 nodes and full mode at
256, each run alternated with the previous planning kept here as the reference
(``record`` scanning the round's results for every planned test, full mode recounting
every measurement before each round; the rest is today's code), medians of
``--repeats`` runs, wall and CPU seconds, and the ratio; the two give identical
verdicts, which is checked. Full mode at ``--full-nodes`` (1,024) is timed alone, beside
the simulated cluster's own cost (answering the same plans), the floor no planning beats.

    python bench/bench_localize.py --scale [--repeats 3] [--full-nodes 1024]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from _selfcheck import require


@dataclass
class Row:
    label: str
    runs: int = 0
    found_by: list[int] | None = None
    rounds: list[int] | None = None
    tests: list[int] | None = None
    false_positives: int = 0
    missed: int = 0
    seconds: float = 0.0


def run_row(label: str, nodes: int, bad: int, seeds: int, *, noise: float, mode: str = "quick", fault: str = "slow",
            star: bool = False, links: bool = False, passes: int = 1) -> Row:
    from gpu_preflight.localize.model import LocalizeConfig
    from gpu_preflight.localize.simulate import make_scenario, simulate

    row = Row(label, found_by=[], rounds=[], tests=[])
    assert row.found_by is not None and row.rounds is not None and row.tests is not None
    started = time.perf_counter()
    for seed in range(seeds):
        sc = make_scenario(nodes, bad, fault=fault, noise=noise, seed=seed,
                           slow_links=[(seed % (nodes // 2), seed % (nodes // 2) + nodes // 2)] if links else None)
        r = simulate(sc, LocalizeConfig(mode=mode, cover_passes=passes), seed=seed, star=star)
        row.runs += 1
        row.found_by.append(r.rounds_to_find)
        row.rounds.append(r.outcome.rounds)
        row.tests.append(r.outcome.tests)
        row.false_positives += len(r.false_positives)
        row.missed += len(r.missed) + len(r.links_missed)
    row.seconds = time.perf_counter() - started
    return row


def show(row: Row, target: int | None) -> None:
    assert row.found_by is not None and row.rounds is not None and row.tests is not None
    worst = max(row.found_by)
    verdict = "" if target is None else ("  OK" if worst <= target and not row.false_positives and not row.missed
                                         else "  MISS")
    print(f"{row.label:44} {row.runs:5} {worst:9} {statistics.mean(row.found_by):8.2f} {max(row.rounds):7} "
          f"{statistics.mean(row.rounds):7.2f} {statistics.mean(row.tests):8.0f} {row.false_positives:4} "
          f"{row.missed:6} {1000 * row.seconds / row.runs:8.0f}"
          + (f"  target found-by <= {target}{verdict}" if target is not None else ""))


def previous_localizer() -> type:
    """Today's ``Localizer`` with the previous planning put back, as the reference."""
    from gpu_preflight.localize.model import FAILED, OK, TIMEOUT, Measurement
    from gpu_preflight.localize.scheduler import Localizer

    class Previous(Localizer):
        def record(self, measurements: Any) -> None:
            got = list(measurements)
            plan, self._out = self._out, None
            self._version += 1
            if plan is None:
                self._keep(got)
                return
            stamped = []
            for t in plan.tests:
                mine = [m for m in got if m.test_id == t.test_id]
                stamped += [Measurement(t.test_id, t.members, m.status, m.gbps, m.latency_us, m.rail, t.kind,
                                        plan.index, m.error, m.duration_s) for m in mine]
                if any(m.rail is None for m in mine):
                    continue
                missing = [r for r in t.rails if r not in {m.rail for m in mine}] if mine else [None]
                stamped += [Measurement(t.test_id, t.members, TIMEOUT, rail=r, kind=t.kind, round=plan.index,
                                        error=f"no result within {plan.timeout_s:g} s", duration_s=plan.timeout_s)
                            for r in missing]
            self._keep(stamped)
            self.round_time.append(max((m.duration_s or 0.0 for m in stamped), default=0.0))
            self.rounds = plan.index
            if not self._cover:
                for lane in self._verdicts()[0]:
                    for node in lane.bad:
                        self.round_found.setdefault(node, self.rounds)

        def _hopeless(self) -> set[int]:
            out = set(self.dead)
            if self.config.mode != "full":
                return out
            fails: dict[int, set[int]] = defaultdict(set)
            oks: dict[int, int] = defaultdict(int)
            for m in self.measurements:
                for x in m.members:
                    if m.status in (TIMEOUT, FAILED):
                        fails[x].update(set(m.members) - {x})
                    elif m.status == OK:
                        oks[x] += 1
            return out | {x for x, ps in fails.items() if len(ps) >= self.config.repeat_k and len(ps) > oks[x]}

    return Previous


def timed_run(nodes: int, mode: str, localizer: type | None) -> tuple[float, float, tuple[Any, ...]]:
    """One simulated localisation (one bad node, 10 % noise, seed 0) driven as ``simulate`` drives it:
    wall s, CPU s, and its verdicts to compare."""
    from gpu_preflight.localize.model import LocalizeConfig, NodeEvidence
    from gpu_preflight.localize.scheduler import Localizer
    from gpu_preflight.localize.simulate import SimCluster, collector_paused, make_scenario

    sc = make_scenario(nodes, 1, noise=0.1, seed=0)
    with collector_paused():
        wall, cpu = time.perf_counter(), time.process_time()
        loc = (localizer or Localizer)(nodes, LocalizeConfig(mode=mode), seed=0)
        cluster = SimCluster(sc, 0)
        for n in sorted(sc.dead):
            loc.add_evidence(NodeEvidence(n, "dead", "rank missing in round 0 (simulated)"))
        while (plan := loc.next_round()) is not None:
            loc.record(cluster.run(plan))
        out = loc.outcome()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall, cpu, (out.rounds, out.tests, out.excluded, [(s.node, s.kind, s.reason) for s in out.suspects])


def cluster_only(nodes: int, mode: str) -> float:
    """Seconds the simulated cluster alone takes to answer the plans of one run (the floor)."""
    from gpu_preflight.localize.model import LocalizeConfig, NodeEvidence
    from gpu_preflight.localize.scheduler import Localizer
    from gpu_preflight.localize.simulate import SimCluster, collector_paused, make_scenario

    sc = make_scenario(nodes, 1, noise=0.1, seed=0)
    loc, plans = Localizer(nodes, LocalizeConfig(mode=mode), seed=0), []
    cluster = SimCluster(sc, 0)
    for n in sorted(sc.dead):
        loc.add_evidence(NodeEvidence(n, "dead", "rank missing in round 0 (simulated)"))
    with collector_paused():
        while (plan := loc.next_round()) is not None:
            plans.append(plan)
            loc.record(cluster.run(plan))
        replay = SimCluster(sc, 0)
        started = time.perf_counter()
        for plan in plans:
            replay.run(plan)
    return time.perf_counter() - started


def scale(repeats: int, full_nodes: int) -> None:
    previous = previous_localizer()
    print(f"planning cost, median of {repeats} alternated runs (one bad node, 10 % noise); "
          f"wall and CPU seconds, previous/now ratio")
    print(f"{'mode':6} {'nodes':>7} {'now wall':>9} {'now cpu':>8} {'prev wall':>10} {'prev cpu':>9} "
          f"{'ratio':>6}  verdicts")
    for mode, nodes in [("quick", 1024), ("quick", 4096), ("quick", 16384), ("quick", 65536), ("full", 256)]:
        now: list[tuple[float, float]] = []
        before: list[tuple[float, float]] = []
        seen = set()
        for _ in range(repeats):
            w, c, v = timed_run(nodes, mode, None)
            now.append((w, c))
            seen.add(repr(v))
            w, c, v = timed_run(nodes, mode, previous)
            before.append((w, c))
            seen.add(repr(v))
        nw, nc = (statistics.median(x[i] for x in now) for i in (0, 1))
        pw, pc = (statistics.median(x[i] for x in before) for i in (0, 1))
        same = "identical" if len(seen) == 1 else "DIFFER"
        target = "  target <= 5 s " + ("OK" if nw <= 5 else "MISS") if nodes == 65536 else ""
        print(f"{mode:6} {nodes:7} {nw:9.2f} {nc:8.2f} {pw:10.2f} {pc:9.2f} {pc / nc:6.1f}  {same}{target}")
    if full_nodes:
        w, c, _ = timed_run(full_nodes, "full", None)
        floor = cluster_only(full_nodes, "full")
        print(f"full   {full_nodes:7} {w:9.2f} {c:8.2f}  (one run; the simulated cluster alone: {floor:.2f} s)"
              f"  target < 60 s {'OK' if w < 60 else 'MISS'}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=1024)
    p.add_argument("--seeds", type=int, default=100)
    p.add_argument("--noise", type=float, default=0.1)
    p.add_argument("--scale", action="store_true", help="time the planning up to 65,536 nodes against the previous")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--full-nodes", type=int, default=1024, help="with --scale: full mode timed alone (0: skip)")
    a = p.parse_args()
    require("bench_localize", "gpu_preflight.localize.simulate")
    if a.scale:
        scale(a.repeats, a.full_nodes)
        return
    n, s, noise = a.nodes, a.seeds, a.noise
    log_target = math.ceil(math.log2(n)) + 2
    print(f"{n} simulated nodes, {s} seeds, noise {noise:g} (relative s.d.), slow nodes at 0.3x")
    print(f"{'scenario':44} {'runs':>5} {'found-by':>9} {'mean':>8} {'rounds':>7} {'mean':>7} {'tests':>8} "
          f"{'FP':>4} {'missed':>6} {'ms/run':>8}")
    show(run_row("quick, 1 bad", n, 1, s, noise=noise), 2)
    show(run_row("quick, 2 bad", n, 2, s, noise=noise), log_target)
    show(run_row("group (bisection), 2 bad", n, 2, s, noise=noise, mode="group"), log_target)
    show(run_row("quick, healthy (false positives only)", n, 0, s, noise=noise), 0)
    show(run_row("quick, 1 bad, round-0 star exchanges", n, 1, max(s // 4, 1), noise=noise, star=True), 2)
    show(run_row("quick, 10 bad, mixed slow/dead/flaky (p=0.7)", n, 10, max(s // 4, 1), noise=noise,
                 fault="mixed"), None)
    show(run_row("  same, 3 cover passes (re-paired)", n, 10, max(s // 4, 1), noise=noise, fault="mixed",
                 passes=3), None)
    show(run_row("quick, 1 slow link (ends paired in round 1)", n, 0, max(s // 4, 1), noise=noise, links=True),
         None)
    full = min(n, 64)
    show(run_row(f"full round-robin, {full} nodes, 2 bad", full, 2, max(s // 10, 1), noise=noise, mode="full"),
         None)


if __name__ == "__main__":
    main()
