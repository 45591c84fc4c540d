"""Every Xid event of a streamed kernel log in 12 bytes: enough to count any window later.

A saved log's Xid window ends at the log's last timestamp, which is known only once the
whole log has been read, and its length is configuration the parser does not see. So a
streamed parse keeps, per event, only its time (microseconds since the epoch,
:data:`UNDATED` when the line has none) and its (Xid, GPU) group in two arrays; the
judge counts whatever window it is given from them (see
:func:`gpu_preflight.checks.evidence_gpu.timeline_tally`), with the same rules as
:class:`~gpu_preflight.records.xid.XidCounter`: older than the window is outside,
undated always counts, a repeat of a dated event (same Xid, GPU, time, pid and message)
is a duplicate, up to :data:`DEDUP_KEYS_MAX` remembered events.

Memory stays flat however many events a log holds: past :data:`TIMELINE_MAX` entries the
oldest half is folded into per-group counts and the time of its newest event. A window
that starts after that time counts the folded events as outside, exactly; one that
reaches back into them counts them all as inside (more events, never fewer: the safe
side), which needs millions of Xid events within the window.

Events older than the window are counted as outside, but those that no later reset evidence
covers stay in the tally's ``stale`` groups (see :class:`~gpu_preflight.records.xid.XidCounter`):
:func:`reset_mark` recognises a driver load or a boot line, :meth:`XidTimeline.add_reset` records
where in the log it came (one position per GPU and one for all), and an Xid 154 back to "None"
marks its own GPU. Positions, not times, decide "after": an undated driver load still counts.
"""

from __future__ import annotations

import re
from array import array
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import msgspec

from ..records.xid import RECOVERED, UnparsedXid, XidEvent, pci_key

if TYPE_CHECKING:
    from ..records.xid import XidTally, XidWindow

__all__ = ["DEDUP_KEYS_MAX", "NEVER", "TIMELINE_MAX", "UNDATED", "Folded", "TimelineGroup", "XidTimeline", "micros",
           "moment", "pci_key", "reset_mark"]

TIMELINE_MAX = 2_000_000
DEDUP_KEYS_MAX = 65_536  # as records.xid.DEDUP_KEYS_MAX
UNDATED = -(2**63)
NEVER = 2**63 - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)
# Every GPU re-initialised after this line: the NVIDIA module (re)loaded, the kernel booted, or a journal's
# boot separator. Read at most the first 4096 characters of a line, like the kernel-log patterns.
_RESET = re.compile(r"NVRM: loading NVIDIA UNIX|\bLinux version \d|^\s*-- (?:Boot [0-9a-f]+|Reboot) --")


def reset_mark(line: str) -> bool:
    """Whether ``line`` is evidence that every GPU was re-initialised after the lines before it."""
    return _RESET.search(line[:4096]) is not None


class Folded(msgspec.Struct):
    """Events folded out of the arrays: counts, and the newest dated time among them."""

    dated: int = 0
    undated: int = 0
    duplicates: int = 0
    first: int = NEVER
    last: int = UNDATED
    position: int = -1  # the log position of the newest event folded (see XidTimeline.add_reset)


class TimelineGroup(msgspec.Struct):
    """One (Xid, GPU): its message is the newest dated event's, else the last undated one's."""

    xid: int
    pci: str | None
    kind: str = "xid"
    message: str = ""
    message_at: int = UNDATED
    count: int = 0
    first: int = NEVER
    last: int = UNDATED
    folded: Folded = msgspec.field(default_factory=Folded)


class XidTimeline:
    """Times and groups of every Xid event and unparsed Xid line, in log order."""

    def __init__(self) -> None:
        self.groups: list[TimelineGroup] = []
        self._index: dict[tuple[int, str | None, str], int] = {}
        self.times = array("q")
        self.gids = array("i")  # ~gid (negative) marks a duplicate
        self.unparsed_times = array("q")
        self.folded_until = UNDATED  # the newest dated time folded out of the arrays
        self.unparsed_folded = Folded()
        self.dedup_limited = False
        self._seen: set[int] = set()
        self._pci: dict[str | None, str | None] = {}
        self._base = 0  # the log position (events added before it) of times[0]
        self._reset_at: dict[str | None, int] = {}  # GPU key (None: every GPU) -> position of its last reset
        self.resets = 0

    def gpu(self, pci: str | None) -> str | None:
        """:func:`pci_key` of ``pci``, remembered: a log names the same few GPUs millions of times."""
        if pci in self._pci:
            return self._pci[pci]
        key = pci_key(pci)
        if len(self._pci) < 4096:
            self._pci[pci] = key
        return key

    def add(self, event: XidEvent) -> None:
        key = (event.xid, self.gpu(event.pci), event.kind)
        gid = self._index.get(key)
        if gid is None:
            gid = self._index[key] = len(self.groups)
            self.groups.append(TimelineGroup(*key))
        group = self.groups[gid]
        group.count += 1
        stamp = micros(event.timestamp)
        if stamp == UNDATED:
            if group.message_at == UNDATED:
                group.message = event.message
        else:
            group.first, group.last = min(group.first, stamp), max(group.last, stamp)
            if stamp >= group.message_at:
                group.message, group.message_at = event.message, stamp
            seen = hash((key, stamp, event.pid, event.message))
            if seen in self._seen:
                gid = ~gid
            elif len(self._seen) < DEDUP_KEYS_MAX:
                self._seen.add(seen)
            else:
                self.dedup_limited = True
        self.times.append(stamp)
        self.gids.append(gid)
        if event.kind == RECOVERED:
            self.add_reset(key[1])
        if len(self.times) >= TIMELINE_MAX:
            self._fold()

    def add_reset(self, pci: str | None = None) -> None:
        """Reset evidence here, for the GPU key ``pci`` or (``None``) every GPU: events before it are not stale."""
        self._reset_at[pci] = self._base + len(self.times)
        self.resets += 1

    def add_unparsed(self, item: UnparsedXid) -> None:
        self.unparsed_times.append(micros(item.timestamp))
        if len(self.unparsed_times) >= TIMELINE_MAX:
            half = TIMELINE_MAX // 2
            _fold_into(self.unparsed_folded, self.unparsed_times[:half], duplicate=False)
            self.folded_until = max(self.folded_until, self.unparsed_folded.last)
            del self.unparsed_times[:half]

    def tally(self, window: XidWindow, kept: list[XidEvent], kept_unparsed: list[UnparsedXid]) -> XidTally:
        """The events in ``window`` by :class:`~gpu_preflight.records.xid.XidCounter`'s rules.

        ``kept`` and ``kept_unparsed`` (the events a record lists) give the example lines.
        """
        from ..records.xid import EXAMPLES, XidCounter, XidGroup, XidTally

        start = micros(window.start) if window.start is not None else UNDATED
        size = len(self.groups)
        count, undated, first, last = [0] * size, [0] * size, [NEVER] * size, [UNDATED] * size
        old, old_first, old_last = [0] * size, [NEVER] * size, [UNDATED] * size  # outside, after its last reset
        everyone = self._reset_at.get(None, 0)
        cover = [max(everyone, self._reset_at.get(group.pci, 0)) for group in self.groups]
        outside = duplicates = 0
        for i, (t, g) in enumerate(zip(self.times, self.gids, strict=True), self._base):
            if t == UNDATED:
                count[g] += 1
                undated[g] += 1
            elif t < start:
                outside += 1
                h = g if g >= 0 else ~g
                if i >= cover[h]:
                    old[h] += 1
                    old_first[h], old_last[h] = min(old_first[h], t), max(old_last[h], t)
            elif g < 0:
                duplicates += 1
            else:
                count[g] += 1
                first[g], last[g] = min(first[g], t), max(last[g], t)
        folded_outside = self.folded_until < start
        for g, group in enumerate(self.groups):
            f = group.folded
            count[g] += f.undated
            undated[g] += f.undated
            if folded_outside:
                outside += f.dated + f.duplicates
                if f.dated and f.position >= cover[g]:  # some folded events may precede the reset: counted all
                    old[g] += f.dated + f.duplicates
                    old_first[g], old_last[g] = min(old_first[g], f.first), max(old_last[g], f.last)
            elif f.dated:
                count[g] += f.dated
                duplicates += f.duplicates
                first[g], last[g] = min(first[g], f.first), max(last[g], f.last)
        sample = XidCounter(window)
        for event in kept:
            sample.add(event)
        kept_tally = sample.tally()
        examples = {(g.xid, g.pci, g.kind): g.examples for g in (*kept_tally.groups, *kept_tally.stale)}
        groups = tuple(XidGroup(group.xid, group.pci, count[g], undated[g], moment(first[g]), moment(last[g]),
                                group.message, examples.get((group.xid, group.pci, group.kind), ()), group.kind)
                       for g, group in enumerate(self.groups) if count[g])
        stale = tuple(XidGroup(group.xid, group.pci, old[g], 0, moment(old_first[g]), moment(old_last[g]),
                               group.message, examples.get((group.xid, group.pci, group.kind), ()), group.kind)
                      for g, group in enumerate(self.groups) if old[g] and not count[g])
        recent = sum(1 for t in self.unparsed_times if t == UNDATED or t >= start)
        folded = self.unparsed_folded
        folded_in = folded.undated + (0 if folded_outside else folded.dated)
        folded_out = folded.dated if folded_outside else 0
        shown = [u for u in kept_unparsed if u.timestamp is None or micros(u.timestamp) >= start]
        return XidTally(window, groups, outside, duplicates, self.dedup_limited, recent + folded_in,
                        len(self.unparsed_times) - recent + folded_out,
                        (*shown[:EXAMPLES], *shown[EXAMPLES:][-EXAMPLES:]), stale, self.resets)

    def _fold(self) -> None:
        half = TIMELINE_MAX // 2
        for i, (t, g) in enumerate(zip(self.times[:half], self.gids[:half], strict=True), self._base):
            folded = self.groups[g if g >= 0 else ~g].folded
            _fold_into(folded, (t,), duplicate=g < 0)
            folded.position = i
            if t > self.folded_until:
                self.folded_until = t
        del self.times[:half]
        del self.gids[:half]
        self._base += half


def _fold_into(folded: Folded, times: array[int] | tuple[int, ...], *, duplicate: bool) -> None:
    for t in times:
        if t == UNDATED:
            folded.undated += 1
            continue
        if duplicate:
            folded.duplicates += 1
        else:
            folded.dated += 1
        folded.first, folded.last = min(folded.first, t), max(folded.last, t)


def micros(stamp: datetime | None) -> int:
    """Microseconds since the epoch, exactly (a float would round some stamps); :data:`UNDATED` for ``None``."""
    return UNDATED if stamp is None else (stamp - _EPOCH) // _MICRO


def moment(value: int) -> datetime | None:
    """The UTC time :func:`micros` encoded; ``None`` for :data:`UNDATED` (and a group's unset :data:`NEVER`)."""
    return None if value in (UNDATED, NEVER) else _EPOCH + value * _MICRO

