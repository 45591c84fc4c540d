"""Read the kernel log from whichever source this host lets us read.

``dmesg`` is refused without CAP_SYSLOG when ``kernel.dmesg_restrict=1`` (common in
containers and on hardened hosts), ``/dev/kmsg`` can be readable when dmesg is not, and
journald may hold the kernel log when neither works. Sources are tried in that order and
the first that yields a log wins. When all fail, :class:`KernelLogUnavailable` carries
every source's reason: the caller reports "cannot read kernel log", never "no Xid".

``read_kernel_log_file`` loads a saved log (``--replay``, support bundles) and applies the
same denial test, so a saved "Operation not permitted" is not mistaken for a clean log.
"""

from __future__ import annotations

import errno
import os
import subprocess
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..parsers.kernel_log import kernel_log_denied

__all__ = [
    "KernelLog", "KernelLogUnavailable", "read_boot_time", "read_kernel_log", "read_kernel_log_file",
]

DMESG_ARGV: tuple[str, ...] = ("dmesg", "--time-format", "iso", "--nopager")
JOURNALCTL_ARGV: tuple[str, ...] = ("journalctl", "-k", "-o", "short-iso", "--no-pager", "-q")
KMSG_PATH = "/dev/kmsg"
PROC = "/proc"
_KMSG_RECORD_MAX = 8192  # the kernel's per-record limit; a smaller buffer gets EINVAL


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


class _SourceFailed(Exception):
    pass


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
    """A saved kernel log; a saved refusal or an unreadable file raises ``KernelLogUnavailable``."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise KernelLogUnavailable(f"{p}: {exc.strerror or exc}") from exc
    if denied := kernel_log_denied(text):
        raise KernelLogUnavailable(f"{p}: {denied}")
    return KernelLog(f"file:{p}", text, None)


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
