"""Benchmark: ``gpu-preflight run --quick`` (2 local CPU ranks) over a bare torchrun.

The baseline is ``torchrun --standalone --nproc_per_node=2`` of a trivial all_reduce
script: the cost any distributed check pays to start. Runs alternate. Target (issue #3):
ratio <= 1.5.

    python bench/bench_run_vs_torchrun.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRIVIAL = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1 << 20)
dist.all_reduce(t)
dist.destroy_process_group()
"""


def wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, timeout=600)
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    script = Path(tempfile.mkdtemp()) / "trivial_allreduce.py"
    script.write_text(TRIVIAL)
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    bare_cmd = [torchrun, "--standalone", "--nproc_per_node=2", str(script)]
    ours_cmd = [sys.executable, "-m", "gpu_preflight", "run", "--quick", "--format", "json"]
    bare, ours = [], []
    for _ in range(a.repeat):
        bare.append(wall(bare_cmd))
        ours.append(wall(ours_cmd))
    b, o = statistics.median(bare), statistics.median(ours)
    print(f"bare torchrun, trivial all_reduce (2 ranks)   median {b:6.2f} s")
    print(f"gpu-preflight run --quick (2 CPU ranks)        median {o:6.2f} s")
    print(f"ratio {o / b:.2f}  (target <= 1.5)")


if __name__ == "__main__":
    main()
