"""Benchmark: ``history import`` and ``report render`` of large reports, as a user runs them.

Issue 28: a 100,000-node report took 395 s to import (the node index counted each host
name over the whole list: quadratic), and ``report render`` refused the 299 MiB report the
program had written. Each size's report is written once (``tests/large_report.py``, each
node's section without its per-check detail, ~3 KB a node as in the issue's report), then
``gpu-preflight history import`` and ``gpu-preflight report render --format md`` run on it
as subprocesses. Linear means the import time grows with the node count: the printed
``ratio`` of the largest to the smallest import should be near the ratio of their sizes
(10 for 10,000 vs 100,000 nodes), not its square.

    python bench/bench_history_import.py [--nodes 10000 100000] [--against REV]

``--against REV`` times that git revision's ``src`` on the smallest size too (the old
import was quadratic: expect a far larger ratio there, so it is only run on the smallest).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from _selfcheck import checkout_src, child_env, on_src, require, timed

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
BENCH = "bench_history_import"


def slim_report(nodes: int) -> dict[str, Any]:
    """``nodes`` node sections (GPUs, NCCL intra-node results, node info) without per-check detail."""
    from tests.large_report import large_report

    report = large_report(nodes)
    report["nodes"] = {key: {k: v for k, v in section.items() if k not in ("checks", "facts")}
                       for key, section in report["nodes"].items()}
    return report


def write(path: Path, report: dict[str, Any]) -> int:
    with path.open("w", encoding="utf-8") as fh:
        json.dump(report, fh, separators=(",", ":"))
    return path.stat().st_size


def run_import(report: Path, db: Path, env: dict[str, str]) -> float:
    ran = timed(BENCH, [sys.executable, "-m", "gpu_preflight", "history", "import", str(report), "--db", str(db)],
                what=f"history import of {report.name}", env=env)
    if "filed" not in ran.stderr:
        from _selfcheck import fail

        fail(BENCH, f"history import of {report.name} filed nothing", ran.stderr)
    return ran.seconds


def run_render(report: Path, env: dict[str, str]) -> float:
    return timed(BENCH, [sys.executable, "-m", "gpu_preflight", "report", "render", str(report), "--format", "md"],
                 what=f"report render of {report.name}", env=env).seconds


def main() -> int:
    require(BENCH, "gpu_preflight", "tests.large_report")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--against", metavar="REV", help="also time this revision's import on the smallest size")
    args = ap.parse_args()
    sizes = sorted(args.nodes)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        env = child_env(tmp)
        imported: dict[int, float] = {}
        for n in sizes:
            path = tmp / f"report-{n}.json"
            size = write(path, slim_report(n))
            imported[n] = run_import(path, tmp / f"history-{n}.sqlite", env)
            rendered = run_render(path, env)
            print(f"nodes {n:>7}  report {size / 2**20:7.1f} MiB  import {imported[n]:7.2f} s  "
                  f"render md {rendered:7.2f} s")
        if len(sizes) > 1:
            lo, hi = sizes[0], sizes[-1]
            print(f"ratio import {hi} vs {lo} nodes: {imported[hi] / imported[lo]:.1f}x for {hi / lo:.0f}x the nodes")
        if args.against:
            old_env = on_src(env, checkout_src(BENCH, args.against, tmp / "old"))
            n = sizes[0]
            seconds = run_import(tmp / f"report-{n}.json", tmp / f"history-old-{n}.sqlite", old_env)
            print(f"{args.against}: import {n} nodes {seconds:.2f} s ({seconds / imported[n]:.1f}x this tree)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
