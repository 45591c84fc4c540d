"""Xid events read from a kernel log, and the window and tally that decide which of them count.

The events are what ``parsers/kernel_log.py`` reads from a log line; the window, the
streaming :class:`XidCounter` and its :class:`XidTally` are pure arithmetic on them. They
live here, below config, parsers and probes, so the Xid policy (config), the log parsers
and the checks all read the same types without importing each other.

A live log's window ends *now*; a saved log's ends at its last timestamp (an old log has
no "now", and judging it against today's clock reports a node with Xid 79 as clean). A
replayed snapshot's log ends when the snapshot was taken. :func:`xid_window` is the one
place that decides this, for ``run``, ``run --kernel-log``, ``--replay`` and ``judge``.

:class:`XidCounter` consumes events one by one and keeps, per (Xid, GPU), a count, the
time span and a few example lines, never every event, so a 200 MB log costs flat memory.
The same event read twice (a bundle holding both dmesg and the journal) counts once, up to
:data:`DEDUP_KEYS_MAX` remembered events; past that, repeats are counted (over-counting
is the safe side) and the tally says so. Every tally says what window it covers and how
many events fell outside it.

An event older than the window is left out of the count but not forgotten: the tally's
``stale`` groups are the older events that no later reset evidence covers (a driver load or a
boot in the log, :meth:`XidCounter.add_reset`, or that GPU's Xid 154 saying its recovery action
is back to "None"), so the policy can still report a fatal Xid whose GPU was never reset.
"""

from __future__ import annotations

import math
from collections import deque
from datetime import datetime, timedelta
from typing import Any

import msgspec

EXAMPLES = 3  # first and last lines kept per group
DEDUP_KEYS_MAX = 65_536
RECOVERED = "xid:recovery=none"  # Xid 154 "... to 0x0 (None)": the GPU needs no recovery any more (it was reset)


class XidEvent(msgspec.Struct, frozen=True):
    """One ``NVRM: Xid`` line: the Xid, the GPU it names and when it happened."""

    xid: int
    pci: str | None
    timestamp: datetime | None
    pid: int | None
    process: str | None
    message: str
    raw: str
    # "xid" for an ``NVRM: Xid`` line; "xid:fatal"/"xid:nonfatal" where the line states its own severity
    # (NVLink5 Xids 144-150), "xid:recovery=<action>" for Xid 154's named recovery action, "cause" for an
    # Xid another line names as its cause ("... caused by previous Xid 149"), "nvrm:<id>" for a driver
    # message without an Xid number (judged as the Xid it stands for), "sxid[:fatal|:nonfatal]" for an
    # NVSwitch SXid (its own number space).
    kind: str = "xid"


class UnparsedXid(msgspec.Struct, frozen=True):
    """A line shaped like an Xid event whose Xid or GPU cannot be read; ``raw`` is capped."""

    raw: str
    timestamp: datetime | None
    reason: str


def normalize_pci(pci: str) -> str:
    """``domain:bus:device`` in lower case, 4-digit domain, no function: ``0000:38:00``.

    NVML reports ``00000000:38:00.0`` and the driver logs ``0000:38:00``; both must land
    on the same key so an Xid can be pinned to the GPU NVML enumerates.
    """
    value = pci.strip()
    if value[:4].upper() == "PCI:":
        value = value[4:]
    value = value.split(".", 1)[0]
    parts = value.split(":")
    if len(parts) == 2:
        parts.insert(0, "0")
    if len(parts) != 3:
        raise ValueError(f"not a PCI address: {pci!r}")
    try:
        domain, bus, device = (int(p, 16) for p in parts)
    except ValueError:
        raise ValueError(f"not a PCI address: {pci!r}") from None
    return f"{domain:04x}:{bus:02x}:{device:02x}"


def pci_key(pci: str | None) -> str | None:
    """The GPU key of an Xid: normalised PCI address, else the printed one in lower case."""
    if pci is None:
        return None
    try:
        return normalize_pci(pci)
    except ValueError:
        return pci.strip().lower()


class XidWindow(msgspec.Struct, frozen=True):
    """``hours`` before ``end``; ``end`` is ``None`` when a saved log has no timestamp at all."""

    hours: float
    end: datetime | None
    basis: str

    @property
    def start(self) -> datetime | None:
        return None if self.end is None else self.end - timedelta(hours=self.hours)

    def describe(self) -> str:
        if self.end is None:
            return f"the last {self.hours:g} h ({self.basis}: every event kept)"
        return f"the {self.hours:g} h up to {self.end:%Y-%m-%d %H:%M:%S} UTC ({self.basis})"


def xid_window(hours: float, *, now: datetime | None = None, log_end: datetime | None = None,
               saved: bool = False, basis: str | None = None) -> XidWindow:
    """The window for a live log (ends at ``now``) or a saved one (ends at ``log_end``, its last timestamp).

    ``basis`` overrides the description of the end (``"snapshot time"`` for a replay).
    """
    if not math.isfinite(hours) or hours < 0:
        raise ValueError(f"window_hours must be a finite number >= 0, got {hours!r}")
    end = log_end if saved else now
    if end is None and not saved:
        raise ValueError("a live log's window needs now")
    if end is not None and end.utcoffset() is None:
        raise ValueError(f"now must be timezone-aware, got {end!r}")
    if basis is None:
        basis = "now" if not saved else ("the log's last timestamp" if end else "no timestamp in the log")
    return XidWindow(float(hours), end, basis)


class XidGroup(msgspec.Struct, frozen=True):
    """The in-window events of one Xid on one GPU (``pci`` normalised when it parses)."""

    xid: int
    pci: str | None
    count: int
    undated: int
    first: datetime | None
    last: datetime | None
    message: str
    examples: tuple[str, ...]
    kind: str = "xid"  # as XidEvent.kind: events of one Xid and GPU but of another kind are another group


class XidTally(msgspec.Struct, frozen=True):
    """What a log said about Xids within ``window``, and what was left out of it."""

    window: XidWindow
    groups: tuple[XidGroup, ...] = ()
    outside: int = 0
    duplicates: int = 0
    dedup_limited: bool = False
    unparsed: int = 0
    unparsed_outside: int = 0
    unparsed_examples: tuple[UnparsedXid, ...] = ()
    # groups of events older than the window with no reset evidence after them (count: those events)
    stale: tuple[XidGroup, ...] = ()
    resets: int = 0  # reset evidence seen in the log (driver loads, boots, Xid 154 back to "None")

    @property
    def events(self) -> int:
        return sum(g.count for g in self.groups)

    def coverage(self) -> dict[str, Any]:
        """The window and the counts a report needs to show what was and was not counted."""
        return {"window_hours": self.window.hours, "window_start": self.window.start, "window_end": self.window.end,
                "window_basis": self.window.basis, "events_in_window": self.events,
                "events_outside_window": self.outside, "duplicates_dropped": self.duplicates,
                "unparsed_in_window": self.unparsed, "unparsed_outside_window": self.unparsed_outside}


class _Group(msgspec.Struct):
    """Xid events of one (Xid, GPU) pair being tallied: counts, first and last time, a message and the first lines."""

    xid: int
    pci: str | None
    kind: str = "xid"
    count: int = 0
    undated: int = 0
    first: datetime | None = None
    last: datetime | None = None
    message: str = ""
    head: list[str] = []
    tail: deque[str] = msgspec.field(default_factory=lambda: deque(maxlen=EXAMPLES))


class XidCounter:
    """Feed events and unparsed Xid lines in log order; :meth:`tally` gives the result."""

    def __init__(self, window: XidWindow) -> None:
        self.window = window
        self._start = window.start
        self._groups: dict[tuple[int, str | None, str], _Group] = {}
        self._seen: set[tuple[Any, ...]] = set()
        self._outside = self._duplicates = self._unparsed = self._unparsed_outside = 0
        self._dedup_limited = False
        self._unparsed_head: list[UnparsedXid] = []
        self._unparsed_tail: deque[UnparsedXid] = deque(maxlen=EXAMPLES)
        self._stale: dict[tuple[int, str | None, str], _Group] = {}
        self._resets = 0

    def add(self, item: XidEvent | UnparsedXid) -> None:
        if isinstance(item, UnparsedXid):
            self._add_unparsed(item)
            return
        self._add(item)
        if item.kind == RECOVERED:
            self.add_reset(pci_key(item.pci))

    def add_reset(self, pci: str | None = None) -> None:
        """Reset evidence at this point of the log: for the GPU ``pci`` (a :func:`pci_key`), or for every GPU.

        Older events before it are no longer ``stale``: the GPU was reset, the driver reloaded or the node booted.
        """
        self._resets += 1
        for key in [k for k in self._stale if pci is None or k[1] == pci]:
            del self._stale[key]

    def _add(self, item: XidEvent) -> None:
        stamp = item.timestamp
        pci = pci_key(item.pci)
        if stamp is not None:
            if self._start is not None and stamp < self._start:
                self._outside += 1
                _note(self._stale, item, pci, stamp)
                return
            key = (item.xid, pci, item.kind, stamp, item.pid, item.message)
            if key in self._seen:
                self._duplicates += 1
                return
            if len(self._seen) < DEDUP_KEYS_MAX:
                self._seen.add(key)
            else:
                self._dedup_limited = True
        _note(self._groups, item, pci, stamp)

    def _add_unparsed(self, item: UnparsedXid) -> None:
        if item.timestamp is not None and self._start is not None and item.timestamp < self._start:
            self._unparsed_outside += 1
            return
        self._unparsed += 1
        if len(self._unparsed_head) < EXAMPLES:
            self._unparsed_head.append(item)
        else:
            self._unparsed_tail.append(item)

    def tally(self) -> XidTally:
        return XidTally(self.window, _frozen(self._groups), self._outside, self._duplicates, self._dedup_limited,
                        self._unparsed, self._unparsed_outside, (*self._unparsed_head, *self._unparsed_tail),
                        _frozen(self._stale), self._resets)


def _frozen(groups: dict[tuple[int, str | None, str], _Group]) -> tuple[XidGroup, ...]:
    return tuple(XidGroup(g.xid, g.pci, g.count, g.undated, g.first, g.last, g.message, (*g.head, *g.tail), g.kind)
                 for g in groups.values())


def _note(groups: dict[tuple[int, str | None, str], _Group], item: XidEvent, pci: str | None,
          stamp: datetime | None) -> None:
    """Count ``item`` into its (Xid, GPU, kind) group of ``groups``: time span, newest message, first/last lines."""
    group = groups.get((item.xid, pci, item.kind))
    if group is None:
        group = groups[(item.xid, pci, item.kind)] = _Group(item.xid, pci, item.kind)
    group.count += 1
    if stamp is None:
        group.undated += 1
        if group.last is None:
            group.message = item.message
    else:
        if group.first is None or stamp < group.first:
            group.first = stamp
        if group.last is None or stamp >= group.last:
            group.last, group.message = stamp, item.message
    raw = item.raw.strip()[:300]
    if len(group.head) < EXAMPLES:
        group.head.append(raw)
    else:
        group.tail.append(raw)


def count_events(events: Any, window: XidWindow) -> XidTally:
    """The tally of an iterable of events (and unparsed lines) against ``window``."""
    counter = XidCounter(window)
    for event in events:
        counter.add(event)
    return counter.tally()
