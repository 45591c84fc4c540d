"""Benchmark: wall time of a quick replayed node run against importing psutil + pynvml.

Both commands run alternately in the same script on the same machine, so the ratio is
robust to a noisy host. Target (issue #2): ratio < 3. Also verifies that the run does
not import torch.

    python bench/bench_node_run.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

DUMP = Path(__file__).resolve().parents[1] / "tests/fixtures/captured/h200-580.159.04/nvml_capture.json"
BASELINE = [sys.executable, "-c", "import psutil, pynvml"]
RUN = [sys.executable, "-m", "gpu_preflight", "run", "--quick", "--replay", str(DUMP)]
NO_TORCH = ("import sys, runpy; sys.argv=['gpu-preflight','run','--quick','--replay',%r,'--format','json'];"
            "\ntry: runpy.run_module('gpu_preflight', run_name='__main__')\nexcept SystemExit: pass\n"
            "print('torch imported' if 'torch' in sys.modules else 'no torch', file=sys.stderr)")


def wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    wall(BASELINE), wall(RUN)  # warm the page cache
    base, run = [], []
    for _ in range(args.repeat):
        base.append(wall(BASELINE))
        run.append(wall(RUN))
    b, r = statistics.median(base), statistics.median(run)
    torch = subprocess.run([sys.executable, "-c", NO_TORCH % str(DUMP)], capture_output=True, text=True).stderr
    print(f"baseline  python -c 'import psutil, pynvml'   median {b * 1000:7.1f} ms  (n={args.repeat})")
    print(f"run       gpu-preflight run --quick --replay   median {r * 1000:7.1f} ms")
    print(f"ratio     {r / b:.2f}x  (target < 3x)   torch check: {torch.strip().splitlines()[-1]}")
    return 0 if r / b < 3 and "no torch" in torch else 1


if __name__ == "__main__":
    raise SystemExit(main())
