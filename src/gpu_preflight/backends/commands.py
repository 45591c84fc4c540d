"""Running external tools: one place, one contract.

Every tool gpu-preflight runs (``dcgmi``, ``all_reduce_perf``, ``fi_info``, ``lspci``,
``ibstat``...) goes through :func:`run_tool`: an argv list (never a shell), a time limit,
captured output, and a :class:`ToolResult` that always says what happened. A missing
tool is a result (``missing=True``), not an exception, so a probe can report "absent →
SKIP with the reason"; a tool that hangs is killed with its whole process group (a
wrapper script's children too) and comes back with ``timed_out=True`` and whatever it had
printed, so the caller can report "timed out → ERROR naming the tool".

Tools are looked up in the configured directories first, then on ``PATH`` (the
environment given, else this process's), so a site can point at ``/opt/nccl-tests/build``
without editing ``PATH`` and tests can put scripts in front of the real tools.

A monitor runs the same light tools every tick although their answers (libfabric's
providers, the PCI tree, the HCA list) change rarely if ever: :class:`ToolCache` keeps
each argv's result for ``max_age_s``, so the loop spawns no process per tick.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import msgspec

__all__ = ["ToolCache", "ToolResult", "find_tool", "run_tool"]

OUTPUT_LIMIT = 8 << 20  # a runaway tool must not exhaust memory; the tail is what explains a failure


class ToolResult(msgspec.Struct):
    """What running one tool gave: exit status, output, timing, and why it did not run.

    ``rc`` is ``None`` when the tool never ran (``missing``, or it could not be started:
    ``error`` says why) or was killed at the time limit (``timed_out``).
    """

    argv: list[str]
    rc: int | None = None
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    timed_out: bool = False
    missing: bool = False
    error: str | None = None
    timeout_s: float | None = None
    searched: list[str] = []

    @property
    def tool(self) -> str:
        return Path(self.argv[0]).name if self.argv else "?"

    @property
    def ran(self) -> bool:
        """The tool started and exited on its own (whatever its exit status)."""
        return self.rc is not None

    @property
    def output(self) -> str:
        """stdout and stderr together, as a person at a terminal would have seen them."""
        if self.stderr and self.stdout:
            return self.stdout + ("" if self.stdout.endswith("\n") else "\n") + self.stderr
        return self.stdout or self.stderr

    def command(self) -> str:
        """The command line, for messages (quoted only where needed)."""
        return shlex.join(self.argv)

    def problem(self) -> str | None:
        """Why this run says nothing about the node, or ``None`` when the tool ran.

        Used for the ERROR/SKIP findings: it names the tool and, for a timeout, the limit.
        """
        if self.missing:
            where = f" (looked in {', '.join(self.searched)})" if self.searched else ""
            return f"{self.tool} not found{where}"
        if self.timed_out:
            return f"`{self.command()}` did not finish within {self.timeout_s:g} s and was killed"
        if self.error is not None:
            return f"`{self.command()}` could not be started: {self.error}"
        return None

    def last_line(self) -> str:
        """The last non-empty line of stderr (else stdout): usually the tool's own reason."""
        for text in (self.stderr, self.stdout):
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            if lines:
                return lines[-1][:300]
        return ""


def find_tool(name: str, extra_dirs: Iterable[str] = (), environ: Mapping[str, str] | None = None) -> str | None:
    """Absolute path of ``name``: an explicit path, else the first hit in ``extra_dirs``, then ``PATH``."""
    if os.sep in name:
        return name if os.access(name, os.X_OK) and Path(name).is_file() else None
    for directory in extra_dirs:
        candidate = Path(directory) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    env = os.environ if environ is None else environ
    return shutil.which(name, path=env.get("PATH", os.defpath))


def _searched(name: str, extra_dirs: Iterable[str], environ: Mapping[str, str] | None) -> list[str]:
    if os.sep in name:
        return [name]
    env = os.environ if environ is None else environ
    return [*extra_dirs, "PATH"] if env.get("PATH") else [*extra_dirs]


def run_tool(argv: Sequence[str], timeout_s: float, *, extra_dirs: Iterable[str] = (),
             environ: Mapping[str, str] | None = None, cwd: str | None = None) -> ToolResult:
    """Run ``argv`` (its first element looked up with :func:`find_tool`) under ``timeout_s``.

    Never raises for the tool's sake: a missing tool, a start failure and a timeout are
    all described by the returned :class:`ToolResult`. The tool runs in its own session
    so that a timeout kills everything it started, not just the first process.
    """
    dirs = list(extra_dirs)
    path = find_tool(argv[0], dirs, environ)
    if path is None:
        return ToolResult(list(argv), missing=True, timeout_s=timeout_s, searched=_searched(argv[0], dirs, environ))
    full = [path, *argv[1:]]
    env = dict(os.environ if environ is None else environ)
    started = time.monotonic()
    try:
        proc = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                env=env, cwd=cwd, start_new_session=True)
    except OSError as exc:
        return ToolResult(full, error=exc.strerror or str(exc), timeout_s=timeout_s)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = _drain(proc)
        timed_out = True
    return ToolResult(full, rc=None if timed_out else proc.returncode, stdout=_text(out), stderr=_text(err),
                      duration_s=time.monotonic() - started, timed_out=timed_out, timeout_s=timeout_s)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:  # not our group after all (setsid refused?): kill the child itself
        proc.kill()


def _drain(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """Output printed before the kill; bounded, because a grandchild could hold the pipes open."""
    try:
        return proc.communicate(timeout=5.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        return b"", b""


def _text(data: bytes | None) -> str:
    if not data:
        return ""
    if len(data) > OUTPUT_LIMIT:
        data = data[-OUTPUT_LIMIT:]
    return data.decode("utf-8", errors="replace")


class ToolCache:
    """Each argv's last :class:`ToolResult`, reused until it is ``max_age_s`` old.

    Every outcome is kept, a timeout or a missing tool too: a tool that hangs would
    otherwise be started (and killed) again every tick. Concurrent callers of one argv
    wait for one run rather than starting two.
    """

    def __init__(self, max_age_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_age_s = max_age_s
        self._clock = clock
        self._lock = threading.Lock()
        self._runs: dict[tuple[str, ...], tuple[float, ToolResult]] = {}
        self._locks: dict[tuple[str, ...], threading.Lock] = {}
        self.runs = 0
        self.hits = 0

    def run(self, argv: Sequence[str], timeout_s: float, *, extra_dirs: Iterable[str] = ()) -> ToolResult:
        """:func:`run_tool`, or the kept result of the same argv and directories while it is fresh."""
        dirs = tuple(extra_dirs)
        key = (*argv, "\0", *dirs)
        with self._lock:
            one = self._locks.setdefault(key, threading.Lock())
        with one:
            kept = self._runs.get(key)
            if kept is not None and self._clock() - kept[0] < self.max_age_s:
                with self._lock:
                    self.hits += 1
                return kept[1]
            result = run_tool(argv, timeout_s, extra_dirs=dirs)
            with self._lock:
                self.runs += 1
            self._runs[key] = (self._clock(), result)
            return result
