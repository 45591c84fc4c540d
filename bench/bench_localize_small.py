"""Benchmark: the issue's 3-host case, real runs in network namespaces, repeated.

Three namespace hosts, one torchrun agent each (gloo on CPU), host ``--capped``'s link
capped at 100 Mbit/s in both directions, ``gpu-preflight run --localize`` with a node-link
floor. Over ``--runs`` repetitions it counts how often the capped host alone was excluded
(target: every run) and how often a healthy host was (target: never), and prints each
run's exclude list, undecided nodes and timing. A run whose job never formed (no report
from any agent) is counted apart and fails the target. Needs root and iproute2 (netns, tc).

    sudo .venv/bin/python bench/bench_localize_small.py [--runs 20] [--hosts 3] [--capped 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import netns
from tests.netns_run import LIGHT, launch, report_of

FLOOR = ["--set", "perf.node_link_min_gbps=0.05"]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--hosts", type=int, default=3)
    p.add_argument("--capped", type=int, default=3, help="which host (1-based) has its link capped")
    p.add_argument("--rate", default="100mbit")
    a = p.parse_args()
    if os.geteuid() != 0:
        print("bench_localize_small: needs root (network namespaces)", file=sys.stderr)
        return 3
    bad = f"host{a.capped}"
    alone = healthy_hit = undecided = failed = 0
    walls, loc_s = [], []
    print(f"{a.hosts} namespace hosts, host{a.capped} capped at {a.rate}, {a.runs} runs, floor 0.05 GB/s")
    for run in range(1, a.runs + 1):
        with netns.hosts(a.hosts, prefix="gpb") as names, tempfile.TemporaryDirectory() as tmp:
            netns.cap("gpb", a.capped, a.rate)
            results, wall = launch(names, 29870 + run % 20, Path(tmp), [*LIGHT, *FLOOR])
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
        print(f"run {run:2}: exclude {loc['exclude_hostlist'] or '(none)':12} undecided "
              f"{','.join(loc['undecided_nodes']) or '-':10} rounds {loc['rounds']:2} localisation "
              f"{loc['duration_s']:5.1f} s, run {wall:5.1f} s", flush=True)
    print(f"bad host alone excluded: {alone}/{a.runs} (target {a.runs}/{a.runs})")
    print(f"runs that excluded a healthy host: {healthy_hit} (target 0)")
    print(f"runs with undecided nodes: {undecided}; runs without a report (job did not form): {failed}")
    print(f"median run {statistics.median(walls):.1f} s, median localisation {statistics.median(loc_s):.1f} s")
    return 0 if alone == a.runs and not healthy_hit else 1


if __name__ == "__main__":
    sys.exit(main())
