"""Measure a directory's file system the way a training job uses it: big sequential writes and
reads (checkpoints, data shards) and fsync latency (a checkpoint is durable only after it).

Why this is a measurement, not a free-space reading: a checkpoint directory on a degraded RAID,
a throttled network volume or a nearly full SSD has space and still turns a 30-second checkpoint
into ten minutes, every few hundred steps, on every rank. Free space is ``system.disk``; this is
the throughput behind it.

How: one temporary file in the directory, written in 1 MiB blocks of random bytes (so neither
compression nor deduplication flatters the figure) with ``O_DIRECT`` where the file system
supports it (the page cache would otherwise measure memory), then ``fsync``; read back the same
way; then ``fsync`` latency over small appends. Where ``O_DIRECT`` is refused (tmpfs, some
network file systems) the buffered figure is reported as such, and a buffered read after the
write is dropped from the page cache first (``posix_fadvise``). The file never takes more than
a tenth of the free space, and it is removed whatever happens. A deadline bounds the whole
measurement: what was done by then is the figure, marked as cut short.
"""

from __future__ import annotations

import mmap
import os
import statistics
import tempfile
import time

from ..records.storage import IoMeasurement

__all__ = ["BLOCK_BYTES", "measure_io"]

BLOCK_BYTES = 1 << 20
FSYNC_BYTES = 4096
MIN_BYTES = 8 * BLOCK_BYTES  # below this the figure is mostly start-up cost: refuse to measure
SHARE_OF_FREE = 10  # the file takes at most 1/10 of the free space


def _open(path: str, flags: int, direct: bool) -> int:
    return os.open(path, flags | (os.O_DIRECT if direct else 0), 0o600)


def _write_pass(name: str, buf: mmap.mmap, size: int, direct: bool, deadline: float) -> tuple[int, float]:
    """Write ``size`` bytes (or what the deadline allows) and fsync; bytes written and seconds."""
    fd = _open(name, os.O_WRONLY | os.O_TRUNC, direct)
    try:
        done, start = 0, time.perf_counter()
        while done < size and time.monotonic() < deadline:
            done += os.write(fd, buf)
        os.fsync(fd)
        return done, time.perf_counter() - start
    finally:
        os.close(fd)


def _read_pass(name: str, buf: mmap.mmap, size: int, direct: bool, deadline: float) -> tuple[int, float]:
    fd = _open(name, os.O_RDONLY, direct)
    try:
        if not direct:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # read the device, not what we just wrote
        done, start = 0, time.perf_counter()
        while done < size and time.monotonic() < deadline:
            got = os.readv(fd, [buf])
            if got == 0:
                break
            done += got
        return done, time.perf_counter() - start
    finally:
        os.close(fd)


def _fsync_latency(name: str, count: int, deadline: float) -> list[float]:
    """Seconds of each small append + fsync: the latency a checkpoint's last step waits on."""
    fd = os.open(name, os.O_WRONLY | os.O_APPEND)
    block = os.urandom(FSYNC_BYTES)
    took: list[float] = []
    try:
        while len(took) < count and time.monotonic() < deadline:
            start = time.perf_counter()
            os.write(fd, block)
            os.fsync(fd)
            took.append(time.perf_counter() - start)
    finally:
        os.close(fd)
    return took


def _mbps(done: int, seconds: float) -> float:
    return round(done / seconds / 1e6, 1) if seconds > 0 else 0.0


def measure_io(path: str, size_bytes: int, timeout_s: float, fsyncs: int = 32) -> IoMeasurement:
    """Measure ``path``; an ``OSError`` (missing, read-only, full, permission) or ``ValueError``
    (too little free space to measure) says why it could not be measured."""
    if not os.path.isdir(path):
        raise OSError(f"{path}: not a directory")
    stat = os.statvfs(path)
    free = stat.f_bavail * stat.f_frsize
    size = min(size_bytes, free // SHARE_OF_FREE) // BLOCK_BYTES * BLOCK_BYTES
    if size < MIN_BYTES:
        raise ValueError(f"{path}: {free / 2**20:.0f} MiB free, too little to measure {size_bytes / 2**20:.0f} MiB "
                         f"without filling it (at most 1/{SHARE_OF_FREE} of the free space is used)")
    deadline = time.monotonic() + timeout_s
    fd, name = tempfile.mkstemp(prefix=".gpu-preflight-io-", dir=path)
    os.close(fd)
    buf = mmap.mmap(-1, BLOCK_BYTES)  # page-aligned, as O_DIRECT needs
    try:
        buf.write(os.urandom(BLOCK_BYTES))
        direct = hasattr(os, "O_DIRECT")
        try:
            wrote, wsec = _write_pass(name, buf, size, direct, deadline)
        except OSError:  # EINVAL: this file system refuses O_DIRECT (tmpfs, some network file systems)
            direct = False
            wrote, wsec = _write_pass(name, buf, size, direct, deadline)
        if wrote == 0:
            raise TimeoutError(f"{path}: not one block written within {timeout_s:g} s")
        read, rsec = _read_pass(name, buf, wrote, direct, deadline)
        lat = _fsync_latency(name, fsyncs, deadline)
    finally:
        buf.close()
        os.unlink(name)
    return IoMeasurement(path, wrote, direct, _mbps(wrote, wsec), _mbps(read, rsec),
                         round(statistics.median(lat) * 1000, 3) if lat else float("nan"),
                         round(max(lat) * 1000, 3) if lat else float("nan"), len(lat),
                         wrote < size or read < wrote or len(lat) < fsyncs)

