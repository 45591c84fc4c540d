"""What a person sees while a real self-launched run works: on a terminal, in a log, and with --quiet.

Each test runs ``gpu-preflight run`` for real (two gloo CPU workers under the self-launch
supervisor) under an outer timeout. The terminal is a real pseudo-terminal (:mod:`pty`):
what the test reads from its master side is what a terminal would have been sent.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.report.console import console_lines

from .conftest import REPO
from .fault_hooks import fault_env
from .torch_extra import torch_or_skip

torch_or_skip()

BASE_ENV = {k: v for k, v in os.environ.items() if not k.startswith(("GPU_PREFLIGHT_", "RANK", "LOCAL_RANK",
                                                                       "WORLD_SIZE", "MASTER_", "SLURM_", "OMPI_"))}
BASE_ENV["COLUMNS"] = "120"
STAGES = ["starting 2 workers", "rendezvous", "software stack", "GEMM", "training smoke", "collectives",
          "DDP training", "gather", "report"]


def gp(*args: str) -> list[str]:
    return [sys.executable, "-m", "gpu_preflight", "run", "--no-history", *args]


def on_a_terminal(args: list[str], env: dict[str, str], timeout: float = 240) -> tuple[int, str, str]:
    """Run with stderr on a 160-column pseudo-terminal and stdout on a pipe; (code, stdout, terminal)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave,
                            env={**BASE_ENV, **env}, cwd=REPO)
    os.close(slave)
    stdout: list[bytes] = []
    reader = threading.Thread(target=lambda: stdout.append(proc.stdout.read() if proc.stdout else b""), daemon=True)
    reader.start()
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    seen = []
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal is gone
                break
            if not chunk:
                break
            seen.append(chunk)
    finally:
        timer.cancel()
        os.close(master)
    reader.join(30)
    code = proc.wait(30)
    assert code not in (-9, 137), "run killed at the outer timeout"
    return code, b"".join(stdout).decode(), b"".join(seen).decode(errors="replace")


def test_a_terminal_sees_the_stage_a_bar_and_who_it_waits_for() -> None:
    """Rank 1 stops as it starts training: rank 0's first collective waits for it, and says so."""
    code, stdout, tty = on_a_terminal(gp("--format", "json", "--timeout-s", "10"),
                                      fault_env(fault="stop:1:train"))
    report = json.loads(stdout)  # machine output alone on stdout
    assert report["cluster_summary"]["overall_status"] == "FAIL" and code == 2
    assert "\x1b[" in tty and "━" in tty  # drawn with a terminal's control codes
    assert "starting 2 workers" in tty
    assert "collectives [4/13]: all_reduce on all" in tty  # stage [step/steps]: step, as rank 0 sees it
    assert "waiting for 1 of 2 ranks: rank 1 (training smoke)" in tty
    assert tty.rstrip("\r\n").endswith("\x1b[2K")  # the line is erased at the end: nothing left over
    assert "gpu-preflight: stage" not in tty  # no log lines on a terminal


def test_a_log_gets_one_line_per_stage_and_the_verdict_last(tmp_path: Path) -> None:
    """Off a terminal: one plain line per stage, no bar control characters; ``[RESULT]`` last.
    ``--localize`` on one node says why it does nothing and leaves an empty exclude list."""
    exclude = tmp_path / "exclude.txt"
    exclude.write_text("stale-host-from-last-run\n")
    out = subprocess.run(gp("--timeout-s", "30", "--localize", "--exclude-file", str(exclude)), capture_output=True,
                         text=True, timeout=240, env=BASE_ENV, cwd=REPO)
    assert out.stdout == ""
    assert "\x1b" not in out.stderr and "\r" not in out.stderr and "━" not in out.stderr
    lines = out.stderr.splitlines()
    stages = [line.removeprefix("gpu-preflight: stage ").rsplit(" at ", 1) for line in lines
              if line.startswith("gpu-preflight: stage ")]
    names = [name for name, _ in stages]
    assert names.count("node checks") <= 1  # only when the node checks outlast the workloads
    assert [name for name in names if name != "node checks"] == STAGES
    seconds = [float(at.removesuffix(" s")) for _, at in stages]
    assert seconds == sorted(seconds)
    assert any(line.startswith("gpu-preflight: --localize not run: one node") and str(exclude) in line
               for line in lines)
    assert exclude.read_text() == ""
    assert lines[-1].startswith("[RESULT] ")
    assert out.returncode == {"SUCCESS": 0, "WARNING": 1, "FAILURE": 2, "ERROR": 3}[lines[-1].split()[1].rstrip(":")]


def test_quiet_prints_the_verdict_and_nothing_else(tmp_path: Path) -> None:
    out = subprocess.run(gp("--quiet", "--timeout-s", "30", "--report-dir", str(tmp_path)), capture_output=True,
                         text=True, timeout=240, env=BASE_ENV, cwd=REPO)
    report = json.loads((tmp_path / "report.json").read_text())
    table = [line.plain() for line in console_lines(ClusterReport.of(report), 120)]
    written = f"gpu-preflight: report written to {tmp_path / 'report.json'}"
    assert out.stderr.splitlines() == [written, *table]
    assert table[-1].startswith("[RESULT] ") and out.stdout == ""
