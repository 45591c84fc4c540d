"""A perftest run (``ib_*_bw``, ``ib_*_lat``): its settings and one row per message size."""

from __future__ import annotations

import msgspec


class PerftestRow(msgspec.Struct):
    """One message size of a perftest run: peak and average bandwidth and message rate (``ib_write_bw`` and kin),
    or the typical latency (``ib_write_lat`` and kin)."""

    size_bytes: int
    iterations: int | None
    bw_peak_gbps: float | None
    bw_avg_gbps: float | None
    msg_rate_mpps: float | None
    latency_usec: float | None = None  # a latency test's (ib_*_lat) typical latency, or -D's average


class PerftestRecord(msgspec.Struct):
    """A perftest run: the test, device, transport and link layer, its rows and the best peak bandwidth."""

    test: str | None = None
    device: str | None = None
    transport: str | None = None
    connection_type: str | None = None
    link_layer: str | None = None
    bw_unit: str | None = None
    rows: list[PerftestRow] = []
    bw_peak_max_gbps: float | None = None
    bw_avg_max_gbps: float | None = None
    warnings: list[str] = []
    errors: list[str] = []
    incomplete: list[str] = []  # what the run's output lacks (read by checks/evidence.incomplete_parts)
