"""Read the kernel log from whichever source this host lets us read.

``dmesg`` is refused without CAP_SYSLOG when ``kernel.dmesg_restrict=1`` (common in
containers and on hardened hosts), ``/dev/kmsg`` can be readable when dmesg is not, and
journald may hold the kernel log when neither works. Sources are tried in that order and
the first that yields a log wins. When all fail, :class:`KernelLogUnavailable` carries
every source's reason: the caller reports "cannot read kernel log", never "no Xid".

A saved log (``--kernel-log FILE``, support bundles) is streamed by :class:`SavedKernelLog`:
only a regular file is opened (a FIFO would block, ``/dev/zero`` never ends), lines are
read one at a time with a cap on their length, and the same denial test applies, so a
saved "Operation not permitted" is not mistaken for a clean log. A path that is missing or
not a regular file raises :class:`KernelLogFileError`: the user named a file that cannot
be a log, which is a usage error, not "kernel log unavailable".
"""

from __future__ import annotations

import errno
import os
import subprocess
import time
from collections import deque
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..parsers.kernel_log import kernel_log_denied, line_timestamp

__all__ = [
    "KernelLog", "KernelLogFileError", "KernelLogUnavailable", "SavedKernelLog", "read_boot_time",
    "read_kernel_log", "read_kernel_log_file",
]

DMESG_ARGV: tuple[str, ...] = ("dmesg", "--time-format", "iso", "--nopager")
JOURNALCTL_ARGV: tuple[str, ...] = ("journalctl", "-k", "-o", "short-iso", "--no-pager", "-q")
KMSG_PATH = "/dev/kmsg"
PROC = "/proc"
_KMSG_RECORD_MAX = 8192  # the kernel's per-record limit; a smaller buffer gets EINVAL
TAIL_LINES = 1000  # a saved log's last timestamp is looked for in its last lines first
_STAMP_CHARS = 96  # a line's timestamp prefix is never longer
_DENIAL_HINTS = ("failed:", "No journal files", "/dev/kmsg:")


@dataclass(frozen=True)
class KernelLog:
    """Kernel-log text and what is needed to date it.

    ``boot_time`` dates boot-relative stamps (``/dev/kmsg`` records); ``failures`` lists
    the sources tried before ``source`` and why they failed, for the report.
    """

    source: str
    text: str
    boot_time: datetime | None
    failures: tuple[str, ...] = ()


class KernelLogUnavailable(RuntimeError):
    """No source gave a kernel log; ``failures`` holds one ``"source: reason"`` each."""

    def __init__(self, failures: tuple[str, ...] | list[str] | str) -> None:
        self.failures = (failures,) if isinstance(failures, str) else tuple(failures)
        super().__init__("; ".join(self.failures))


class KernelLogFileError(ValueError):
    """A ``--kernel-log`` path that is missing, unreadable, too large or not a regular file (one line)."""


class _SourceFailed(Exception):
    pass


class SavedKernelLog:
    """A saved kernel log, read line by line through :mod:`gpu_preflight.boundedio`.

    Constructing one checks the path (a regular readable file within
    ``boundedio.EVIDENCE_LIMIT``) and raises :class:`KernelLogFileError` otherwise.
    :meth:`lines` may be iterated more than once; after a full pass ``denied`` holds the
    refusal line when the file is a saved failed read.
    """

    def __init__(self, path: str | Path) -> None:
        if str(path) == "-":
            raise KernelLogFileError("--kernel-log -: a saved log is read twice (its end, then its events); "
                                     "give a file, not standard input")
        self.path = Path(path)
        self.denied: str | None = None
        self.lines_read = 0
        probe = self._iter()
        try:
            next(probe, None)
        finally:
            probe.close()

    @property
    def source(self) -> str:
        return f"file:{self.path}"

    def _iter(self) -> Generator[str, None, None]:
        from ..boundedio import EVIDENCE_LIMIT, InputError, iter_lines

        try:
            yield from iter_lines(self.path, limit=EVIDENCE_LIMIT, what="kernel log")
        except InputError as exc:
            raise KernelLogFileError(f"--kernel-log {exc}") from None

    def lines(self) -> Iterator[str]:
        """Every line, without its end of line, one at a time."""
        self.denied, self.lines_read = None, 0
        for line in self._iter():
            self.lines_read += 1
            if self.denied is None and any(h in line for h in _DENIAL_HINTS):
                self.denied = kernel_log_denied(line)
            yield line

    def last_timestamp(self, now: datetime | None = None) -> datetime | None:
        """The time of the log's last dated line: where a saved log's Xid window ends."""
        tail: deque[str] = deque(maxlen=TAIL_LINES)
        for line in self._iter():
            tail.append(line[:_STAMP_CHARS])
        for line in reversed(tail):
            if (stamp := line_timestamp(line, now=now)) is not None:
                return stamp
        last = None
        for line in self._iter():  # no dated line near the end: rare, so a second full pass
            last = line_timestamp(line[:_STAMP_CHARS], now=now) or last
        return last


def read_kernel_log(timeout_s: float = 5.0) -> KernelLog:
    """The kernel log from dmesg, else ``/dev/kmsg``, else journalctl.

    Raises :class:`KernelLogUnavailable` listing each source's failure when none works.
    """
    failures: list[str] = []
    for name, reader in (("dmesg", _read_dmesg), (KMSG_PATH, _read_kmsg),
                         ("journalctl", _read_journal)):
        try:
            text = reader(timeout_s)
        except _SourceFailed as exc:
            failures.append(f"{name}: {exc}")
            continue
        return KernelLog(name, text, read_boot_time(), tuple(failures))
    raise KernelLogUnavailable(failures)


def read_kernel_log_file(path: str | Path) -> KernelLog:
    """A saved log as one text, for small consumers; :class:`SavedKernelLog` streams it.

    A path that is not a regular readable file, or a saved refusal, raises
    ``KernelLogUnavailable`` (the caller reports "cannot read kernel log").
    """
    try:
        log = SavedKernelLog(path)
        text = "\n".join(log.lines())
    except KernelLogFileError as exc:
        raise KernelLogUnavailable(str(exc).removeprefix("--kernel-log ")) from exc
    if log.denied:
        raise KernelLogUnavailable(f"{log.path}: {log.denied}")
    return KernelLog(log.source, text, None)


def read_boot_time(proc: str | Path | None = None) -> datetime | None:
    """When this host booted (UTC): ``btime`` from /proc/stat, else now minus /proc/uptime."""
    root = Path(proc if proc is not None else PROC)
    try:
        for line in (root / "stat").read_text().splitlines():
            if line.startswith("btime "):
                return datetime.fromtimestamp(int(line.split()[1]), tz=UTC)
    except (OSError, ValueError, IndexError):
        pass
    try:
        uptime = float((root / "uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return datetime.fromtimestamp(time.time() - uptime, tz=UTC)


def _read_dmesg(timeout_s: float) -> str:
    return _run(DMESG_ARGV, timeout_s)


def _read_journal(timeout_s: float) -> str:
    return _run(JOURNALCTL_ARGV, timeout_s)


def _run(argv: tuple[str, ...], timeout_s: float) -> str:
    """stdout of ``argv``; a missing tool, timeout, non-zero exit, refusal or empty log fails."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, errors="replace",
                              timeout=timeout_s, check=False)
    except FileNotFoundError:
        raise _SourceFailed("not installed") from None
    except subprocess.TimeoutExpired:
        raise _SourceFailed(f"timed out after {timeout_s:g} s") from None
    except OSError as exc:
        raise _SourceFailed(exc.strerror or str(exc)) from None
    denied = kernel_log_denied(f"{proc.stdout}\n{proc.stderr}")
    if denied:
        raise _SourceFailed(denied.removeprefix("dmesg: "))
    if proc.returncode != 0:
        detail = _last_line(proc.stderr) or _last_line(proc.stdout)
        raise _SourceFailed(f"exit status {proc.returncode}" + (f": {detail}" if detail else ""))
    if not proc.stdout.strip():
        raise _SourceFailed("no kernel messages")
    return proc.stdout


def _read_kmsg(timeout_s: float) -> str:
    """Every record in ``/dev/kmsg``: each read returns one, EAGAIN means the end."""
    try:
        fd = os.open(KMSG_PATH, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise _SourceFailed(_os_reason(exc)) from None
    try:
        records = _drain(fd, time.monotonic() + timeout_s)
    finally:
        os.close(fd)
    text = b"".join(records).decode("utf-8", errors="replace")
    if not text.strip():
        raise _SourceFailed("no kernel messages")
    return text


def _drain(fd: int, deadline: float) -> list[bytes]:
    records: list[bytes] = []
    while time.monotonic() < deadline:
        try:
            chunk = os.read(fd, _KMSG_RECORD_MAX)
        except BlockingIOError:
            return records
        except BrokenPipeError:
            continue  # records were overwritten while reading; the next read resumes
        except OSError as exc:
            raise _SourceFailed(_os_reason(exc)) from None
        if not chunk:
            return records
        records.append(chunk)
    raise _SourceFailed(f"timed out after reading {len(records)} records")


def _os_reason(exc: OSError) -> str:
    if exc.errno == errno.ENOENT:
        return "not present"
    return exc.strerror or str(exc)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
