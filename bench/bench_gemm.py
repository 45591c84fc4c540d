"""Benchmark: our GEMM TFLOP/s over a bare torch.matmul loop on the same device and size.

Alternating rounds in one process. Target (issue #3): ratio >= 0.97. On CPU (fp32) the
figures are GFLOP/s-scale; on a GPU pass --dtype bf16 --n 8192.

    python bench/bench_gemm.py [--n 1024] [--dtype fp32] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

from _selfcheck import require


def main() -> None:
    require("bench_gemm", "torch", "gpu_preflight.workloads.compute")
    import torch

    from gpu_preflight.workloads.compute import _dtype, run_gemm

    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--dtype", default="fp32")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--rounds", type=int, default=7)
    a = p.parse_args()
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    x = torch.randn(a.n, a.n).to(device=device, dtype=_dtype(torch, a.dtype))
    y = torch.randn(a.n, a.n).to(device=device, dtype=_dtype(torch, a.dtype))
    ours, bare = [], []
    for _ in range(a.rounds):
        x @ y
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.iters):
            x @ y
        if device.type == "cuda":
            torch.cuda.synchronize()
        bare.append(2 * a.n**3 * a.iters / (time.perf_counter() - t0) / 1e12)
        ours.append(run_gemm(device, a.dtype, a.n, a.iters).tflops)
    o, b = statistics.median(ours), statistics.median(bare)
    print(f"GEMM {a.dtype} {a.n}^3 on {device}, {a.rounds} rounds x {a.iters} iters")
    print(f"bare torch.matmul loop  median {b * 1000:10.2f} GFLOP/s")
    print(f"gpu-preflight run_gemm  median {o * 1000:10.2f} GFLOP/s")
    print(f"ratio {o / b:.3f}  (target >= 0.97)")


if __name__ == "__main__":
    main()
