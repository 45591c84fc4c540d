"""Benchmark: our all_reduce busbw over a bare torch.distributed loop, same ranks, same size.

Two gloo ranks on this host (or NCCL ranks on GPUs); measurements alternate so that noise
hits both sides alike. Target (issue #3): ratio >= 0.95 at >= 64 MB.

    python bench/bench_allreduce.py [--size-mb 64] [--ranks 2] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import timedelta

from _selfcheck import fail, require


def worker(rank: int, world: int, size_mb: int, rounds: int, iters: int, port: int) -> None:
    import torch
    import torch.distributed as dist

    from gpu_preflight.workloads.collectives import bus_factor, run_collective

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    cuda = torch.cuda.is_available() and torch.cuda.device_count() >= world
    device = torch.device(f"cuda:{rank}") if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world, timeout=timedelta(seconds=120))
    nbytes = size_mb << 20
    buf = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    ours, bare = [], []
    for _ in range(rounds):
        dist.all_reduce(buf)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(buf)
        if cuda:
            torch.cuda.synchronize(device)
        elapsed = (time.perf_counter() - t0) / iters
        bare.append(nbytes / elapsed / 1e9 * bus_factor("all_reduce", world))
        res = run_collective("all_reduce", group=None, ranks=list(range(world)), group_name="all", sizes=[nbytes],
                             iters=iters, warmup=1, device=device, timeout_s=120)
        ours.append(res.results[0].busbw_gbps)
    if rank == 0:
        o, b = statistics.median(ours), statistics.median(bare)
        backend = "NCCL" if cuda else "gloo"
        print(f"all_reduce {size_mb} MiB x{world} ranks ({backend}), {rounds} rounds x {iters} iters")
        print(f"bare torch.distributed loop   median busbw {b:8.3f} GB/s")
        print(f"gpu-preflight run_collective  median busbw {o:8.3f} GB/s")
        print(f"ratio {o / b:.3f}  (target >= 0.95)")
    dist.destroy_process_group()


def main() -> None:
    require("bench_allreduce", "torch.distributed", "gpu_preflight.workloads.collectives")
    import torch.multiprocessing as mp

    from gpu_preflight.distributed.launch import free_port

    p = argparse.ArgumentParser()
    p.add_argument("--size-mb", type=int, default=64)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iters", type=int, default=5)
    a = p.parse_args()
    try:
        mp.spawn(worker, args=(a.ranks, a.size_mb, a.rounds, a.iters, free_port()), nprocs=a.ranks, join=True)
    except Exception as exc:  # a rank that failed: no ratio is printed
        fail("bench_allreduce", f"a rank failed ({type(exc).__name__})", str(exc))


if __name__ == "__main__":
    main()
