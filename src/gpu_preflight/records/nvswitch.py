"""Records of the NVSwitch fabric's own tools: the fabric manager's log."""

from __future__ import annotations

import msgspec

__all__ = ["FabricManagerLog", "FmMessage"]


class FmMessage(msgspec.Struct):
    """One line the fabric manager logged as an error: an NVSwitch error (``sxid``, the ``switch``'s PCI address and
    ``port``, ``fatal`` as the fabric manager classed it) or another ``[ERROR]``/``[FATAL]`` line."""

    timestamp: str | None
    message: str
    fatal: bool = False
    sxid: int | None = None
    switch: str | None = None
    port: int | None = None


class FabricManagerLog(msgspec.Struct):
    """A fabric manager log: its NVSwitch errors, its other errors, how many times the service started in it,
    how many log lines it holds and its last timestamp (ISO, UTC: the log's end)."""

    switch_errors: list[FmMessage] = []
    errors: list[FmMessage] = []
    starts: int = 0
    lines: int = 0
    last_timestamp: str | None = None
