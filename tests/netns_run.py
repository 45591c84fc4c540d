"""Run ``gpu-preflight run --localize`` as one torchrun agent per namespace host (tests and bench).

Small sizes on purpose: the localisation, not the workloads, is what these runs are for,
and a 2-core CI machine runs every agent at once. ``LIGHT`` keeps the GEMM, the training
smoke and the collectives short (1 MiB messages, which a 100 Mbit/s cap still slows 25x).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[1]
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
LIGHT = ["--set", "workload.train_steps=1", "--set", "workload.gemm_n_cpu=64",
         "--set", "workload.collective_max_bytes_cpu=1048576"]


def launch(names: list[str], port: int, tmp: Path, extra: list[str], *, timeout_s: int = 400,
           mode: str = "quick") -> tuple[list[tuple[int, str, str]], float]:
    """Start one agent per host (``names``: namespaces, host i at 10.250.0.i) and wait for all of them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_")}
    procs = []
    files: list[tuple[IO[str], IO[str]]] = []
    t0 = time.monotonic()
    for i, ns in enumerate(names, 1):
        cmd = ["ip", "netns", "exec", ns, "env", "GLOO_SOCKET_IFNAME=eth0", f"GPU_PREFLIGHT_NODE_NAME=host{i}",
               "timeout", str(timeout_s), TORCHRUN, f"--nnodes={len(names)}", "--nproc_per_node=1",
               "--rdzv_backend=c10d", f"--rdzv_endpoint=10.250.0.1:{port}", f"--rdzv_id=gpl{port}",
               f"--rdzv_conf=is_host={str(i == 1).lower()}", f"--local_addr=10.250.0.{i}", "-m", "gpu_preflight",
               "run", "--format", "json", "--timeout-s", "20", "--check", "network.*",
               "--check", "cluster.completeness", "--localize", mode, "--exclude-file", str(tmp / "exclude"),
               "--no-history", *extra]
        # files, not pipes: rank 0's report can outgrow a pipe while another agent's pipe is being read
        out, err = (tmp / f"agent{i}.out").open("w+"), (tmp / f"agent{i}.err").open("w+")
        files.append((out, err))
        procs.append(subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env, cwd=REPO))
    for p in procs:
        p.wait(timeout=timeout_s + 20)
    wall = time.monotonic() - t0
    results = []
    for p, pair in zip(procs, files, strict=True):
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
