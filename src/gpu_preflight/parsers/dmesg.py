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

A kernel log can be gigabytes, so it is streamed (:func:`scan`): each chunk of whole lines
is searched for the few words the interesting lines must contain (``nvrm`` in any case,
``segfault at``, ``limited by``, a refusal) at C speed, and only those lines are decoded
and parsed. The record keeps the first and last :data:`KEPT` of each list with the number
left out between them (``omitted``), per-(Xid, GPU) counts over the whole log
(``xid_counts``), and, off the record's fields, an :class:`~.xid_timeline.XidTimeline` from
which the judge counts any Xid window exactly. Memory is flat in the size of the log.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Generic, TypeVar

from msgspec.structs import replace

from ..records.dmesg import CarrierChanges as CarrierChanges
from ..records.dmesg import DmesgRecord as DmesgRecord
from ..records.dmesg import HostMessage as HostMessage
from ..records.dmesg import NicMessage as NicMessage
from ..records.dmesg import PcieLimit as PcieLimit
from ..records.dmesg import Segfault as Segfault
from ..records.dmesg import XidCount as XidCount
from ..records.dmesg import XidLine as XidLine
from .detect import parser
from .errors import ParseError
from .host_log import HOST_KEYS, host_message
from .kernel_log import (
    JOURNAL_HINT,
    MAX_LINE,
    NO_ENTRIES,
    KernelLineReader,
    UnparsedXid,
    XidEvent,
    kernel_log_denied,
    line_timestamp,
)
from .nic_log import carrier_change, interface_class, nic_message
from .text import ContentGate, strip_ansi
from .xid_timeline import XidTimeline, moment, reset_mark

KIND = "dmesg"
KEPT = 500  # the first and the last this many of each list are kept; the count between is in `omitted`

_LIMITED = re.compile(
    r"pci (?P<device>[0-9a-fA-F:.]+): (?P<available>[\d.]+) Gb/s available PCIe bandwidth, limited by "
    r"(?P<speed>[\d.]+) GT/s PCIe x(?P<width>\d+) link at (?P<at>[0-9a-fA-F:.]+) \(capable of "
    r"(?P<capable>[\d.]+) Gb/s with (?P<cap_speed>[\d.]+) GT/s PCIe x(?P<cap_width>\d+) link\)")
_SEGFAULT = re.compile(r"(?<![^\s\[\]])(?P<process>[^\s\[\]]+)\[(?P<pid>\d+)\]: segfault at \S+ ip \S+ sp \S+ error \d+"
                       r"(?: in (?P<library>[^\[\s]+))?")
# dmesg -H / --reltime print "[Feb22 04:01]" on a line that starts a minute and "[  +0.000844]" on the others.
_RELTIME = r"\[\s*\+\d+\.\d+\]|\[[A-Z][a-z]{2}\d{1,2} \d{2}:\d{2}\]"
# dmesg's stamp with -d's delta ("[ 12.345678 <    0.000123>]", journalctl short-delta's "<    0.000123 >"), -d
# alone ("[<    0.000123>]"), and -r's syslog priority in front ("<3>[ 12.345678]"): util-linux dmesg.c print_record.
_UPTIME = r"(?:<\d{1,3}>)?\[\s*\d{1,9}\.\d+(?: <\s*\d+\.\d+ ?\*?>)?\]|\[<\s*\d+\.\d+>\]"
# Records that carry the kernel's name in a field of their own: RFC 5424 ("<3>1 2026-12-07T12:00:00Z host kernel
# - - -"), journalctl -o json/json-pretty/export/verbose ("_TRANSPORT":"kernel", _TRANSPORT=kernel), dmesg -J's
# '"dmesg": ['.
_KERNEL_RECORD = (r'<\d{1,3}>1 \S+ \S+ kernel |"_TRANSPORT"\s*:\s*"kernel"|(?m:^[ \t]*_TRANSPORT=kernel[ \t]*$)'
                  r'|(?m:^[ \t]*"dmesg"[ \t]*:[ \t]*\[)')
_KERNEL_LINE = re.compile(r"^\s*(?:\[\s*\d+\.\d+\]|" + _UPTIME + "|" + _RELTIME
                          + r"|[a-z]+\s*:\s*[a-z]+\s*:|\d{4}-\d{2}-\d{2}[T ]\d|\[[A-Z][a-z]{2} [A-Z][a-z]{2}"
                          r"|[A-Z][a-z]{2}\s+\d+ \d{2}:\d{2}:\d{2} |\d{1,3},\d+,\d+,[-+c][^;\n]*;)|NVRM:|kernel:|"
                          + _KERNEL_RECORD)
_JOURNAL_KERNEL = re.compile(r"^(?:\S+\s+\d{1,2} \d{2}:\d{2}:\d{2}(?:\.\d+)?"
                             r"|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
                             r"|[A-Z][a-z]{2} \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)? \S+|\d{10}\.\d{6})"
                             r"(?: \S+)? kernel: ",  # no host under --no-hostname (logs-show.c output_short)
                             re.MULTILINE)  # journalctl -o short(-precise, -iso, -iso-precise, -full, -unix), with-unit
# A syslog file's line from any program ("Aug 17 06:18:01 host systemd-networkd[5398]: ib6: lost carrier").
_SYSLOG_LINE = re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \S+ [\w./@-]+(?:\[\d+\])?: \S", re.MULTILINE)
# The kernel's /dev/kmsg record: "<syslog prio>,<sequence>,<microseconds>,<flags>;<message>".
_KMSG_RECORD = re.compile(r"^\d{1,3},\d+,\d+,[-+c][^;\n]*;", re.MULTILINE)
_KERNEL_LINE_BYTES = re.compile(_KERNEL_LINE.pattern.encode(), re.MULTILINE)
# A line that may begin with a wall-clock time (ISO, dmesg -T, syslog, dmesg --decode) is any line
# but plain dmesg's "[  123.456789]"; each candidate is confirmed by line_timestamp, newest first.
_MAYBE_WALL = re.compile(rb"\n(?!\[[ 0-9])")
_NEEDLES_LOWER = (b"nvrm",)  # _SHAPE is case-insensitive: searched in the lower-cased chunk
_NEEDLES = (b"segfault at", b"limited by", b"SXid", b"nvidia-nvswitch", b"Linux version ", b"-- Boot ", b"-- Reboot --",
            b"efa ",
            b"infiniband rdmap", b"infiniband efa_", b"mlx5_core", b"nvidia-peermem", b"nv_mem ",
            b"NV_ERR_RESET_REQUIRED", b"NV_ERR_GPU_IS_LOST",
            b"arrier", *HOST_KEYS)  # "arrier": Lost/Gained/lost carrier
_DENIAL_NEEDLES = (b"dmesg: ", b"No journal files", b"/dev/kmsg: ", JOURNAL_HINT.encode(), NO_ENTRIES.encode())
_SNIFF_LINES = 2000  # lines of the sniff window searched for a NIC driver message
_TAIL_LINES = 32  # lines read back from a chunk's end for its last timestamp before searching all of it
CLOCK_JUMP = timedelta(days=1)  # a line dated this far beyond the one before it (or now) is a clock jump
_STAMP_BYTES = 400  # a timestamp prefix is at most 96 characters of at most 4 bytes

T = TypeVar("T")


class _Kept(Generic[T]):
    """The first and last :data:`KEPT` items of a stream, and how many there were."""

    def __init__(self) -> None:
        self.head: list[T] = []
        self.tail: deque[T] = deque(maxlen=KEPT)
        self.total = 0

    def add(self, item: T) -> None:
        self.total += 1
        if len(self.head) < KEPT:
            self.head.append(item)
        else:
            self.tail.append(item)

    def items(self) -> list[T]:
        return [*self.head, *self.tail]


class DmesgScanner:
    """Feed chunks of whole lines in order, then :meth:`finish`; see the module docstring.

    ``now`` dates syslog lines (they have no year) as :func:`line_timestamp` does; a saved
    file judged on its own leaves them undated.
    """

    def __init__(self, *, now: datetime | None = None, recent: deque[str] | None = None) -> None:
        self.now = now
        self.recent = recent
        self.gate = ContentGate(KIND)
        self.xids: _Kept[XidEvent] = _Kept()
        self.unparsed: _Kept[UnparsedXid] = _Kept()
        self.limits: _Kept[PcieLimit] = _Kept()
        self.segfaults: _Kept[Segfault] = _Kept()
        self.nic: _Kept[NicMessage] = _Kept()
        self.host: _Kept[HostMessage] = _Kept()
        self.carrier: dict[str, CarrierChanges] = {}
        self.timeline = XidTimeline()
        self.lines = 0
        self.denied: str | None = None
        self.journal_notes: set[str] = set()  # journalctl's hint and '-- No entries --': a refusal together
        self.kernel_line = False
        self.last: datetime | None = None
        self.reader = KernelLineReader(now=now)
        self.clock_jumps: list[str] = []

    def _anything(self) -> bool:
        return bool(self.xids.total or self.unparsed.total or self.limits.total or self.segfaults.total
                    or self.nic.total or self.host.total or self.carrier)

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        self.gate.check(chunk)
        self.lines += chunk.count(b"\n") + (not chunk.endswith(b"\n"))
        starts: set[int] = set()
        lower = chunk.lower()
        for needle in _NEEDLES_LOWER:
            _line_starts(lower, needle, starts)
        for needle in _NEEDLES:
            _line_starts(chunk, needle, starts)
        if self.denied is None and not self._anything():
            for needle in _DENIAL_NEEDLES:
                _line_starts(chunk, needle, starts)
        for start in sorted(starts):
            end = chunk.find(b"\n", start)
            for line in chunk[start:end if end >= 0 else len(chunk)].decode("utf-8", errors="replace").splitlines():
                self._line(line, _record_stamp(chunk, start, self.now))
        if not self.kernel_line:
            self.kernel_line = _KERNEL_LINE_BYTES.search(chunk) is not None
        last, jumps = _last_stamp(chunk, self.now)
        self.last = last or self.last
        self.clock_jumps.extend(jumps[:KEPT - len(self.clock_jumps)])

    def _line(self, line: str, record_stamp: datetime | None = None) -> None:
        line = strip_ansi(line)  # dmesg --color=always splits "NVRM: " from "Xid" (dmesg.c print_record)
        if reset_mark(line):  # a driver load or a boot: older Xids before it are not left unreset
            self.timeline.add_reset()
        items = self.reader.read(line)
        if record_stamp is not None:  # a MESSAGE field of a multi-line journal record: the record's time
            items = [replace(i, timestamp=record_stamp) if isinstance(i, XidEvent) and i.timestamp is None else i
                     for i in items]
        if items and self.recent is not None:
            self.recent.append(line[:1024])
        for found in items:
            if isinstance(found, UnparsedXid):
                self.unparsed.add(found)
                self.timeline.add_unparsed(found)
            else:
                self.timeline.add(found)
                self.xids.add(found)
        bounded = line[:MAX_LINE]
        if "limited by" in bounded and (m := _LIMITED.search(bounded)):
            self.limits.add(PcieLimit(
                device=m.group("device"), available_gbps=float(m.group("available")),
                limited_by_speed_gts=float(m.group("speed")), limited_by_width=int(m.group("width")),
                limited_at=m.group("at"), capable_gbps=float(m.group("capable")),
                capable_speed_gts=float(m.group("cap_speed")), capable_width=int(m.group("cap_width"))))
        elif m := _segfault(bounded):
            self.segfaults.add(Segfault(m.group("process"), int(m.group("pid")), m.group("library"),
                                        bounded.strip()))
        elif nic := nic_message(bounded):
            self.nic.add(NicMessage(*nic, timestamp=_iso(line_timestamp(bounded, now=self.now))))
        elif (change := carrier_change(bounded)) and (link := interface_class(change[0])) != "virtual":
            self._carrier(change[0], link, change[1], _iso(line_timestamp(bounded, now=self.now)))
        elif host := host_message(bounded):
            self.host.add(HostMessage(*host, timestamp=_iso(line_timestamp(bounded, now=self.now))))
        if self.denied is None and not self._anything() and (
                "failed:" in line or "No journal files" in line or "/dev/kmsg:" in line):
            self.denied = kernel_log_denied(line)
        if self.denied is None and (note := next((n for n in (JOURNAL_HINT, NO_ENTRIES) if n in line), None)):
            self.journal_notes.add(note)
            self.denied = kernel_log_denied("\n".join(self.journal_notes))

    def _carrier(self, interface: str, link: str, lost: bool, stamp: str | None) -> None:
        changes = self.carrier.get(interface)
        if changes is None:
            if len(self.carrier) >= KEPT:  # a log naming more interfaces than this is not a node's NICs
                return
            changes = self.carrier[interface] = CarrierChanges(interface, link)
        if lost:
            changes.lost += 1
            changes.first_lost = changes.first_lost or stamp
            changes.last_lost = stamp or changes.last_lost
        else:
            changes.gained += 1

    def _xid_line(self, found: XidEvent) -> XidLine:
        return XidLine(xid=found.xid, pci_bus_id=self.timeline.gpu(found.pci), message=found.message,
                       timestamp=found.timestamp.isoformat() if found.timestamp else None, pid=found.pid,
                       process=found.process, raw=found.raw.strip(), kind=found.kind)

    def finish(self) -> DmesgRecord:
        self.gate.finish()
        record = DmesgRecord(
            xid_events=[self._xid_line(e) for e in self.xids.items()], pcie_limits=self.limits.items(),
            segfaults=self.segfaults.items(), nic_messages=self.nic.items(), carrier=list(self.carrier.values()),
            host_messages=self.host.items(),
            lines=self.lines, unparsed_xids=self.unparsed.items(), clock_jumps=self.clock_jumps,
            last_timestamp=self.last.isoformat() if self.last else None,
            xid_counts=[XidCount(g.xid, g.pci, g.count, _iso(moment(g.first)), _iso(moment(g.last)))
                        for g in self.timeline.groups if g.kind.partition(":")[0] == "xid"],  # Xid lines only
            omitted={name: kept.total - len(kept.head) - len(kept.tail)
                     for name, kept in (("xid_events", self.xids), ("unparsed_xids", self.unparsed),
                                        ("pcie_limits", self.limits), ("segfaults", self.segfaults),
                                        ("nic_messages", self.nic), ("host_messages", self.host))
                     if kept.total > len(kept.head) + len(kept.tail)},
        )
        record.timeline = self.timeline
        if self.denied and not self._anything():
            record.readable, record.denied = False, self.denied
        elif not (self._anything() or self.kernel_line):
            raise ParseError(KIND, "no kernel log line (no timestamp prefix, no 'kernel:', no NVRM)")
        return record


# A line as only dmesg itself prints it with a wall clock or --decode: -T's "[Sat Oct 12 18:38:44 2024] ",
# --time-format iso's "2025-01-17T15:36:15,345059+00:00 " (comma, microseconds, offset), -x's
# "kern  :info  : ". A paste of such lines without a driver message is still a kernel log.
_DMESG_CLOCK = re.compile(r"^(?:\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}"
                          r"(?: <\s*\d+\.\d+>)?\] "
                          r"|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2},\d{6}[+-]\d{2}:?\d{2} "
                          r"|(?:kern|user|mail|daemon|auth|syslog|lpr|news|uucp|cron|authpriv|ftp|local[0-7])\s*:"
                          r"(?:emerg|alert|crit|err|warn|notice|info|debug)\s*: )", re.MULTILINE)


# The NVSwitch driver's own error line, at a line start: as specific as "NVRM: Xid" without any log prefix.
_BARE_SXID = re.compile(r"^\s*nvidia-nvswitch\d+: SXid \(PCI:[0-9a-fA-F:.]+\): \d+,", re.MULTILINE)


def _starts_a_kernel_line(text: str, needle: str) -> bool:
    """Whether a line holding ``needle`` starts as the kernel log prints it (a monotonic or wall-clock stamp, a
    journal's date): surer evidence than the same line behind a paste's tag on every line, whose reading
    without the tag then wins (and keeps the line's time)."""
    return any(re.match(r"\s*\[\s*\d+\.\d+\]", line) or line_timestamp(line) is not None
               for line in text.splitlines() if needle in line)


# dev_printk's "<driver> <BDF>: ..." (pcieport, ath9k, nvidia): a driver's name in front of the device it logs about.
_DRIVER_NAME = re.compile(r"[\w.-]+ ")


def _pasted_bare(line: str, message: str) -> bool:
    """Whether ``line`` is the host message alone, as copied without the kernel's stamp: the message itself, or
    dev_printk's form of it with the driver's name in front ("pcieport 0000:00:1c.0: AER: Corrected error
    received", Dasharo/dasharo-issues#639 with its stamps cut off)."""
    head, found, _ = line.strip().partition(message)
    return bool(found) and (not head or _DRIVER_NAME.fullmatch(head) is not None)


def sniff(text: str) -> int:
    if head := next((h for h in ("NVRM: Xid", "NVRM Xid (") if h in text), None):  # the second: copied by hand
        return 86 if _starts_a_kernel_line(text, head) else 85
    if _LIMITED.search(text) or kernel_log_denied(text):
        return 80
    if "segfault at" in text and any(_segfault(line) for line in text.splitlines()):
        return 60
    if ("NVRM:" in text or "SXid (" in text) and _KERNEL_LINE.search(text):
        return 61 if _starts_a_kernel_line(text, "NVRM:") else 60  # driver messages without an Xid line, SXids
    if "SXid (" in text and _BARE_SXID.search(text):
        return 60  # the NVSwitch driver's SXid line pasted without its kernel-log prefix
    if any(nic_message(line[:MAX_LINE]) for line in text.splitlines()[:_SNIFF_LINES]):
        return 60  # an RDMA NIC driver's own message, anchored on its driver prefix
    host = [(line, found) for line in text.splitlines()[:_SNIFF_LINES] if (found := host_message(line[:MAX_LINE]))]
    if host and _KERNEL_LINE.search(text):
        return 60  # the kernel's own AER / OOM-kill / hung-task / thermal text on a kernel-log line
    if any(_pasted_bare(line, found[2]) for line, found in host):
        return 25  # such a message pasted bare ("INFO: task x:1 blocked for more than 120 seconds."): a line of its own
    # the kernel stamps seconds since boot: ten integer digits are a wall clock (UCX's '[1700554343.440877] [host:pid')
    if re.search(r"^(?:" + _UPTIME + "|" + _RELTIME + ") ", text, re.MULTILINE) or _KMSG_RECORD.search(text) \
            or _DMESG_CLOCK.search(text) or re.search(_KERNEL_RECORD, text):
        return 30  # plain dmesg, dmesg -H / -T / --time-format iso / -x, or /dev/kmsg records ("6,3964,20676,-;msg")
    if _JOURNAL_KERNEL.search(text):
        return 20  # "<month> <day> <time> <host> kernel: ..." or its ISO form
    return 15 if _SYSLOG_LINE.search(text) else 0  # a syslog file: other programs' lines (systemd-networkd...)


def scan(chunks: Iterable[bytes], *, now: datetime | None = None, recent: deque[str] | None = None) -> DmesgRecord:
    """A kernel log streamed as chunks of whole lines (see :func:`gpu_preflight.boundedio.iter_chunks`).

    ``recent``, when given, receives every Xid-shaped line (a bounded deque keeps the newest).
    """
    scanner = DmesgScanner(now=now, recent=recent)
    for chunk in chunks:
        scanner.feed(chunk)
    return scanner.finish()


def _stream(chunks: Iterable[bytes]) -> DmesgRecord:
    return scan(chunks)


@parser(KIND, sniff=sniff, stream=_stream,
        title="kernel log (dmesg, dmesg -T/--time-format iso/--decode, journalctl -k, syslog)")
def parse(text: str) -> DmesgRecord:
    """Parse a saved kernel log for Xid events, PCIe ``limited by`` lines and GPU-library segfaults."""
    return scan([text.encode("utf-8", errors="surrogatepass")])


def log_lines(chunks: Iterable[bytes], keep: int = 10_000) -> tuple[list[str], str | None]:
    """The PCIe ``limited by`` lines and the newest Xid/NVRM lines of a streamed log (at most ``keep`` of each),
    and its refusal line if it is one."""
    limited: deque[str] = deque(maxlen=keep)
    nvrm: deque[str] = deque(maxlen=keep)
    denied: str | None = None
    for chunk in chunks:
        starts: set[int] = set()
        lower = chunk.lower()
        _line_starts(lower, b"nvrm", starts)
        _line_starts(lower, b"xid", starts)
        _line_starts(chunk, b"nvidia-nvswitch", starts)
        _line_starts(chunk, b"limited by", starts)
        if denied is None:
            for needle in _DENIAL_NEEDLES:
                _line_starts(chunk, needle, starts)
        for start in sorted(starts):
            end = chunk.find(b"\n", start)
            for line in chunk[start:end if end >= 0 else len(chunk)].decode("utf-8", errors="replace").splitlines():
                if denied is None and (found := kernel_log_denied(line)):
                    denied = found
                elif "limited by" in line:
                    limited.append(line)
                elif "xid" in line.lower() or "nvrm" in line.lower() or "nvidia-nvswitch" in line:
                    nvrm.append(line)
    return [*limited, *nvrm], denied


# The MESSAGE field of a journal record that spans lines: export ("MESSAGE="), verbose ("    MESSAGE="), json-pretty
# ('\t"MESSAGE" : '). The record's time is on a line before it in the same record: export's and json-pretty's
# __REALTIME_TIMESTAMP, verbose's header ("Mon 2026-12-07 12:00:00.500000 UTC [s=<cursor>]").
_RECORD_MESSAGE = re.compile(rb'[ \t]*(?:MESSAGE=|"MESSAGE"[ \t]*:)')
_RECORD_BYTES = 16384  # a record's fields before MESSAGE are looked back for this far (journal fields are short)


def _record_stamp(chunk: bytes, start: int, now: datetime | None) -> datetime | None:
    """The wall-clock time of the journal record whose MESSAGE line starts at ``start``, else ``None``.

    Each record states its time before its MESSAGE, so the nearest such line before it in the chunk is its own; a
    record cut by the chunk's start has none here and stays undated.
    """
    if not _RECORD_MESSAGE.match(chunk, start):
        return None
    low = max(0, start - _RECORD_BYTES)
    head = max(chunk.rfind(b"__REALTIME_TIMESTAMP", low, start), chunk.rfind(b" [s=", low, start))  # nearest first
    if head < 0:
        return None
    line_start = chunk.rfind(b"\n", 0, head) + 1
    line_end = chunk.find(b"\n", head)
    line = chunk[line_start:line_end if line_end >= 0 else len(chunk)].decode("utf-8", errors="replace")
    return line_timestamp(line, now=now)


def _line_starts(haystack: bytes, needle: bytes, starts: set[int]) -> None:
    """Add the offset of every line of ``haystack`` that holds ``needle``."""
    pos = haystack.find(needle)
    while pos >= 0:
        starts.add(haystack.rfind(b"\n", 0, pos) + 1)
        end = haystack.find(b"\n", pos)
        if end < 0:
            return
        pos = haystack.find(needle, end)


def _last_stamp(chunk: bytes, now: datetime | None) -> tuple[datetime | None, list[str]]:
    """The wall-clock time of the last line of ``chunk`` that has a believable one, and the lines passed over.

    A line dated more than :data:`CLOCK_JUMP` after the stamped line before it (or after ``now``)
    is a clock jump, not the log's end: one line dated 2099 must not move the Xid window past every
    real event. Its last lines are read first, then a search.
    """
    end = len(chunk) - chunk.endswith(b"\n")
    found: list[tuple[datetime, str]] = []
    for _ in range(_TAIL_LINES):
        if end < 0:
            break
        start = chunk.rfind(b"\n", 0, end) + 1
        if (stamp := _stamp_of(chunk, start, now)) is not None:
            found.append((stamp, chunk[start:end + 1].decode("utf-8", errors="replace")))
            if len(found) > 1 and not _jumped(found[-2][0], stamp, now):
                break
        end = start - 1
    if not found and end >= 0:
        candidates = [0, *(m.end() for m in _MAYBE_WALL.finditer(chunk, 0, max(end, 0) + 1))]
        for start in reversed(candidates):
            if start <= end and (stamp := _stamp_of(chunk, start, now)) is not None:
                return stamp, []
        return None, []
    jumps: list[str] = []
    for i, (stamp, line) in enumerate(found):
        before = found[i + 1][0] if i + 1 < len(found) else None
        if _jumped(stamp, before, now):
            jumps.append(line.strip()[:300])
            continue
        return stamp, jumps
    return None, jumps


def _jumped(stamp: datetime, before: datetime | None, now: datetime | None) -> bool:
    """``stamp`` is far beyond the line before it, or beyond now."""
    return (before is not None and stamp - before > CLOCK_JUMP) or (now is not None and stamp - now > CLOCK_JUMP)


def _stamp_of(chunk: bytes, start: int, now: datetime | None) -> datetime | None:
    head = chunk[start:start + _STAMP_BYTES].split(b"\n", 1)[0].decode("utf-8", errors="replace")
    for line in reversed(head.splitlines()):
        if (stamp := line_timestamp(strip_ansi(line), now=now)) is not None:
            return stamp
    return None


def _iso(stamp: datetime | None) -> str | None:
    return stamp.isoformat() if stamp else None


def _segfault(line: str) -> re.Match[str] | None:
    return _SEGFAULT.search(line[:MAX_LINE]) if "segfault at" in line else None
