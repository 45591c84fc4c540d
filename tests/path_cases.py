"""Every command that reads a path it is given, fed what a path can name besides a file.

A FIFO with no writer (``open`` blocks for ever), ``/dev/zero`` (reading it "whole" ends in
``MemoryError``), a directory and a 1 GiB sparse file (of zeros, claiming a size far past
any real input) must each end the command at once with exit 3 and one line naming the
path: never a hang, a traceback or exit 1. Used by ``tests/test_fuzz_hostile.py`` (every
command) and ``bench/bench_fuzz.py`` (the counts).

Each command runs as a real process (``python -m gpu_preflight``), with ``{path}`` standing
for the hostile path; ``scontrol`` is not installed here, so the Slurm health check says
what it read and that it cannot act, which is exit 3 as well.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from .conftest import H200_DUMP

GIB = 1 << 30

COMMANDS: dict[str, list[str]] = {
    "history import": ["history", "import", "{path}", "--db", "{tmp}/h.sqlite"],
    "history check": ["history", "check", "{path}", "--db", "{tmp}/h.sqlite"],
    "baseline capture": ["baseline", "capture", "{path}"],
    "slurm drain-report": ["slurm", "drain-report", "{path}"],
    "slurm healthcheck --result-file": ["slurm", "healthcheck", "--node", "n1", "--result-file", "{path}"],
    "report render": ["report", "render", "{path}", "--format", "md"],
    "judge": ["judge", "{path}"],
    "parse": ["parse", "{path}"],
    "k8s label": ["k8s", "label", "{path}"],
    "serve --once --replay": ["serve", "--once", "--replay", "{path}"],
    "run --replay": ["run", "--replay", "{path}", "--check", "gpu.*"],
    "run --kernel-log": ["run", "--replay", str(H200_DUMP), "--check", "gpu.xid*", "--kernel-log", "{path}"],
    "run --config": ["run", "--replay", str(H200_DUMP), "--check", "gpu.*", "--config", "{path}"],
    "run --profile": ["run", "--replay", str(H200_DUMP), "--check", "gpu.*", "--profile", "{path}.toml"],
    "history --config": ["history", "--config", "{path}", "--db", "{tmp}/h.sqlite"],
}
KINDS = ("fifo", "/dev/zero", "directory", "1 GiB sparse")


@contextlib.contextmanager
def hostile_path(kind: str, tmp: Path) -> Iterator[str]:
    """A path naming ``kind`` (made in ``tmp``; a ``.toml`` twin for commands that want that suffix)."""
    base = tmp / f"input-{kind.replace('/', '_').replace(' ', '_')}"
    for target in (base, base.with_name(base.name + ".toml")):
        if kind == "fifo":
            os.mkfifo(target)
        elif kind == "/dev/zero":
            target.symlink_to("/dev/zero")
        elif kind == "directory":
            target.mkdir()
        else:
            with target.open("wb") as fh:
                fh.truncate(GIB)  # sparse: no disk used
    yield str(base)


def run_command(name: str, path: str, tmp: Path, *, timeout_s: float = 60.0) -> tuple[str, str]:
    """(outcome, detail) of one command on one hostile path: ``ok`` (exit 3, one line naming it),
    ``hang``, ``crash`` (a traceback or ``MemoryError``), or ``wrong`` (another exit code, or no
    line naming the path)."""
    argv = [a.replace("{path}", path).replace("{tmp}", str(tmp)) for a in COMMANDS[name]]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_")}
    env.update(GPU_PREFLIGHT_HISTORY=str(tmp / "default-history.sqlite"), PATH="/usr/bin:/bin")
    env.pop("LD_LIBRARY_PATH", None)
    try:
        proc = subprocess.run([sys.executable, "-m", "gpu_preflight", *argv], capture_output=True, text=True,
                              timeout=timeout_s, env=env, stdin=subprocess.DEVNULL, cwd=tmp)
    except subprocess.TimeoutExpired:
        return "hang", f"over {timeout_s:g} s"
    err = (proc.stderr.strip() or proc.stdout.strip()) or "(nothing printed)"
    if "Traceback" in err or "MemoryError" in err:
        return "crash", err.splitlines()[-1][:300]
    if proc.returncode != 3:
        return "wrong", f"exit {proc.returncode}: {err[-300:]}"
    if Path(path).name not in proc.stderr + proc.stdout:
        return "wrong", f"the path is not named: {err[-300:]}"
    return "ok", err.splitlines()[-1][:300]
