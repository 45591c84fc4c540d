"""Benchmark: wall time of a quick replayed node run against importing psutil + pynvml.

Both commands run alternately in the same script on the same machine, so the ratio is
robust to a noisy host. Target (issue #2): ratio < 3. Also verifies that the run does
not import torch.

    python bench/bench_node_run.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from _selfcheck import Ran, require, timed

DUMP = Path(__file__).resolve().parents[1] / "tests/fixtures/captured/h200-580.159.04/nvml_capture.json"
BASELINE = [sys.executable, "-c", "import psutil, pynvml"]
RUN = [sys.executable, "-m", "gpu_preflight", "run", "--quick", "--replay", str(DUMP)]
NO_TORCH = ("import sys, runpy; sys.argv=['gpu-preflight','run','--quick','--replay',%r,'--format','json'];"
            "\ntry: runpy.run_module('gpu_preflight', run_name='__main__')\nexcept SystemExit: pass\n"
            "print('torch imported' if 'torch' in sys.modules else 'no torch', file=sys.stderr)")


def judged(ran: Ran) -> bool:
    """The run reached a verdict: exit 0-2 and its ``[RESULT]`` line last (exit 1 alone is also
    what a Python without the package gives)."""
    lines = ran.stderr.strip().splitlines()
    return ran.returncode in (0, 1, 2) and bool(lines) and lines[-1].startswith("[RESULT] ")


def baseline() -> float:
    return timed("bench_node_run", BASELINE, what="the baseline import").seconds


def run() -> float:
    return timed("bench_node_run", RUN, what="the replayed node run", ok=judged).seconds


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    require("bench_node_run", "gpu_preflight", "psutil", "pynvml")
    baseline(), run()  # warm the page cache
    base, runs = [], []
    for _ in range(args.repeat):
        base.append(baseline())
        runs.append(run())
    b, r = statistics.median(base), statistics.median(runs)
    torch = timed("bench_node_run", [sys.executable, "-c", NO_TORCH % str(DUMP)], what="the torch-import check",
                  ok=lambda ran: ran.stderr.strip().endswith(("no torch", "torch imported"))).stderr
    print(f"baseline  python -c 'import psutil, pynvml'   median {b * 1000:7.1f} ms  (n={args.repeat})")
    print(f"run       gpu-preflight run --quick --replay   median {r * 1000:7.1f} ms")
    print(f"ratio     {r / b:.2f}x  (target < 3x)   torch check: {torch.strip().splitlines()[-1]}")
    return 0 if r / b < 3 and "no torch" in torch else 1


if __name__ == "__main__":
    raise SystemExit(main())
