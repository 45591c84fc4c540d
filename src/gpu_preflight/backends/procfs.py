"""Host readings straight from /proc and statvfs: what the system probe needs of psutil.

A node check is a short-lived process, and importing psutil cost it about as much as
reading every value below (~20 ms of a ~200 ms run on our machines). The arithmetic is
psutil's own, so the readings are the same: ``MemAvailable`` for available memory,
``f_bavail`` for free disk, comm names widened from the command line when the kernel
truncated them to 15 characters.
"""

from __future__ import annotations

import os
from typing import NamedTuple

__all__ = ["CpuTicks", "cpu_ticks", "disk_total_free", "meminfo", "own_cpu_seconds", "process_names"]

_COMM_MAX = 15  # TASK_COMM_LEN - 1: a name this long may have been cut


class CpuTicks(NamedTuple):
    """The host's CPU time so far (all CPUs, clock ticks): idle and total."""

    idle: int
    total: int


def meminfo(path: str = "/proc/meminfo") -> tuple[int, int]:
    """Total and available memory in bytes.

    ``MemAvailable`` is the kernel's own estimate (Linux 3.14 and later); without it, free +
    buffers + page cache, as psutil falls back to.
    """
    fields: dict[str, int] = {}
    with open(path, "rb") as fh:
        for line in fh.read(1 << 16).splitlines():
            name, _, rest = line.partition(b":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                fields[name.decode("ascii", "replace")] = int(parts[0]) * 1024
    if "MemTotal" not in fields:
        raise ValueError(f"{path}: no MemTotal line")
    available = fields.get("MemAvailable")
    if available is None:
        available = fields.get("MemFree", 0) + fields.get("Buffers", 0) + fields.get("Cached", 0)
    return fields["MemTotal"], available


def cpu_ticks(path: str = "/proc/stat") -> CpuTicks:
    """Idle and total CPU ticks from the ``cpu`` line: user, nice, system, idle, iowait, irq,
    softirq and steal (guest time is already inside user and nice)."""
    with open(path, "rb") as fh:
        first = fh.readline(4096).split()
    if not first or first[0] != b"cpu" or len(first) < 5:
        raise ValueError(f"{path}: no cpu line")
    ticks = [int(v) for v in first[1:9]]
    return CpuTicks(idle=ticks[3], total=sum(ticks))


def own_cpu_seconds() -> float:
    """This process's user + system CPU time (its threads, not its children)."""
    t = os.times()
    return t.user + t.system


def disk_total_free(path: str) -> tuple[int, int]:
    """Size and space free to unprivileged users of the file system holding ``path``, in bytes."""
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def _read_small(path: str, limit: int) -> bytes:
    """Up to ``limit`` bytes of a /proc file, by descriptor: a host with a thousand
    processes pays half the time of buffered file objects."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, limit)
    finally:
        os.close(fd)


def _name(pid: str, proc: str) -> str | None:
    try:
        name = _read_small(f"{proc}/{pid}/comm", 256).rstrip(b"\n").decode("utf-8", "replace")
    except OSError:
        return None  # gone, or not ours to read
    if len(name) >= _COMM_MAX:
        try:
            argv0 = _read_small(f"{proc}/{pid}/cmdline", 4096).split(b"\0", 1)[0].decode("utf-8", "replace")
        except OSError:
            return name
        full = os.path.basename(argv0)
        if full.startswith(name):
            return full
    return name


def process_names(proc: str = "/proc") -> list[str]:
    """The names of the processes running now, sorted and without repeats."""
    names = {n for pid in os.listdir(proc) if pid.isdigit() and (n := _name(pid, proc))}
    return sorted(names)
