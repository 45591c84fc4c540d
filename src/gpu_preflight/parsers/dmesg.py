"""A saved kernel log (``dmesg``, ``journalctl -k``, syslog): the evidence GPU triage needs.

Xid lines are read by :mod:`gpu_preflight.parsers.kernel_log` — every prefix style and
timestamp form lives there, once. This module adds what else a saved log says about GPU
nodes: PCIe links the kernel reports as ``limited by`` a slower upstream link, processes
that segfaulted inside a GPU library (``libnccl.so``, ``libcuda.so``), and whether the log
was readable at all — a refused ``dmesg`` holds no Xid lines either, and must read as
"cannot tell", never as "no Xid errors".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from .detect import parser
from .errors import ParseError
from .kernel_log import XidEvent, kernel_log_denied, normalize_pci, parse_xid_events
from .text import prepare

KIND = "dmesg"

_LIMITED = re.compile(
    r"pci (?P<device>[0-9a-fA-F:.]+): (?P<available>[\d.]+) Gb/s available PCIe bandwidth, limited by "
    r"(?P<speed>[\d.]+) GT/s PCIe x(?P<width>\d+) link at (?P<at>[0-9a-fA-F:.]+) \(capable of "
    r"(?P<capable>[\d.]+) Gb/s with (?P<cap_speed>[\d.]+) GT/s PCIe x(?P<cap_width>\d+) link\)")
_SEGFAULT = re.compile(r"(?P<process>[^\s\[\]]+)\[(?P<pid>\d+)\]: segfault at \S+ ip \S+ sp \S+ error \d+"
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


def sniff(text: str) -> int:
    if "NVRM: Xid" in text:
        return 85
    if _LIMITED.search(text) or kernel_log_denied(text):
        return 80
    if _SEGFAULT.search(text):
        return 60
    return 30 if re.search(r"^\[\s*\d+\.\d+\] ", text, re.MULTILINE) else 0


@parser(KIND, sniff=sniff, title="kernel log (dmesg, dmesg -T/--time-format iso/--decode, journalctl -k, syslog)")
def parse(text: str) -> DmesgRecord:
    """Parse a saved kernel log for Xid events, PCIe ``limited by`` lines and GPU-library segfaults."""
    lines = prepare(KIND, text)
    record = DmesgRecord(lines=len(lines))
    denied = kernel_log_denied(text)
    for event in _xid_events(lines):
        record.xid_events.append(XidLine(
            xid=event.xid, pci_bus_id=_pci(event.pci), message=event.message,
            timestamp=event.timestamp.isoformat() if event.timestamp else None, pid=event.pid,
            process=event.process, raw=event.raw.strip(),
        ))
    for line in lines:
        if m := _LIMITED.search(line):
            record.pcie_limits.append(PcieLimit(
                device=m.group("device"), available_gbps=float(m.group("available")),
                limited_by_speed_gts=float(m.group("speed")), limited_by_width=int(m.group("width")),
                limited_at=m.group("at"), capable_gbps=float(m.group("capable")),
                capable_speed_gts=float(m.group("cap_speed")), capable_width=int(m.group("cap_width"))))
        elif m := _SEGFAULT.search(line):
            record.segfaults.append(Segfault(m.group("process"), int(m.group("pid")), m.group("library"),
                                             line.strip()))
    if denied and not (record.xid_events or record.pcie_limits or record.segfaults):
        record.readable, record.denied = False, denied
    elif not (record.xid_events or record.pcie_limits or record.segfaults
              or any(_KERNEL_LINE.search(line) for line in lines)):
        raise ParseError(KIND, "no kernel log line (no timestamp prefix, no 'kernel:', no NVRM)")
    return record


def _xid_events(lines: list[str]) -> list[XidEvent]:
    """Xid events line by line; a line whose timestamp is out of range keeps its event, undated.

    ``parse_xid_events`` raises ``ValueError`` on an impossible ISO time (``25:61:00``): a
    garbled stamp must cost the event its date, not the whole log its parse.
    """
    events: list[XidEvent] = []
    for line in lines:
        if "NVRM: Xid" not in line:
            continue
        try:
            events.extend(parse_xid_events(line))
        except ValueError:
            events.extend(parse_xid_events(line[line.index("NVRM: Xid"):]))
    return events


def _pci(pci: str | None) -> str | None:
    if pci is None:
        return None
    try:
        return normalize_pci(pci)
    except ValueError:
        return pci.strip().lower()
