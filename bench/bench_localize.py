"""Benchmark: the localisation scheduler against the simulated cluster, scored against the truth.

Targets (issue #8), measured over many seeds, rounds counted after round 0:

* one bad node among 1,024 found in <= 2 rounds;
* two bad nodes found in <= ceil(log2 N) + 2 rounds;
* no false positive over 100 seeds at 10 % measurement noise.

Each row runs the real ``Localizer`` to completion against ``SimCluster``; "found by" is
the round in which the last injected fault was convicted, "rounds" is when the scheduler
had nothing left to learn (noise blips cost extra rounds to clear, never a drain).

    python bench/bench_localize.py [--nodes 1024] [--seeds 100] [--noise 0.1]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from dataclasses import dataclass

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


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=1024)
    p.add_argument("--seeds", type=int, default=100)
    p.add_argument("--noise", type=float, default=0.1)
    a = p.parse_args()
    require("bench_localize", "gpu_preflight.localize.simulate")
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
