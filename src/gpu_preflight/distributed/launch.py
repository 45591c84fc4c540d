"""Self-launch: run the distributed path on one node without a launcher.

``gpu-preflight run`` alone starts one worker per GPU (two CPU workers without GPUs) and
supervises them like torchrun would, but stricter: a hard deadline for the whole run,
worker logs kept, and a report written even when rank 0 itself dies or hangs — then
built by the supervisor from what the other ranks left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torch_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def local_gpu_count() -> int:
    """GPUs NVML sees (0 without a driver): one worker each."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return 0


@dataclass
class Supervised:
    """What the supervisor saw: the report rank 0 wrote, or the pieces to build one."""

    result_dir: Path
    report: dict[str, Any] | None
    exit_codes: dict[int, int | None]
    killed: list[int] = field(default_factory=list)
    logs: dict[int, Path] = field(default_factory=dict)


def supervise(argv: list[str], workers: int, *, budget_s: float, extra_env: dict[str, str] | None = None) -> Supervised:
    """Start ``workers`` copies of ``gpu-preflight <argv>`` as ranks 0..n-1 and wait for them."""
    result_dir = Path(tempfile.mkdtemp(prefix="gpu-preflight-"))
    port = free_port()
    threads = max(1, (os.cpu_count() or 1) // workers)
    procs: dict[int, subprocess.Popen[bytes]] = {}
    logs: dict[int, Path] = {}
    for rank in range(workers):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(workers),
                   LOCAL_WORLD_SIZE=str(workers), GROUP_RANK="0", GROUP_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), GPU_PREFLIGHT_LAUNCHER="self", GPU_PREFLIGHT_RESULT_DIR=str(result_dir),
                   OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", str(threads)), **(extra_env or {}))
        logs[rank] = result_dir / f"rank{rank}.log"
        with open(logs[rank], "wb") as log:
            procs[rank] = subprocess.Popen([sys.executable, "-m", "gpu_preflight", *argv], env=env,
                                           stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    report_path = result_dir / "report.json"
    deadline = time.monotonic() + budget_s
    rank0_done_at: float | None = None
    while time.monotonic() < deadline:
        if procs[0].poll() is not None:
            rank0_done_at = rank0_done_at or time.monotonic()
            if report_path.exists() or time.monotonic() - rank0_done_at > 5:
                break
        if all(p.poll() is not None for p in procs.values()):
            break
        time.sleep(0.1)
    killed = []
    for rank, p in procs.items():
        if p.poll() is None:
            killed.append(rank)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    report = json.loads(report_path.read_text()) if report_path.exists() else None
    return Supervised(result_dir, report, {r: p.returncode for r, p in procs.items()}, killed, logs)


def gathered_from_files(sup: Supervised, workers: int, topology: dict[str, Any]) -> dict[str, Any]:
    """The gather rank 0 could not do: rank files left in the result directory."""
    payloads, missing = {}, {}
    for rank in range(workers):
        path = sup.result_dir / f"rank{rank}.json"
        if path.exists():
            payloads[rank] = json.loads(path.read_text())
            continue
        code = sup.exit_codes.get(rank)
        why = ("hung and was killed at the run's deadline" if rank in sup.killed
               else f"exited with code {code} before reporting")
        tail = _tail(sup.logs.get(rank))
        missing[rank] = f"rank {rank} on {topology.get('hostname', 'this host')} {why}" + (f": {tail}" if tail else "")
    return {"payloads": payloads, "missing": missing, "topology": topology}


def _tail(path: Path | None, lines: int = 2) -> str:
    if path is None or not path.exists():
        return ""
    text = path.read_text(errors="replace").strip().splitlines()
    return " | ".join(t.strip() for t in text[-lines:])[:300]
