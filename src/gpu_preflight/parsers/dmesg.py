"""A saved kernel log (``dmesg``, ``journalctl -k``, syslog): the evidence GPU triage needs.

Xid lines are read by :mod:`gpu_preflight.parsers.kernel_log` — every prefix style and
timestamp form lives there, once. This module adds what else a saved log says about GPU
nodes: PCIe links the kernel reports as ``limited by`` a slower upstream link, processes
that segfaulted inside a GPU library (``libnccl.so``, ``libcuda.so``), and whether the log
was readable at all — a refused ``dmesg`` holds no Xid lines either, and must read as
"cannot tell", never as "no Xid errors".

Patterns read at most :data:`~gpu_preflight.parsers.kernel_log.MAX_LINE` characters of a
line and start only where a token starts, so a 64 KiB line without whitespace costs
linear time (the segfault pattern once took minutes on one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from .detect import parser
from .errors import ParseError
from .kernel_log import (
    MAX_LINE,
    UnparsedXid,
    XidEvent,
    kernel_log_denied,
    line_timestamp,
    normalize_pci,
    scan_xid_line,
)
from .text import prepare

KIND = "dmesg"

_LIMITED = re.compile(
    r"pci (?P<device>[0-9a-fA-F:.]+): (?P<available>[\d.]+) Gb/s available PCIe bandwidth, limited by "
    r"(?P<speed>[\d.]+) GT/s PCIe x(?P<width>\d+) link at (?P<at>[0-9a-fA-F:.]+) \(capable of "
    r"(?P<capable>[\d.]+) Gb/s with (?P<cap_speed>[\d.]+) GT/s PCIe x(?P<cap_width>\d+) link\)")
_SEGFAULT = re.compile(r"(?<![^\s\[\]])(?P<process>[^\s\[\]]+)\[(?P<pid>\d+)\]: segfault at \S+ ip \S+ sp \S+ error \d+"
                       r"(?: in (?P<library>[^\[\s]+))?")
_KERNEL_LINE = re.compile(r"^\s*(?:\[\s*\d+\.\d+\]|[a-z]+\s*:\s*[a-z]+\s*:|\d{4}-\d{2}-\d{2}[T ]\d|"
                          r"\[[A-Z][a-z]{2} [A-Z][a-z]{2}|[A-Z][a-z]{2}\s+\d+ \d{2}:\d{2}:\d{2} )|NVRM:|kernel:")


@dataclass
class XidLine:
    """One ``NVRM: Xid`` line; ``pci_bus_id`` normalised to ``0000:38:00`` (as the driver prints it)."""

    xid: int
    pci_bus_id: str | None
    message: str
    timestamp: str | None = None
    pid: int | None = None
    process: str | None = None
    raw: str = ""

    def to_event(self) -> XidEvent:
        """Back to the kernel-log parser's event, for the Xid policy."""
        stamp = datetime.fromisoformat(self.timestamp) if self.timestamp else None
        return XidEvent(self.xid, self.pci_bus_id, stamp, self.pid, self.process, self.message, self.raw)


@dataclass
class PcieLimit:
    """A ``limited by`` line: the device, what it gets and what it could get."""

    device: str
    available_gbps: float
    limited_by_speed_gts: float
    limited_by_width: int
    limited_at: str
    capable_gbps: float
    capable_speed_gts: float
    capable_width: int


@dataclass
class Segfault:
    process: str
    pid: int
    library: str | None
    raw: str


@dataclass
class DmesgRecord:
    readable: bool = True
    denied: str | None = None
    xid_events: list[XidLine] = field(default_factory=list)
    pcie_limits: list[PcieLimit] = field(default_factory=list)
    segfaults: list[Segfault] = field(default_factory=list)
    lines: int = 0
    unparsed_xids: list[UnparsedXid] = field(default_factory=list)
    last_timestamp: str | None = None  # the newest line's time: a saved log's Xid window ends there


def sniff(text: str) -> int:
    if "NVRM: Xid" in text:
        return 85
    if _LIMITED.search(text) or kernel_log_denied(text):
        return 80
    if "segfault at" in text and any(_segfault(line) for line in text.splitlines()):
        return 60
    return 30 if re.search(r"^\[\s*\d+\.\d+\] ", text, re.MULTILINE) else 0


@parser(KIND, sniff=sniff, title="kernel log (dmesg, dmesg -T/--time-format iso/--decode, journalctl -k, syslog)")
def parse(text: str) -> DmesgRecord:
    """Parse a saved kernel log for Xid events, PCIe ``limited by`` lines and GPU-library segfaults."""
    lines = prepare(KIND, text)
    record = DmesgRecord(lines=len(lines))
    denied = kernel_log_denied(text)
    for found in _xid_events(lines):
        if isinstance(found, UnparsedXid):
            record.unparsed_xids.append(found)
            continue
        record.xid_events.append(XidLine(
            xid=found.xid, pci_bus_id=_pci(found.pci), message=found.message,
            timestamp=found.timestamp.isoformat() if found.timestamp else None, pid=found.pid,
            process=found.process, raw=found.raw.strip(),
        ))
    last = _last_timestamp(lines)
    record.last_timestamp = last.isoformat() if last else None
    for full in lines:
        line = full[:MAX_LINE]
        if m := _LIMITED.search(line):
            record.pcie_limits.append(PcieLimit(
                device=m.group("device"), available_gbps=float(m.group("available")),
                limited_by_speed_gts=float(m.group("speed")), limited_by_width=int(m.group("width")),
                limited_at=m.group("at"), capable_gbps=float(m.group("capable")),
                capable_speed_gts=float(m.group("cap_speed")), capable_width=int(m.group("cap_width"))))
        elif m := _segfault(line):
            record.segfaults.append(Segfault(m.group("process"), int(m.group("pid")), m.group("library"),
                                             line.strip()))
    anything = bool(record.xid_events or record.unparsed_xids or record.pcie_limits or record.segfaults)
    if denied and not anything:
        record.readable, record.denied = False, denied
    elif not (anything or any(_KERNEL_LINE.search(line[:MAX_LINE]) for line in lines)):
        raise ParseError(KIND, "no kernel log line (no timestamp prefix, no 'kernel:', no NVRM)")
    return record


def _xid_events(lines: list[str]) -> list[XidEvent | UnparsedXid]:
    """Xid events, and lines shaped like one that break its grammar, in log order."""
    return [found for line in lines if (found := scan_xid_line(line)) is not None]


def _last_timestamp(lines: list[str]) -> datetime | None:
    """The time of the last line that carries a wall-clock time (boot-relative stamps have none here)."""
    for line in reversed(lines):
        if (stamp := line_timestamp(line)) is not None:
            return stamp
    return None


def _segfault(line: str) -> re.Match[str] | None:
    return _SEGFAULT.search(line[:MAX_LINE]) if "segfault at" in line else None


def _pci(pci: str | None) -> str | None:
    if pci is None:
        return None
    try:
        return normalize_pci(pci)
    except ValueError:
        return pci.strip().lower()
