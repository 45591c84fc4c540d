"""SIGINT and SIGTERM at random moments of a real ``gpu-preflight run --report-dir`` (issue 28 item 11).

Shared by tests/test_signals.py, the seeded slice in tests/test_fuzz_hostile.py and the long
run in bench/bench_fuzz.py. Each case starts the program on the 8-GPU NVML stub, waits until
its first line has caught the signals (SIGTERM in its ``SigCgt`` mask in ``/proc``; before
that the interpreter is still starting and importing the command line, and its defaults
apply: nothing can be staged by then), then sends SIGINT or SIGTERM after a random delay, or
the moment a staged ``.*.tmp`` appears in the report directory (the window the issue found).
What must hold afterwards, whatever the moment:

- the run either finished (exit 0-3, its normal stderr) or was stopped: exit 128 + the
  signal's number and, on stderr, the one interruption line last, after nothing but lines a
  finished run prints too (no traceback);
- no ``.*.tmp`` anywhere under the report directory;
- the directory holds no report or a whole one: ``report.html`` beside ``report.json``, and
  every artifact ``report.json`` lists has the checksum it gives.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

SIGNALS = (signal.SIGINT, signal.SIGTERM)
RUN_ARGS = ("run", "--node-only", "--no-history", "--quiet", "--format", "json")
HANG_S = 60.0


def interrupt_line(signum: int) -> str:
    return f"gpu-preflight: interrupted by {signal.Signals(signum).name} (exit {128 + signum})"


def catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` (``SigCgt`` in /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next((int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:")), 0)
    return bool(mask >> (signum - 1) & 1)


def staged(report_dir: Path) -> list[str]:
    """Temporaries (``.*.tmp``) anywhere under ``report_dir``."""
    return [str(Path(root, name).relative_to(report_dir)) for root, _, names in os.walk(report_dir)
            for name in names if name.startswith(".") and name.endswith(".tmp")]


def directory_problem(report_dir: Path) -> str | None:
    """What is wrong with a report directory after a run, stopped or not; None when it is whole."""
    left = staged(report_dir)
    if left:
        return f"temporaries left: {left}"
    report, html = report_dir / "report.json", report_dir / "report.html"
    if not report.exists():
        return "report.html without report.json" if html.exists() else None
    if not html.exists():
        return "report.json without report.html"
    data = json.loads(report.read_bytes())
    for artifact in data.get("artifacts", []):
        path = report_dir / artifact["path"]
        if not path.is_file():
            return f"report.json lists {artifact['path']}, which is missing"
        if hashlib.sha256(path.read_bytes()).hexdigest() != artifact["sha256"]:
            return f"report.json's checksum of {artifact['path']} is not the file's: another run's file"
    return None


def finished_lines(env: dict[str, str], report_dir: Path) -> tuple[set[str], float]:
    """The stderr lines of the same run left alone, and how long it took."""
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "gpu_preflight", *RUN_ARGS, "--report-dir", str(report_dir)],
                          env=env, capture_output=True, text=True, timeout=HANG_S, check=False)
    took = time.monotonic() - t0
    assert proc.returncode in (0, 1, 2, 3), proc.stderr
    shutil.rmtree(report_dir, ignore_errors=True)
    return set(proc.stderr.splitlines()), took


def kill_during_run(env: dict[str, str], report_dir: Path, signum: int, delay: float | None,
                    normal: set[str]) -> tuple[str, str]:
    """One case: ``(outcome, detail)``, outcome ``stopped``, ``finished`` or ``wrong`` (``hang``
    when the run outlived :data:`HANG_S`). ``delay`` None: the signal goes when the first staged
    file appears (or never, if the run ends first)."""
    shutil.rmtree(report_dir, ignore_errors=True)
    proc = subprocess.Popen([sys.executable, "-m", "gpu_preflight", *RUN_ARGS, "--report-dir", str(report_dir)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        if delay is not None:
            while proc.poll() is None and not catches(proc.pid, signal.SIGTERM):  # SIGINT: Python's from the start
                time.sleep(0.002)
            time.sleep(delay)
        else:
            while proc.poll() is None and not staged(report_dir):
                time.sleep(0.001)
        if proc.poll() is None:
            proc.send_signal(signum)
        _, err = proc.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return "hang", f"{signal.Signals(signum).name} at {delay}: still running after {HANG_S:g} s"
    lines = err.splitlines()
    moment = "the first staged file" if delay is None else f"{delay:.3f} s"
    where = f"{signal.Signals(signum).name} at {moment}: exit {proc.returncode}, stderr {lines[-3:]}"
    problem = directory_problem(report_dir)
    if problem:
        return "wrong", f"{where}: {problem}"
    if proc.returncode == 128 + signum:
        if lines[-1:] != [interrupt_line(signum)] or not set(lines[:-1]) <= normal:
            return "wrong", f"{where}: not one interruption line after a run's own lines"
        return "stopped", where
    if proc.returncode in (0, 1, 2, 3) and set(lines) <= normal:
        return "finished", where
    return "wrong", where


def cases(rng: random.Random, count: int, run_s: float) -> list[tuple[int, float | None]]:
    """``count`` (signal, delay) pairs: every third at the first staged file, the others at a
    uniform moment of a run that takes ``run_s`` (start-up included, so mostly while it works)."""
    return [(rng.choice(SIGNALS), None if i % 3 == 2 else rng.uniform(0.0, 0.8 * run_s)) for i in range(count)]
