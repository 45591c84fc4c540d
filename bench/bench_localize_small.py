"""Benchmark: the issue's 3-host case, real runs in network namespaces, repeated.

Three namespace hosts, one torchrun agent each (gloo on CPU) started as ``srun ... torchrun
--rdzv_backend=c10d`` does (Slurm's variables on each host), one host's link capped at
100 Mbit/s in both directions, ``gpu-preflight run --localize`` with a node-link floor. Every
repetition shuffles the job's names against the hosts' addresses and the order the agents
start in, and draws the capped host at random (seeded from ``--seed``, printed), so the
rendezvous' node order never follows the node list by construction. It counts how often the
capped host alone was excluded (target: every run) and how often a healthy host was (target:
never), and prints each run's layout, exclude list, undecided nodes and timing. A run whose
job never formed (no report from any agent) is counted apart and fails the target. Needs root
and iproute2 (netns, tc).

    sudo .venv/bin/python bench/bench_localize_small.py [--runs 20] [--hosts 3] [--seed 1]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import netns
from tests.netns_run import LIGHT, launch, layout, report_of

FLOOR = ["--set", "perf.node_link_min_gbps=0.05"]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--hosts", type=int, default=3)
    p.add_argument("--seed", type=int, default=1, help="seeds every run's layout and capped host")
    p.add_argument("--rate", default="100mbit")
    a = p.parse_args()
    if os.geteuid() != 0:
        print("bench_localize_small: needs root (network namespaces)", file=sys.stderr)
        return 3
    alone = healthy_hit = undecided = failed = 0
    walls, loc_s = [], []
    print(f"{a.hosts} namespace hosts, one capped at {a.rate}, {a.runs} runs, floor 0.05 GB/s, seed {a.seed}")
    for run in range(1, a.runs + 1):
        where = layout(a.hosts, seed=a.seed * 1000 + run)
        capped = random.Random(where.seed).randint(1, a.hosts)  # noqa: S311 (a test layout, not a secret)
        bad = where.name(capped)
        with netns.hosts(a.hosts, prefix="gpb") as names, tempfile.TemporaryDirectory() as tmp:
            netns.cap("gpb", capped, a.rate)
            results, wall = launch(names, 29870 + run % 20, Path(tmp), [*LIGHT, *FLOOR], where=where)
        if not any(out.strip() for _, out, _ in results):  # the job itself never formed: no verdict to count
            failed += 1
            first = next((ln for _, _, err in results for ln in err.splitlines() if "Error" in ln), "no output")
            print(f"run {run:2}: no report ({first.strip()[:150]})", flush=True)
            continue
        loc = report_of(results)["cluster_summary"]["localization"]
        excluded = loc["exclude_nodes"]
        alone += excluded == [bad]
        healthy_hit += bool(set(excluded) - {bad})
        undecided += bool(loc["undecided_nodes"])
        walls.append(wall)
        loc_s.append(loc["duration_s"])
        print(f"run {run:2}: names by address {','.join(where.names)}, start {where.order}, capped {bad:6} "
              f"exclude {loc['exclude_hostlist'] or '(none)':12} undecided "
              f"{','.join(loc['undecided_nodes']) or '-':10} rounds {loc['rounds']:2} localisation "
              f"{loc['duration_s']:5.1f} s, run {wall:5.1f} s", flush=True)
    print(f"bad host alone excluded: {alone}/{a.runs} (target {a.runs}/{a.runs})")
    print(f"runs that excluded a healthy host: {healthy_hit} (target 0)")
    print(f"runs with undecided nodes: {undecided}; runs without a report (job did not form): {failed}")
    print(f"median run {statistics.median(walls):.1f} s, median localisation {statistics.median(loc_s):.1f} s")
    return 0 if alone == a.runs and not healthy_hit else 1


if __name__ == "__main__":
    sys.exit(main())
