"""What libfabric's tools print: ``fi_info`` providers and ``fi_pingpong`` rows."""

from __future__ import annotations

import msgspec


class FiProvider(msgspec.Struct):
    """One provider entry of ``fi_info``: provider, fabric, domain, version, endpoint type and protocol."""

    provider: str
    fabric: str | None = None
    domain: str | None = None
    version: str | None = None
    type: str | None = None
    protocol: str | None = None


class FiInfoRecord(msgspec.Struct):
    """What ``fi_info`` listed, or the error code and message it ended with; ``fi_info -l``'s provider names and
    versions (what the library has, not what a device offers) are ``provider_list``."""

    providers: list[FiProvider] = []
    error_code: int | None = None
    error: str | None = None
    provider_list: list[FiProvider] = []


class PingpongRow(msgspec.Struct):
    """One message size of ``fi_pingpong``: size, iterations, bytes, time, bandwidth, latency and rate."""

    size_bytes: int
    iterations: int | None
    total_bytes: int | None
    time_s: float | None
    mb_per_s: float | None
    usec_per_xfer: float | None
    mxfers_per_s: float | None


class PingpongRecord(msgspec.Struct):
    """Every row ``fi_pingpong`` printed, and the errors it reported."""

    rows: list[PingpongRow] = []
    errors: list[str] = []
