"""Run ``gpu-preflight run --localize`` as one torchrun agent per namespace host (tests and bench).

Small sizes on purpose: the localisation, not the workloads, is what these runs are for,
and a 2-core CI machine runs every agent at once. ``LIGHT`` keeps the GEMM, the training
smoke and the collectives short (1 MiB messages, which a 100 Mbit/s cap still slows 25x).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[1]
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
LIGHT = ["--set", "workload.train_steps=1", "--set", "workload.gemm_n_cpu=64",
         "--set", "workload.collective_max_bytes_cpu=1048576"]


@dataclass(frozen=True)
class Layout:
    """Who is where in a multi-host test: ``names[i - 1]`` is the job's name for namespace host
    ``i`` (at 10.250.0.i), shuffled against the addresses, and ``order`` the shuffled order in
    which the agents start. c10d numbers nodes by address, so node ranks never follow the job's
    host list by construction: a report that names nodes by position blames the wrong host."""

    names: list[str]
    order: list[int]
    seed: int

    def name(self, host: int) -> str:
        """The job's name for namespace host ``host`` (1-based)."""
        return self.names[host - 1]


def layout(count: int, seed: int | None = None) -> Layout:
    """A seeded :class:`Layout` (``GPU_PREFLIGHT_TEST_SEED`` replays one), printed for the log."""
    seed = int(os.environ.get("GPU_PREFLIGHT_TEST_SEED") or random.randrange(1 << 30)) if seed is None else seed
    rng = random.Random(seed)
    names = [f"host{k}" for k in range(1, count + 1)]
    while count > 1:
        rng.shuffle(names)
        if names != sorted(names, key=lambda n: int(n[4:])):  # never the list order by luck
            break
    order = list(range(1, count + 1))
    rng.shuffle(order)
    print(f"multi-host layout seed {seed}: names by address {names}, start order {order}", file=sys.stderr)
    return Layout(names, order, seed)


def slurm_env(name: str, count: int) -> list[str]:
    """What ``srun --ntasks-per-node=1`` sets on host ``name`` of ``host[1-count]`` (``env`` arguments)."""
    node_id = int(name[4:]) - 1
    return [f"SLURM_JOB_NODELIST=host[1-{count}]", f"SLURM_JOB_NUM_NODES={count}", f"SLURM_NNODES={count}",
            f"SLURMD_NODENAME={name}", f"SLURM_NODEID={node_id}", f"SLURM_PROCID={node_id}",
            f"SLURM_NTASKS={count}", "SLURM_LOCALID=0", f"SLURM_TASKS_PER_NODE=1(x{count})", "SLURM_JOB_ID=4242"]


def launch(names: list[str], port: int, tmp: Path, extra: list[str], *, timeout_s: int = 400,
           mode: str = "quick", where: Layout | None = None) -> tuple[list[tuple[int, str, str]], float]:
    """Start one agent per host (``names``: namespaces, host i at 10.250.0.i) as ``srun ... torchrun
    --rdzv_backend=c10d`` would, named and started as ``where`` says, and wait for all of them.
    Results come in namespace order."""
    where = where or layout(len(names))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_")}
    procs: dict[int, subprocess.Popen[str]] = {}
    files: dict[int, tuple[IO[str], IO[str]]] = {}
    t0 = time.monotonic()
    for i in where.order:
        ns = names[i - 1]
        cmd = ["ip", "netns", "exec", ns, "env", "GLOO_SOCKET_IFNAME=eth0", *slurm_env(where.name(i), len(names)),
               "timeout", str(timeout_s), TORCHRUN, f"--nnodes={len(names)}", "--nproc_per_node=1",
               "--rdzv_backend=c10d", f"--rdzv_endpoint=10.250.0.1:{port}", f"--rdzv_id=gpl{port}",
               f"--rdzv_conf=is_host={str(i == 1).lower()}", f"--local_addr=10.250.0.{i}", "-m", "gpu_preflight",
               "run", "--format", "json", "--timeout-s", "20", "--check", "network.*",
               "--check", "cluster.completeness", "--localize", mode, "--exclude-file", str(tmp / "exclude"),
               "--no-history", *extra]
        # files, not pipes: rank 0's report can outgrow a pipe while another agent's pipe is being read
        out, err = (tmp / f"agent{i}.out").open("w+"), (tmp / f"agent{i}.err").open("w+")
        files[i] = (out, err)
        procs[i] = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env, cwd=REPO)
    for p in procs.values():
        p.wait(timeout=timeout_s + 20)
    wall = time.monotonic() - t0
    results = []
    for i in sorted(procs):
        p, pair = procs[i], files[i]
        texts = []
        for fh in pair:
            fh.seek(0)
            texts.append(fh.read())
            fh.close()
        results.append((p.returncode, texts[0], texts[1]))
    return results, wall


def report_of(results: list[tuple[int, str, str]]) -> dict[str, Any]:
    """Rank 0's JSON report (the one agent whose stdout is not empty)."""
    stdout = next((out for _, out, _ in results if out.strip()), "")
    assert stdout, "\n".join(err[-3000:] for _, _, err in results)
    report: dict[str, Any] = json.loads(stdout)
    return report
