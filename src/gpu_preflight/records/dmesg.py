"""What a saved ``dmesg``/journal read gave: Xid lines, PCIe ``limited by`` lines, segfaults,
RDMA NIC driver messages and link carrier changes.

Lists are capped by the parser (first and last entries kept, the count between in
``omitted``); an Xid tally over any window comes from :meth:`DmesgRecord.xid_tally`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

import msgspec
from msgspec.structs import replace

from .xid import UnparsedXid, XidEvent, XidTally, XidWindow, count_events, xid_window


class XidTimelineLike(Protocol):
    """The parser's exact per-(Xid, GPU) timeline of a long log (``parsers/xid_timeline.py``)."""

    def tally(self, window: XidWindow, kept: list[XidEvent], kept_unparsed: list[UnparsedXid]) -> XidTally: ...


class XidLine(msgspec.Struct):
    """One ``NVRM: Xid`` line; ``pci_bus_id`` normalised to ``0000:38:00`` (as the driver prints it)."""

    xid: int
    pci_bus_id: str | None
    message: str
    timestamp: str | None = None
    pid: int | None = None
    process: str | None = None
    raw: str = ""
    kind: str = "xid"  # as :attr:`~gpu_preflight.records.xid.XidEvent.kind` (a driver message, an SXid...)

    def to_event(self) -> XidEvent:
        """Back to the kernel-log parser's event, for the Xid policy."""
        stamp = datetime.fromisoformat(self.timestamp) if self.timestamp else None
        return XidEvent(self.xid, self.pci_bus_id, stamp, self.pid, self.process, self.message, self.raw, self.kind)


class XidCount(msgspec.Struct):
    """Every event of one Xid on one GPU in the whole log (no window): the count and its time span."""

    xid: int
    pci_bus_id: str | None
    count: int
    first: str | None
    last: str | None


class PcieLimit(msgspec.Struct):
    """A ``limited by`` line: the device, what it gets and what it could get."""

    device: str
    available_gbps: float
    limited_by_speed_gts: float
    limited_by_width: int
    limited_at: str
    capable_gbps: float
    capable_speed_gts: float
    capable_width: int


class Segfault(msgspec.Struct):
    """A user-space segfault the kernel logged: process, pid, the library it faulted in and the line."""

    process: str
    pid: int
    library: str | None
    raw: str


class NicMessage(msgspec.Struct):
    """An RDMA NIC driver message (``parsers/nic_log.py``): its code, the device it names, the text."""

    code: str
    device: str | None
    message: str
    timestamp: str | None = None


class HostMessage(msgspec.Struct):
    """A host-side kernel message (``parsers/host_log.py``): PCIe AER, OOM kill, hung task, CPU thermal
    throttling; its code, what it names (a PCI address, ``process[pid]``, ``cpuN``), the text."""

    code: str
    subject: str | None
    message: str
    timestamp: str | None = None


class CarrierChanges(msgspec.Struct):
    """One network interface's ``Lost carrier``/``Gained carrier`` lines: how many, and when; ``link`` is
    what the interface is by its name (``infiniband`` or ``ethernet``; container ends are not kept)."""

    interface: str
    link: str = "ethernet"
    lost: int = 0
    gained: int = 0
    first_lost: str | None = None
    last_lost: str | None = None


class DmesgRecord(msgspec.Struct, dict=True):
    """What a kernel log said: whether it was readable (or refused), its Xid events, PCIe limits and segfaults, and
    its last timestamp."""

    readable: bool = True
    denied: str | None = None
    xid_events: list[XidLine] = []
    pcie_limits: list[PcieLimit] = []
    segfaults: list[Segfault] = []
    lines: int = 0
    unparsed_xids: list[UnparsedXid] = []
    last_timestamp: str | None = None  # the newest line's time: a saved log's Xid window ends there
    xid_counts: list[XidCount] = []
    omitted: dict[str, int] = {}  # list name -> entries not kept (between first and last)
    clock_jumps: list[str] = []  # lines dated far beyond the rest: not the log's end
    nic_messages: list[NicMessage] = []
    carrier: list[CarrierChanges] = []
    host_messages: list[HostMessage] = []

    def __post_init__(self) -> None:
        self.timeline: XidTimelineLike | None = None  # not a field: never serialised, read by the judge

    def window(self, hours: float) -> XidWindow:
        """The Xid window of this saved log: ``hours`` up to its last timestamp.

        Lines dated far beyond the rest (a clock set to 2099 for one line) are not the log's end
        (the parser leaves them out of ``last_timestamp``); the window says how many there were, so
        the anomaly is reported in every Xid finding rather than hiding the Xids before it.
        """
        end = datetime.fromisoformat(self.last_timestamp) if self.last_timestamp else None
        basis = None
        if self.clock_jumps:
            basis = (f"the log's last timestamp; {len(self.clock_jumps)} line(s) dated far beyond their "
                     f"neighbours ignored as a clock jump: {self.clock_jumps[0][:80]}")
        return xid_window(hours, log_end=end, saved=True, basis=basis)

    def xid_tally(self, window: XidWindow) -> XidTally:
        """The Xid events within ``window``.

        When the record lists every event, they are counted as the node run counts them;
        when a long log left events out of its lists, the counts come from the timeline
        (exact, see :mod:`~gpu_preflight.parsers.xid_timeline`) and the examples from the
        events kept. Older events no reset evidence covers (``stale``) come from the timeline,
        which also saw the driver loads and boots between them.
        """
        events = [x.to_event() for x in self.xid_events]
        if self.timeline is None:
            return count_events([*events, *self.unparsed_xids], window)
        exact = self.timeline.tally(window, events, self.unparsed_xids)
        if {"xid_events", "unparsed_xids"} & set(self.omitted):
            return exact
        # every event is listed: counted as the node run counts them; only the timeline saw the resets
        return replace(count_events([*events, *self.unparsed_xids], window), stale=exact.stale, resets=exact.resets)
