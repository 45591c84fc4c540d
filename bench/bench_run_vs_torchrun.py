"""Benchmark: ``gpu-preflight run --quick`` (N local CPU ranks) over a bare torchrun.

The baseline is ``torchrun --standalone --nproc_per_node=N`` of a trivial all_reduce
script: the cost any distributed check pays to start. Runs alternate. Target (issue #3):
ratio <= 1.5 at 2 ranks; issue #16 item 7 asks that the ratio not grow with the ranks
(it went from 1.65x at 2 to 2.19x at 8 when each rank imported torch._dynamo), hence
``--ranks 2 8``, which times each count in turn and prints a ratio per count.

    python bench/bench_run_vs_torchrun.py [--repeat 3] [--ranks 2 [8 ...]]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from _selfcheck import Ran, fail, require, timed

TRIVIAL = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1 << 20)
dist.all_reduce(t)
dist.destroy_process_group()
"""


def judged(ran: Ran) -> bool:
    """Our run reached a verdict (exit 0-2 and a JSON report on stdout), whatever the verdict."""
    try:
        report = json.loads(ran.stdout)
    except ValueError:
        return False
    return ran.returncode in (0, 1, 2) and isinstance(report, dict) and "cluster_summary" in report


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--ranks", type=int, nargs="+", default=[2], help="local CPU ranks (each count timed in turn)")
    a = p.parse_args()
    if any(n < 1 for n in a.ranks):
        fail("bench_run_vs_torchrun", f"--ranks must be >= 1, got {a.ranks}")
    require("bench_run_vs_torchrun", "torch.distributed", "gpu_preflight")
    script = Path(tempfile.mkdtemp()) / "trivial_allreduce.py"
    script.write_text(TRIVIAL)
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    if not Path(torchrun).is_file():
        fail("bench_run_vs_torchrun", f"no torchrun beside {sys.executable}")
    for n in a.ranks:
        bare_cmd = [torchrun, "--standalone", f"--nproc_per_node={n}", str(script)]
        ours_cmd = [sys.executable, "-m", "gpu_preflight", "run", "--quick", "--format", "json",
                    "--set", f"workload.cpu_workers={n}"]
        bare, ours = [], []
        for _ in range(a.repeat):
            bare.append(timed("bench_run_vs_torchrun", bare_cmd, what="the bare torchrun", timeout=600).seconds)
            ours.append(timed("bench_run_vs_torchrun", ours_cmd, what="gpu-preflight run", ok=judged,
                              timeout=600).seconds)
        b, o = statistics.median(bare), statistics.median(ours)
        print(f"bare torchrun, trivial all_reduce ({n} ranks)   median {b:6.2f} s")
        print(f"gpu-preflight run --quick ({n} CPU ranks)        median {o:6.2f} s")
        print(f"ratio at {n} ranks {o / b:.2f}  (target <= 1.5)", flush=True)


if __name__ == "__main__":
    main()
