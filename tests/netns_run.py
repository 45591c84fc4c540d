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
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
LIGHT = ["--set", "workload.train_steps=1", "--set", "workload.gemm_n_cpu=64",
         "--set", "workload.collective_max_bytes_cpu=1048576"]


def launch(names: list[str], port: int, tmp: Path, extra: list[str], *, timeout_s: int = 400,
           mode: str = "quick") -> tuple[list[tuple[int, str, str]], float]:
    """Start one agent per host (``names``: namespaces, host i at 10.250.0.i) and wait for all of them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_")}
    procs = []
    t0 = time.monotonic()
    for i, ns in enumerate(names, 1):
        cmd = ["ip", "netns", "exec", ns, "env", "GLOO_SOCKET_IFNAME=eth0", f"GPU_PREFLIGHT_NODE_NAME=host{i}",
               "timeout", str(timeout_s), TORCHRUN, f"--nnodes={len(names)}", "--nproc_per_node=1",
               "--rdzv_backend=c10d", f"--rdzv_endpoint=10.250.0.1:{port}", f"--rdzv_id=gpl{port}",
               f"--rdzv_conf=is_host={str(i == 1).lower()}", f"--local_addr=10.250.0.{i}", "-m", "gpu_preflight",
               "run", "--format", "json", "--timeout-s", "20", "--check", "network.*",
               "--check", "cluster.completeness", "--localize", mode, "--exclude-file", str(tmp / "exclude"),
               "--no-history", *extra]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                      cwd=REPO))
    outs = [p.communicate(timeout=timeout_s + 20) for p in procs]
    return [(p.returncode, o, e) for p, (o, e) in zip(procs, outs, strict=True)], time.monotonic() - t0


def report_of(results: list[tuple[int, str, str]]) -> dict[str, Any]:
    """Rank 0's JSON report (the one agent whose stdout is not empty)."""
    stdout = next((out for _, out, _ in results if out.strip()), "")
    assert stdout, "\n".join(err[-3000:] for _, _, err in results)
    report: dict[str, Any] = json.loads(stdout)
    return report
