"""What the ``storage`` probe measured of each directory a job writes checkpoints and data to.

Kept apart from :mod:`.node`'s free-space facts because it is a measurement a ``--full`` run
makes (it writes and reads a file), not a reading every run takes.
"""

from __future__ import annotations

import msgspec

__all__ = ["IoMeasurement", "IoResult", "StorageFacts"]


class IoMeasurement(msgspec.Struct, frozen=True):
    """What one directory gave: throughput in MB/s (10^6 bytes), fsync latency in ms, and how it was measured."""

    path: str
    bytes: int  # the size actually written and read
    direct: bool  # O_DIRECT held for both passes (else buffered, page cache dropped before reading)
    write_mbps: float
    read_mbps: float
    fsync_p50_ms: float
    fsync_max_ms: float
    fsyncs: int
    cut_short: bool  # the deadline ended a pass before its size


class IoResult(msgspec.Struct, frozen=True):
    """One configured directory: its measurement, or why it could not be measured (never both)."""

    path: str
    measurement: IoMeasurement | None = None
    error: str | None = None


class StorageFacts(msgspec.Struct):
    """Every configured directory's result; ``skipped`` says why nothing was measured (a replay)."""

    results: list[IoResult] = []
    skipped: str | None = None
