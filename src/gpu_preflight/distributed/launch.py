"""Self-launch: run the distributed path on one node without a launcher.

``gpu-preflight run`` alone starts one worker per GPU (two CPU workers without GPUs) and
supervises them like torchrun would, but stricter: it hosts the job's store (so a stuck
rank 0 cannot freeze it), ends the run as soon as no worker still answers, keeps worker
logs, and writes a report even when rank 0 itself dies or hangs — from the rank that took
over, else built by the supervisor from what the ranks left behind.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from ..backends.launcher.topology import Launcher, Topology
from ..interrupts import at_stop, held
from ..progress import StageState
from .store import PREFIX, get_text, silent
from .watch import JobWatch


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


def local_gpu_count() -> int:
    """GPUs NVML sees (0 without a driver): one worker each."""
    try:
        # optional: without nvidia-ml-py (or its library) this reads as no NVML, not an error
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return 0


class Supervised(msgspec.Struct):
    """What the supervisor saw: the report rank 0 wrote, or the pieces to build one."""

    result_dir: Path
    report: dict[str, Any] | None
    exit_codes: dict[int, int | None]
    killed: list[int] = []
    logs: dict[int, Path] = {}


def supervise(argv: list[str], workers: int, *, budget_s: float, collective_timeout_s: float | None = None,
              extra_env: dict[str, str] | None = None, view: Any = None) -> Supervised:
    """Start ``workers`` copies of ``gpu-preflight <argv>`` as ranks 0..n-1 and wait for them.

    The supervisor hosts the job's store, as torchrun's agent does, so a rank 0 that is stopped
    or hung does not freeze it: the other ranks see its heartbeat go stale and one of them
    reports instead. The supervisor ends the run once a report exists and every worker has
    exited or gone silent, or as soon as no worker that still answers is left
    (:class:`Liveness`); ``budget_s`` (the run's ``run_budget_s``) is the last resort. A worker
    with no heartbeat yet counts as silent after the run's ``collective_timeout_s`` (the
    time rank 0 waits for ranks to arrive) plus :data:`JOIN_GRACE_S`. A self-launched run's
    workers get their request through ``extra_env`` (:func:`gpu_preflight.run.worker_env`).

    ``view`` (a :class:`~gpu_preflight.progress.StageView`) shows the job's stages
    from the store it hosts while the workers run (their own stderr goes to their logs), and
    is closed before this returns.
    """
    procs: dict[int, subprocess.Popen[bytes]] = {}
    with held():  # a signal between making the directory (or a worker, below) and registering it would leave it
        result_dir = Path(tempfile.mkdtemp(prefix="gpu-preflight-"))
        at_stop(functools.partial(_abandon, procs, result_dir, os.stat(result_dir)))
    port = free_port()
    threads = max(1, (os.cpu_count() or 1) // workers)
    logs: dict[int, Path] = {}
    for rank in range(workers):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(workers),
                   LOCAL_WORLD_SIZE=str(workers), GROUP_RANK="0", GROUP_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), GPU_PREFLIGHT_LAUNCHER=Launcher.SELF.value,
                   GPU_PREFLIGHT_RESULT_DIR=str(result_dir), TORCHELASTIC_USE_AGENT_STORE="True",
                   OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", str(threads)), **(extra_env or {}))
        logs[rank] = result_dir / f"rank{rank}.log"
        with held(), open(logs[rank], "wb") as log:
            procs[rank] = subprocess.Popen([sys.executable, "-m", "gpu_preflight", *argv], env=env,
                                           stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    report_path = result_dir / "report.json"
    deadline = time.monotonic() + budget_s
    if view is not None:
        view.show(StageState(_starting(workers)))
    watch = None
    try:
        store = _host_store(port)
        live = Liveness(store, workers, join_s=(collective_timeout_s or budget_s) + JOIN_GRACE_S)
        if view is not None:
            watch = _watch(store, workers, view)
        reported_at: float | None = None
        while time.monotonic() < deadline:
            running = [r for r, p in procs.items() if p.poll() is None]
            answering = [r for r in running if not live.silent(r)]
            if report_path.exists():
                reported_at = reported_at or time.monotonic()
                if not answering or time.monotonic() - reported_at > EXIT_GRACE_S:
                    break
            elif not answering:  # nobody left who could still write a report
                break
            time.sleep(0.2)
    finally:
        if watch is not None:
            watch.stop()
        killed = _kill(procs)
    report = json.loads(report_path.read_text()) if report_path.exists() else None
    return Supervised(result_dir, report, {r: p.returncode for r, p in procs.items()}, killed, logs)


JOIN_GRACE_S = 30.0  # torch's import and start-up on a loaded machine, before a first heartbeat
EXIT_GRACE_S = 15.0  # a report exists: ranks still answering get this long to leave in order


class Liveness:
    """Which workers still answer: a heartbeat seen changing within the runner's stale time; a
    worker with none yet is silent once rank 0 gave up waiting for it, or after ``join_s``."""

    def __init__(self, store: Any, workers: int, join_s: float) -> None:
        self.store, self.workers, self.join_s = store, workers, join_s
        self.started = time.monotonic()

    def silent(self, rank: int) -> bool:
        if silent(self.store, rank):  # its beat stood still, by our clock (:mod:`.liveness`)
            return True
        if get_text(self.store, f"{PREFIX}/beat/{rank}") is None:
            absent = get_text(self.store, f"{PREFIX}/formation")  # rank 0 gave up waiting for these
            return time.monotonic() - self.started > self.join_s or (absent is not None and rank in json.loads(absent))
        return False


def _watch(store: Any, workers: int, view: Any) -> JobWatch:
    """The job's progress from the store this supervisor hosts, shown while its workers run."""
    host = socket.gethostname()
    topo = Topology(launcher=Launcher.SELF, world_size=workers, rank=0, local_rank=0, local_world_size=workers,
                    node_rank=0, num_nodes=1, hostname=host, hosts=(host,))
    return JobWatch(store, topo, view, before=_starting(workers)).start()


def _starting(workers: int) -> str:
    return f"starting {workers} worker" + ("s" if workers != 1 else "")


def _host_store(port: int) -> Any:
    # optional: torch comes with the [torch] extra, not with a node-only install
    import torch.distributed as dist

    return dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)  # type: ignore[attr-defined]


def _kill(procs: dict[int, subprocess.Popen[bytes]]) -> list[int]:
    """SIGKILL the workers still running (a stopped one too); the ranks killed."""
    killed = []
    for rank, p in procs.items():
        if p.poll() is None:
            killed.append(rank)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    return killed


def _abandon(procs: dict[int, subprocess.Popen[bytes]], result_dir: Path, made: os.stat_result) -> None:
    """A signal stops the supervisor (:mod:`gpu_preflight.interrupts`): its workers, each in a
    session of its own that no terminal's Ctrl-C reaches, are killed, and the scratch directory
    goes unless the run already removed it (and only the one made here: same device and inode)."""
    _kill(procs)
    with contextlib.suppress(OSError):
        now = os.stat(result_dir, follow_symlinks=False)
        if (now.st_dev, now.st_ino) == (made.st_dev, made.st_ino):
            shutil.rmtree(result_dir, ignore_errors=True)


def gathered_from_files(sup: Supervised, workers: int, topology: dict[str, Any]) -> dict[str, Any]:
    """The gather rank 0 could not do: rank files left in the result directory, each read back
    as a payload (one cut short by its rank's death, or not a payload, makes the rank missing,
    saying where it went wrong, as the gather does)."""
    from .payload import PAYLOAD, RankPayload, WireError, unreadable

    payloads, missing = {}, {}
    for rank in range(workers):
        path = sup.result_dir / f"rank{rank}.json"
        host = topology.get("hostname", "this host")
        if path.exists():
            try:
                payloads[rank] = RankPayload.from_json(path.read_bytes()).to_dict()
            except WireError as exc:
                missing[rank] = f"rank {rank} on {host} {unreadable(PAYLOAD, exc)}"
            continue
        code = sup.exit_codes.get(rank)
        why = ("hung and was killed at the run's deadline" if rank in sup.killed
               else f"exited with code {code} before reporting")
        tail = _tail(sup.logs.get(rank))
        missing[rank] = f"rank {rank} on {host} {why}" + (f": {tail}" if tail else "")
    return {"payloads": payloads, "missing": missing, "topology": topology}


def _tail(path: Path | None, lines: int = 2) -> str:
    if path is None or not path.exists():
        return ""
    text = path.read_text(errors="replace").strip().splitlines()
    return " | ".join(t.strip() for t in text[-lines:])[:300]
