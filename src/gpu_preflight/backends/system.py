"""Host readings from /proc, /sys and statvfs (:mod:`.procfs`); each reading fails on its own.

A reading that cannot be taken becomes ``NA`` with the reason, so one unreadable file
(a container without /sys/devices/system/node, say) costs one check, not the probe.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from ..model import NA
from ..records import DiskUsage, SystemFacts
from . import procfs

T = TypeVar("T")
# CPU usage is measured over the probe's own work (a monitor's: since its last reading),
# padded to at least this long.
CPU_SAMPLE_S = 0.01
HOST_SAMPLER = "host_sampler"  # RunOptions.state key of a monitor's HostSampler
MOUNTPOINT_REFRESH_S = 300.0  # a monitor resolves a disk's mount point again at least this often


class HostSampler:
    """What a monitor keeps between its host readings: the last CPU counters, and each disk
    path's mount point.

    A one-shot run measures CPU use over a 10 ms sample it sleeps through; a monitor that
    reads the host every second instead measures from its previous reading, which costs it
    no sleep (a sleep and its wake-up cost a 1-second monitor ~0.3 ms of CPU a tick) and
    covers the whole interval, not 10 ms of it. A mount point is resolved again when the
    file system holding the path changes (its device number) or once it is
    :data:`MOUNTPOINT_REFRESH_S` old.
    """

    def __init__(self, refresh_s: float = MOUNTPOINT_REFRESH_S) -> None:
        self.refresh_s = refresh_s
        self.last: tuple[procfs.CpuTicks, float, float] | None = None  # (host ticks, own CPU s, monotonic)
        self._mounts: dict[str, tuple[int, float, str]] = {}
        self._lock = threading.Lock()

    def mountpoint(self, path: str) -> str:
        """:func:`_mountpoint` of ``path``, kept while the path stays on the same file system."""
        dev = _device(path)
        now = time.monotonic()
        with self._lock:
            kept = self._mounts.get(path)
        if kept is not None and kept[0] == dev and now - kept[1] < self.refresh_s:
            return kept[2]
        found = _mountpoint(path)
        with self._lock:
            self._mounts[path] = (dev, now, found)
        return found


def attempt(fn: Callable[[], T]) -> T | NA:
    """Run one reading; an OS or library error becomes NA with its message."""
    try:
        return fn()
    except Exception as exc:
        return NA(f"{type(exc).__name__}: {exc}")


def _rlimit(which: int) -> tuple[int, int]:
    soft, hard = resource.getrlimit(which)
    inf = resource.RLIM_INFINITY
    return (-1 if soft == inf else soft, -1 if hard == inf else hard)


def numa_nodes(root: str = "/sys/devices/system/node") -> int:
    if not Path(root).is_dir():
        raise FileNotFoundError(f"{root} not present")
    return len([p for p in Path(root).glob("node[0-9]*") if p.is_dir()])


def disk_usage(path: str, sampler: HostSampler | None = None) -> DiskUsage:
    target = Path(path)
    while not target.exists() and target != target.parent:
        target = target.parent  # a report directory that run is about to create
    try:
        total, free = procfs.disk_total_free(str(target))
    except OSError as exc:
        reason = NA(f"{path}: {exc.strerror or exc}")
        return DiskUsage(path, reason, reason)
    resolve = sampler.mountpoint if sampler is not None else _mountpoint
    return DiskUsage(path, total, free, mountpoint=attempt(lambda: resolve(str(target))))


def _device(path: str) -> int:
    return os.stat(path).st_dev


def _mountpoint(path: str) -> str:
    p = Path(path).resolve()
    while not os.path.ismount(p) and p != p.parent:
        p = p.parent
    return str(p)


def process_names() -> list[str]:
    """The names of the processes running now (:func:`.procfs.process_names`)."""
    return procfs.process_names()


def _others_busy_percent(before: procfs.CpuTicks, own_before: float, elapsed: float,
                         after: procfs.CpuTicks | None = None, own_after: float | None = None) -> float:
    """Host CPU use during the sample, minus gpu-preflight's own share (it would otherwise
    report its own start-up as load)."""
    after = after if after is not None else procfs.cpu_ticks()
    total = after.total - before.total
    if total <= 0:
        raise ValueError("no CPU time passed during the sample")
    busy = 100.0 * (1.0 - (after.idle - before.idle) / total)
    if elapsed <= 0:
        return round(max(0.0, busy), 1)
    own = ((own_after if own_after is not None else procfs.own_cpu_seconds()) - own_before) / elapsed
    share = 100.0 * own / (os.cpu_count() or 1)
    return round(max(0.0, busy - share), 1)


def read_system(disk_paths: Iterable[str], processes: Callable[[], list[str]] | None = None,
                sampler: HostSampler | None = None) -> SystemFacts:
    """Every host reading the system checks need, each independently; ``processes`` replaces
    the process scan (a monitor's :class:`~.process_scan.ProcessScan`), ``sampler`` keeps the
    CPU counters and mount points from one reading to the next (a monitor's)."""
    kept = sampler.last if sampler is not None else None
    if kept is not None:
        cpu_before: procfs.CpuTicks | NA = kept[0]
        own_before, started = kept[1], kept[2]
    else:
        cpu_before = attempt(procfs.cpu_ticks)
        own_before = procfs.own_cpu_seconds()
        started = time.monotonic()
    vm = attempt(procfs.meminfo)
    memlock = attempt(lambda: _rlimit(resource.RLIMIT_MEMLOCK))
    nofile = attempt(lambda: _rlimit(resource.RLIMIT_NOFILE))

    def part(value: Any, i: int) -> Any:
        return value if isinstance(value, NA) else value[i]

    names = attempt(processes or process_names)
    disks = [disk_usage(p, sampler) for p in dict.fromkeys(disk_paths)]
    pad = CPU_SAMPLE_S - (time.monotonic() - started)
    if pad > 0:
        time.sleep(pad)
    after = attempt(procfs.cpu_ticks)
    own_after, now = procfs.own_cpu_seconds(), time.monotonic()
    if sampler is not None:
        sampler.last = None if isinstance(after, NA) else (after, own_after, now)
    busy = cpu_before if isinstance(cpu_before, NA) else after if isinstance(after, NA) else attempt(
        lambda: _others_busy_percent(cpu_before, own_before, now - started, after, own_after))
    return SystemFacts(
        hostname=os.uname().nodename,
        kernel=attempt(lambda: os.uname().release),
        memory_total_bytes=part(vm, 0),
        memory_available_bytes=part(vm, 1),
        cpu_count=attempt(lambda: os.cpu_count() or 0),
        cpu_percent=busy,
        load_1m=attempt(lambda: os.getloadavg()[0]),
        disks=disks,
        shm_total_bytes=attempt(lambda: procfs.disk_total_free("/dev/shm")[0]),
        memlock_soft=part(memlock, 0),
        memlock_hard=part(memlock, 1),
        nofile_soft=part(nofile, 0),
        nofile_hard=part(nofile, 1),
        numa_nodes=attempt(numa_nodes),
        processes=names,
    )
