"""Xid events from kernel-log text: every prefix style a collector may hand us.

The NVIDIA driver writes one line per Xid, ``NVRM: Xid (PCI:0000:38:00): 13, pid=...,
name=..., <message>``, and the tools that show the kernel log put different prefixes in
front of it: ``dmesg --time-format iso`` (optionally ``--decode``'s ``kern  :warn  :``),
``dmesg -T``, plain ``dmesg`` (seconds since boot), ``journalctl -o short-iso``, classic
syslog files, raw ``/dev/kmsg`` records (microseconds since boot), or nothing at all when
someone pasted a bare line. The Xid part is found with one pattern anywhere in the line
and the timestamp is read from whatever precedes it, so a new prefix style costs one
pattern, not a new parser.

Times without a zone (``dmesg -T``, syslog) are read in ``local_tz`` (UTC unless told);
boot-relative times need ``boot_time``; a syslog line has no year, so it needs ``now``.
Where the time cannot be known the event keeps ``timestamp=None`` instead of a guess: the
policy then treats it as undated rather than silently old or new.

A line whose GPU address was redacted before it was pasted (``NVRM: Xid (PCI:...): 145, ...``) is
still the event its Xid number names, on no particular GPU.

A line that has the shape of an Xid event (``NVRM: Xid``) but not its grammar (the Xid
number cut off, an unclosed parenthesis, ``-1``) is an :class:`UnparsedXid`, never
silently nothing: a truncated ``Xid 79`` line must not read as a clean log. Patterns only
look at the first :data:`MAX_LINE` characters of a line (a kernel record is at most 1 KiB),
and none has nested or overlapping quantifiers, so a long line costs linear time.

A failed read (``dmesg: read kernel buffer failed: Operation not permitted``) contains
no Xid lines either; :func:`kernel_log_denied` tells it apart from a clean log, so a
collector can say "cannot read kernel log" instead of "no Xid errors".
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo

from msgspec.structs import replace

from ..records.xid import UnparsedXid, XidEvent, normalize_pci
from ..records.xid import pci_key as pci_key

__all__ = [
    "DRIVER_MESSAGES", "JOURNAL_HINT", "MAX_LINE", "NO_ENTRIES", "KernelLineReader", "UnparsedXid", "XidEvent",
    "civil_time", "kernel_log_denied",
    "line_timestamp", "normalize_pci", "parse_xid_events", "scan_xid_line",
]

MAX_LINE = 4096  # characters of a line the patterns read; printk records are at most 1024


# What people put in place of the GPU's address when they redact a pasted Xid line ("PCI:...",
# "PCI:xxxx:xx:xx", "<redacted>"): the event keeps its Xid number and text and names no GPU.
_REDACTED = (r"\.{2,}|\u2026|[xX*#]{2,}(?::[xX*#]{1,4}){0,2}(?:\.[xX*#])?|<[A-Za-z _-]{1,24}>"
             r"|\[[A-Za-z _-]{1,24}\]|redacted|REDACTED|Redacted")
# The driver prints "NVRM: Xid (PCI:...): N"; a line copied off a console by hand loses the colon after
# NVRM or gains a space before the Xid's colon ("NVRM Xid (PCI:0000:0b:00) : 32", fireice-uk/xmr-stak#2054):
# still the event its number names. "NVRM Xid" without the parenthesis (prose) is no event shape.
# With MIG enabled the driver names the GPU instance, and the compute instance where it knows it, after the
# address (kernel_rc.c, every release since 515: "NVRM: Xid (PCI:0000:01:00 GPU-I:05 GPU-CI:00): 95, ..."):
# still an event of that GPU; the instance stays in the raw line.
_XID = re.compile(r"NVRM:? Xid \((?:PCI:)?(?:(?P<pci>[0-9A-Fa-f]+:[0-9A-Fa-f]+(?::[0-9A-Fa-f.]+)?)"
                  r"|(?:" + _REDACTED + r"))(?: GPU-I:\d{1,3}(?: GPU-CI:\d{1,3})?)?\) ?: (?P<xid>\d{1,6})(?=[,\s]|$)"
                  r"(?P<rest>.*)$")
_SHAPE = re.compile(r"NVRM:\s*Xid\b|NVRM Xid \(", re.IGNORECASE)
_HEAD = re.compile(r"NVRM:? Xid \(")
_XID_NUMBER = re.compile(r"\) ?: (?P<xid>\S*)")
_STAMP_PREFIX = 96  # a timestamp prefix is never longer than this
_JSON_PREFIX = 384  # journalctl -o json: __CURSOR (about 150 characters) then __REALTIME_TIMESTAMP
_PID = re.compile(r"^pid=(?:'?<unknown>'?|(?P<pid>\d+))(?:,\s*|$)")
_NAME = re.compile(r"^name=(?P<name>[^,]*)(?:,\s*|$)")

_KMSG = re.compile(r"^\s*\d+,\d+,(?P<usec>\d+),[^;]*;\s*$")
_DECODE = re.compile(r"^\s*[a-z0-9]+\s*:\s*(?:emerg|alert|crit|err|warn|notice|info|debug)\s*:\s*")
_ISO = re.compile(r"^\s*(?P<date>\d{4}-\d{2}-\d{2})[T ](?P<time>\d{2}:\d{2}:\d{2})"
                  r"(?:[.,](?P<frac>\d+))?(?P<tz>Z|[+-]\d{2}:?\d{2})?")
# dmesg -T, and -T -d's "[Mon Dec  7 12:00:00 2026 <    0.000123>]" (util-linux dmesg.c "[%s <%12.06f>] ").
_CTIME = re.compile(r"^\s*\[(?:[A-Z][a-z]{2}\s+)?(?P<mon>[A-Z][a-z]{2})\s+(?P<day>\d{1,2})\s+"
                    r"(?P<time>\d{2}:\d{2}:\d{2})\s+(?P<year>\d{4})(?: <\s*\d+\.\d+>)?\]")
# A syslog priority in front of the stamp: dmesg -r's "<3>[ 12.345678] ", RFC 5424's "<3>1 2026-12-07T12:00:00..."
# (rsyslog RSYSLOG_SyslogProtocol23Format, syslog-ng), RFC 3164 as sent on the wire ("<3>Dec  7 12:00:00 host").
_PRI = re.compile(r"^\s*<\d{1,3}>(?:1 )?")
# journalctl -o short-full / with-unit / verbose: "Mon 2026-12-07 12:00:00[.123456] UTC" (systemd logs-show.c,
# format_timestamp: weekday, date, time, the zone's abbreviation).
_FULL = re.compile(r"^\s*(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<date>\d{4}-\d{2}-\d{2}) (?P<time>\d{2}:\d{2}:\d{2})"
                   r"(?:\.(?P<frac>\d{1,6}))? (?P<zone>[A-Za-z][A-Za-z0-9+-]{0,9}|[+-]\d{2}:?\d{2})\s")
# journalctl -o short-unix: seconds since 1970 with microseconds, "%10lu.%06lu" (logs-show.c).
_UNIX = re.compile(r"^\s*(?P<sec>\d{10})\.(?P<usec>\d{6})\s")
# journalctl -o json / json-seq / json-sse: the entry's wall clock in microseconds since 1970, a field before MESSAGE;
# json-pretty and export (logs-show.c output_export "__REALTIME_TIMESTAMP=" USEC_FMT) put it on a line of its own.
_JSON_REALTIME = re.compile(r'"__REALTIME_TIMESTAMP"\s*:\s*"(?P<usec>\d{1,20})"'
                            r'|^\s*__REALTIME_TIMESTAMP=(?P<field>\d{1,20})')
_SYSLOG = re.compile(r"^\s*(?P<mon>[A-Z][a-z]{2})\s+(?P<day>\d{1,2})\s+(?P<time>\d{2}:\d{2}:\d{2})"
                     r"(?:\.(?P<frac>\d{1,9}))?\s")  # journalctl -o short / short-precise, syslog files
_MONO = re.compile(r"\[\s*(?P<sec>\d+\.\d+)\]")

_MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}

_DENIED = re.compile(
    r"^.*?(?:dmesg: (?:read kernel buffer|klogctl) failed: .+"
    r"|No journal files were (?:found|opened due to insufficient permissions)\.?"
    r"|/dev/kmsg: (?:Permission denied|Operation not permitted))\s*$",
    re.MULTILINE,
)


def parse_xid_events(
    text: str,
    *,
    boot_time: datetime | None = None,
    now: datetime | None = None,
    local_tz: tzinfo | None = None,
) -> list[XidEvent]:
    """Every Xid line in ``text``, in log order.

    ``boot_time`` turns boot-relative stamps (plain dmesg, /dev/kmsg) into wall time;
    ``now`` supplies the year of syslog lines; ``local_tz`` is the zone of stamps printed
    without one (default UTC). All three must be timezone-aware where given.
    """
    _require_aware(boot_time=boot_time, now=now)
    zone = local_tz or UTC
    return [event for line in text.splitlines()
            if isinstance(event := scan_xid_line(line, boot_time=boot_time, now=now, zone=zone), XidEvent)]


def scan_xid_line(line: str, *, boot_time: datetime | None = None, now: datetime | None = None,
                  zone: tzinfo = UTC) -> XidEvent | UnparsedXid | None:
    """The Xid event on ``line``, an :class:`UnparsedXid` when the line only looks like one, else ``None``.

    Callers that stream a log check the times once with :func:`parse_xid_events`'s rules;
    here they must already be timezone-aware.
    """
    bounded = line[:MAX_LINE]
    if "Xid" not in bounded and "xid" not in bounded.lower():
        return None
    shape = _SHAPE.search(bounded)
    if shape is None:
        return None
    m = _XID.search(bounded)
    if m is None:
        stamp = _safe_timestamp(bounded[: shape.start()], boot_time, now, zone)
        return UnparsedXid(bounded[:300].strip(), stamp, _unparsed_reason(bounded[shape.start():]))
    return _event(m, line, boot_time, now, zone)


def line_timestamp(line: str, *, boot_time: datetime | None = None, now: datetime | None = None,
                   zone: tzinfo = UTC) -> datetime | None:
    """The wall-clock time a kernel-log line was written at, by the same prefix rules as an Xid."""
    if line[:8].lstrip("\x1e").startswith(("{", "data: {")) and (stamp := _epoch(line[:_JSON_PREFIX], now, zone)):
        return stamp  # a journal JSON entry: its __REALTIME_TIMESTAMP follows the long __CURSOR
    head = line[:_STAMP_PREFIX]
    semicolon = head.find(";")
    if semicolon > 0 and _KMSG.match(head[: semicolon + 1]):
        head = head[: semicolon + 1]
    return _safe_timestamp(head, boot_time, now, zone)


def kernel_log_denied(text: str) -> str | None:
    """The failure line when ``text`` is a refused read of the kernel log, else ``None``.

    An unprivileged ``dmesg`` (``kernel.dmesg_restrict=1``, a container without
    CAP_SYSLOG) prints this instead of the log; treating it as an empty log would report
    a node with Xid 79 as clean. ``journalctl -k`` run by a user outside the journal's groups
    prints :data:`JOURNAL_HINT` and :data:`NO_ENTRIES`: both together are the refusal (the hint
    alone may head lines the user can read).
    """
    m = _DENIED.search(text)
    if m:
        return m.group(0).strip()
    return JOURNAL_HINT if JOURNAL_HINT in text and _NO_ENTRIES.search(text) else None


# systemd journalctl's notice to a user who cannot read the system journal (journalctl.c, log_notice "Hint: You are
# currently not seeing messages from other users and the system.\n      Users in groups '%s' can see all messages."),
# and the line it prints where no entry matched: the kernel's messages are in the system journal.
JOURNAL_HINT = "Hint: You are currently not seeing messages from other users and the system."
NO_ENTRIES = "-- No entries --"
_NO_ENTRIES = re.compile(r"^" + re.escape(NO_ENTRIES) + r"\s*$", re.MULTILINE)


def _require_aware(**values: datetime | None) -> None:
    for name, value in values.items():
        if value is not None and value.utcoffset() is None:
            raise ValueError(f"{name} must be timezone-aware, got {value!r}")


def _event(m: re.Match[str], line: str, boot_time: datetime | None, now: datetime | None,
           zone: tzinfo) -> XidEvent:
    pid, process, message = _fields(m.group("rest"))
    return XidEvent(
        xid=int(m.group("xid")),
        pci=m.group("pci"),
        timestamp=_safe_timestamp(line[: m.start()], boot_time, now, zone),
        pid=pid,
        process=process,
        message=message,
        raw=line,
    )


def _unparsed_reason(tail: str) -> str:
    """Why an ``NVRM: Xid`` line is not an event, in the words of the grammar it breaks."""
    if not _HEAD.match(tail):
        return "expected 'NVRM: Xid (<PCI address>): <Xid>'"
    close = tail.find(")")
    if close < 0:
        return "unclosed parenthesis after 'NVRM: Xid ('"
    number = _XID_NUMBER.match(tail, close)
    if number is None:
        return "no ': <Xid>' after the PCI address"
    if not number.group("xid").rstrip(",").isdigit():
        return f"Xid is not a number: {number.group('xid')[:20]!r}"
    return "PCI address or Xid number out of form"


def _safe_timestamp(prefix: str, boot_time: datetime | None, now: datetime | None,
                    zone: tzinfo) -> datetime | None:
    """A prefix's time, or ``None`` for an impossible one (hour 27, month 13)."""
    try:
        return _timestamp(prefix, boot_time, now, zone)
    except (ValueError, OverflowError):
        return None


def _fields(rest: str) -> tuple[int | None, str | None, str]:
    """Split ``, pid=..., name=..., message`` (both fields optional) into its parts."""
    text = rest.lstrip(", ").strip()
    pid: int | None = None
    process: str | None = None
    if m := _PID.match(text):
        pid = int(m.group("pid")) if m.group("pid") else None
        text = text[m.end():]
    if m := _NAME.match(text):
        name = m.group("name").strip()
        process = None if name in ("", "<unknown>", "'<unknown>'") else name
        text = text[m.end():]
    return pid, process, text.strip()


def _timestamp(prefix: str, boot_time: datetime | None, now: datetime | None,
               zone: tzinfo) -> datetime | None:
    """Wall-clock UTC time from a line prefix, absolute stamps first, then boot-relative."""
    prefix = _PRI.sub("", prefix, count=1)
    head = prefix.lstrip()
    if head[:1] == "[" and not head[1:2].isalpha():  # plain dmesg's "[ 8391.220110]": only boot-relative
        m = _MONO.search(prefix)
        return _since_boot(boot_time, float(m.group("sec"))) if m else None
    if m := _KMSG.match(prefix):
        return _since_boot(boot_time, int(m.group("usec")) / 1_000_000)
    prefix = _DECODE.sub("", prefix, count=1)
    for reader in _ABSOLUTE:
        stamp = reader(prefix, now, zone)
        if stamp is not None:
            return stamp.astimezone(UTC)
    if m := _MONO.search(prefix):
        return _since_boot(boot_time, float(m.group("sec")))
    return None


def _since_boot(boot_time: datetime | None, seconds: float) -> datetime | None:
    if boot_time is None:
        return None
    return (boot_time + timedelta(seconds=seconds)).astimezone(UTC)


def _iso(prefix: str, now: datetime | None, zone: tzinfo) -> datetime | None:
    m = _ISO.match(prefix)
    if m is None:
        return None
    frac = (m.group("frac") or "")[:6].ljust(6, "0")
    try:
        stamp = datetime.fromisoformat(f"{m.group('date')}T{m.group('time')}.{frac}")
    except ValueError:  # an impossible stamp (hour 27): the event stays, undated
        return None
    tz = m.group("tz")
    if tz is None:
        return stamp.replace(tzinfo=zone)
    if tz == "Z":
        return stamp.replace(tzinfo=UTC)
    sign = -1 if tz[0] == "-" else 1
    digits = tz[1:].replace(":", "")
    offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    return stamp.replace(tzinfo=timezone(sign * offset))


def _ctime(prefix: str, now: datetime | None, zone: tzinfo) -> datetime | None:
    m = _CTIME.match(prefix)
    if m is None:
        return None
    return civil_time(int(m.group("year")), m.group("mon"), m.group("day"), m.group("time"), zone)


def _syslog(prefix: str, now: datetime | None, zone: tzinfo) -> datetime | None:
    """``Jan 21 02:21:33 host kernel:``: the year is now's, or last year's if that is ahead."""
    m = _SYSLOG.match(prefix)
    if m is None or now is None:
        return None
    local_now = now.astimezone(zone)
    stamp = civil_time(local_now.year, m.group("mon"), m.group("day"), m.group("time"), zone)
    if stamp is not None and stamp > local_now + timedelta(days=1):
        stamp = civil_time(local_now.year - 1, m.group("mon"), m.group("day"), m.group("time"), zone)
    frac = m.group("frac")
    return stamp.replace(microsecond=int(frac[:6].ljust(6, "0"))) if stamp is not None and frac else stamp


def civil_time(year: int, month: str, day: str, clock: str, zone: tzinfo) -> datetime | None:
    """A log's printed date (``Jan``, ``21``, ``02:21:33``) in ``zone``; None where it is no date."""
    number = _MONTHS.get(month)
    if number is None:
        return None
    hour, minute, second = (int(p) for p in clock.split(":"))
    try:
        return datetime(year, number, int(day), hour, minute, second, tzinfo=zone)
    except ValueError:
        return None


def _full(prefix: str, now: datetime | None, zone: tzinfo) -> datetime | None:
    """``Mon 2026-12-07 12:00:00 UTC``: UTC/GMT and numeric offsets say their zone; a named local zone (CET) is
    ``zone``, as dmesg -T's unzoned local time is."""
    m = _FULL.match(prefix)
    if m is None:
        return None
    tz = m.group("zone")
    suffix = "Z" if tz in ("UTC", "GMT") else tz if tz[0] in "+-" else ""
    return _iso(f"{m.group('date')}T{m.group('time')}.{m.group('frac') or '0'}{suffix}", now, zone)


def _epoch(prefix: str, now: datetime | None, zone: tzinfo) -> datetime | None:
    """journalctl's short-unix stamp, or a JSON entry's ``__REALTIME_TIMESTAMP``: seconds since 1970, in UTC."""
    if m := _UNIX.match(prefix):
        return datetime.fromtimestamp(int(m.group("sec")), UTC).replace(microsecond=int(m.group("usec")))
    if "__REALTIME_TIMESTAMP" in prefix and (m := _JSON_REALTIME.search(prefix)):
        usec = int(m.group("usec") or m.group("field"))
        return datetime.fromtimestamp(usec // 1_000_000, UTC).replace(microsecond=usec % 1_000_000)
    return None


_ABSOLUTE = (_iso, _ctime, _syslog, _full, _epoch)



# Driver messages that report a failed GPU without an ``NVRM: Xid`` line, each judged as the Xid it
# stands for (``[driver.<id>]`` in the Xid catalogue holds the verdict). ``pci`` names the GPU where
# the line does; the multi-line "fallen off the bus" notice names it on an earlier line.
DRIVER_MESSAGES: tuple[tuple[str, int, re.Pattern[str]], ...] = (
    ("fallen_off_bus", 79, re.compile(
        r"NVRM: GPU (?:at )?(?:PCI:)?(?P<pci>[0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f.]+):? (?:GPU )?"
        r"has fallen off the bus")),
    ("fallen_off_bus", 79, re.compile(r"NVRM: (?:\(PCI ID: [^)]*\) )?fallen off the bus and is not responding")),
    ("probe_failed", 79, re.compile(r"NVRM: The NVIDIA probe routine failed for \d+ device")),
    # nv-pci.c's probe aborting for one GPU, each before the summary line above (every tag 515-595): the PCI device
    # could not be enabled, has no IRQ, or its registers are claimed by another driver.
    ("probe_failed", 79, re.compile(
        r"NVRM: (?:pci_enable_device failed, aborting|Can't find an IRQ for your NVIDIA card!"
        r"|request_mem_region failed for \d+M @ 0x)")),
    # The driver loaded but owns no GPU, or not all of them: another driver (nouveau, vfio-pci) bound
    # them first. No Xid stands for these (0): the GPUs are not broken, the node cannot use them.
    # nv.c's wordings across releases: "No NVIDIA graphics adapter found!", "No NVIDIA GPU found." (no supported
    # GPU counted), "No NVIDIA devices probed.", "None of the NVIDIA devices were initialized." (older: "graphics
    # adapters were initialized!"): each ends the module load with -ENODEV.
    ("no_adapter_probed", 0, re.compile(
        r"NVRM: (?:No NVIDIA (?:graphics )?adapter (?:probed|found)!|No NVIDIA (?:GPU found|devices probed)\."
        r"|None of the NVIDIA (?:devices|graphics adapters) were initiali[sz]ed)")),
    # The driver refuses one GPU it does not drive: a GPU only a legacy branch supports ("... is supported through
    # the NVIDIA 470.xx Legacy drivers ... will ignore this GPU"), a GPU this release does not support, or one
    # without GSP under the open nvidia.ko (osapi.c's multi-line notice, "installed in this system is not supported
    # by open / by the NVIDIA <version> driver release"). No Xid stands for it (0): that GPU stays unused.
    ("unsupported_gpu", 0, re.compile(
        r"NVRM:.*\bsupported through the NVIDIA \d+\.xx Legacy drivers"
        r"|NVRM: (?:installed )?in this (?:vGPU host )?system is not supported by\b")),
    ("probe_not_called", 0, re.compile(r"NVRM: The NVIDIA probe routine was not called for \d+ device")),
    # nv.c refuses a client whose userspace driver is not the loaded module's version (an upgrade without a
    # reboot, a DKMS build that did not run): "API mismatch: the client has the version X, but this kernel
    # module has the version Y", since R560 "the client '<name>' (pid N) has the version ...". No Xid stands for
    # it (0): the GPUs are fine, but no CUDA, NVML or nvidia-smi client can use them until the versions agree.
    ("api_mismatch", 0, re.compile(r"NVRM: API mismatch: the client\b")),
    ("pci_region_invalid", 79, re.compile(r"NVRM: This PCI I/O region assigned to your NVIDIA device is invalid")),
    # Drivers before ~R390 print it without the GPU: "NVRM: RmInitAdapter failed! (0x26:0xffff:1375)". nv.c's
    # nv_start_device then says it again in its own words, the line a paste may keep alone: "NVRM: GPU 0000:3b:00.0:
    # rm_init_adapter failed, device minor number 0" (R515 on), "NVRM: rm_init_adapter failed for device bearing
    # minor number 0" (older drivers).
    ("rm_init_failed", 143, re.compile(
        r"NVRM: (?:GPU (?P<pci>[0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f.]+): )?"
        r"(?:RmInitAdapter failed!|rm_init_adapter failed(?:,| for) device)")),
    # On Hopper and later the FSP (the GPU's security processor) boots GSP; kern_fsp.c / kern_fsp_gh100.c say when
    # it did not answer or refused: "kfspPollForResponse_IMPL: FSP command timed out" (R535-R560; R570+
    # "kfspWaitForResponse: ..."), "FSP boot cmds failed. RM cannot boot.", "FSP secure boot partition timed out.",
    # "FSP response reported error. Task ID: ...". GSP then never starts (or, after a GPU was lost, can no longer be
    # reached): the GPU is unusable until reset, the failure Xid 120 reports at run time.
    ("gsp_init_failed", 120, re.compile(
        # osinit.c (R535 on) when the GSP firmware file of this driver version is missing: "RmFetchGspRmImages: No
        # firmware image found"; GSP cannot boot without it.
        r"NVRM: (?:GPU\d+ )?(?:RmInitAdapter: Cannot initialize GSP firmware RM"
        r"|RmFetchGspRmImages: No firmware image found"
        r"|_kgspBootGspRm: .*cannot proceed with booting GSP|kgspBootstrap\w*: .*reported an error"
        r"|_?kfsp\w*: (?:FSP command timed out|FSP boot cmds failed|FSP secure boot partition timed out"
        r"|FSP response reported error)"
        # Before GSP boots, the GPU's own firmware boot (GFW, the VBIOS's) must complete: kernel_gsp_tu102.c /
        # gpu_tu102.c "kgspWaitForGfwBootOk_TU102: failed to wait for GFW boot complete: 0x55 VBIOS version ...",
        # "gpuWaitForGfwBootComplete_TU102: failed to wait for GFW_BOOT: (progress 0x3)", followed by "(the GPU
        # may be in a bad state and may need to be reset)": GSP cannot boot on it either.
        r"|\w*WaitForGfwBoot\w*: failed to wait for GFW(?:_BOOT| boot complete))")),
    # The driver's Xid 119 banner (kernel_gsp.c's _kgspLogXid119: "********* GSP Timeout *********", then its
    # notes; the "NVRM: Xid (...): 119, Timeout ..." line follows): GSP stopped answering an RPC, even where the
    # paste stops before the Xid line.
    # rpc.c's callers then say the RPC got no answer: "_issueRpcAndWait: rpcRecvPoll timedout for fn 76!" (R515-R590;
    # R595 adds "sequence N"), printed at error level only for a real timeout: the same GSP timeout.
    ("gsp_timeout", 119, re.compile(r"NVRM: (?:GPU\d+ )?(?:_kgspLogXid119: |\w+: rpcRecvPoll timedout for fn \d+)")),
    # After more timeouts than the reset threshold kernel_gsp.c rate-limits its RPC error prints and says why (every
    # tag since 535): "NVRM: Rate limiting GSP RPC error prints for GPU at PCI:0000:c1:00 (printing 1 of every 30).
    # The GPU likely needs to be reset." The same timeout, on the GPU it names, the last line a long log may keep.
    ("gsp_timeout", 119, re.compile(
        r"NVRM: Rate limiting GSP RPC error prints for GPU at PCI:(?P<pci>[0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f.]+)")),
    # R595's RPC poll names which heartbeat stopped after the line above ("_kgspRpcRecvPoll: GSP RM heartbeat
    # timed out", "... LibOS heartbeat timed out"): the same timeout where a paste keeps only that line.
    ("gsp_heartbeat", 119, re.compile(r"NVRM: (?:GPU\d+ )?(?:_kgspIsHeartbeatTimedOut: Heartbeat timed out"
                                      r"|_kgspRpcRecvPoll: (?:GSP RM|LibOS) heartbeat timed out)")),
    # The GSP falcon's core dump (its TRACE/register lines): kernel_gsp.c dumps it only once GSP has stopped
    # answering, from the RPC-timeout and the periodic health-check paths alike, so a pasted dump without its
    # Xid 119 line still reports that timeout.
    ("gsp_core_dump", 119, re.compile(r"NVRM: (?:GPU\d+ )?kflcnCoreDump(?:Nondestructive|Destructive)\w*: ")),
    # NVLink discovery after receiver detection failed (H100/GB200 drivers): the link never came up, the
    # failure an NVLink Xid 74 reports when it happens at run time.
    ("nvlink_discovery_failed", 74, re.compile(
        r"NVRM: (?:GPU\d+ )?knvlinkDiscoverPostRxDetLinks_\w+: Getting peer\d+'?s? postRxDetLinkMask failed")),
    # The NVSwitch driver (linux_nvswitch.c, every tag 515-595) names a switch it could not bring up, or one it keeps
    # out of service, with its own prefix and no SXid: "nvidia-nvswitch3: Failed to initialize device : -5" (also
    # "... interrupt", "Failed during device post init", "Failed to enable PCI device", "Failed to map BAR0 region"),
    # "nvidia-nvswitch2: Blacklisted nvswitch device" (Fabric Manager excluded it after a fault). No Xid stands for
    # them (0): the switch carries no NVLink traffic, so the GPUs behind it cannot use the fabric as built.
    ("nvswitch_init_failed", 0, re.compile(
        r"nvidia-nvswitch\d+: ?(?:Failed (?:to (?:initialize (?:device|interrupt)|enable PCI device|map BAR0 region"
        r"|request memory regions)|during device post init) ?: -?\d+)")),
    ("nvswitch_blacklisted", 0, re.compile(r"nvidia-nvswitch\d+: Blacklisted nvswitch device")),
    ("power_cables", 54, re.compile(
        r"NVRM: GPU (?P<pci>[0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f.]+): GPU does not have the necessary power "
        r"cables connected")),
    # A call that returned NV_ERR_RESET_REQUIRED (the driver's own assertion lines, e.g. "nvAssertOkFailedNoLog:
    # Assertion failed: Reset required [NV_ERR_RESET_REQUIRED]"): the GPU refuses work until it is reset, the
    # state Xid 154 announces as "GPU Reset Required"; recent drivers print it without any Xid line.
    # nvidia-modeset and nvidia-drm quote the same status when a call into the GPU returned it ("nvidia-modeset:
    # ERROR: GPU:0: Failed to initialize display engine: 0x62 (Reset required [NV_ERR_RESET_REQUIRED])").
    ("reset_required", 154, re.compile(r"(?:NVRM|nvidia-modeset|nvidia-drm|\[drm\]).*\[NV_ERR_RESET_REQUIRED\]")),
    # The GPU no longer answers on the bus, said without an Xid line: every call into it fails with
    # NV_ERR_GPU_IS_LOST (status 0x0000000F, nvstatuscodes.h "GPU lost from the bus"). GSP-RM drivers print the
    # number in their RPC failures ("_issueRpcAndWait: rpcSendMessage failed with status 0x0000000f for fn 10
    # sequence 12303!", its "rpcRecvPoll failed with status 0x0000000f for fn ...", rpc.c in every tag since 525,
    # "rpcRmApiFree_GSP: GspRmFree failed: ...; status=0x0000000f"), the status text where a
    # check quotes it ("Check failed: GPU lost from the bus [NV_ERR_GPU_IS_LOST] (0x0000000F)", also from
    # nvidia-modeset/nvidia-drm), and an interrupt read that returned all ones says so in words
    # ("_intrServiceStallCommonCheckBegin: Failed GPU reg read : 0xffffffff. Check whether GPU is present on the
    # bus"). The state Xid 79 reports (open-gpu-kernel-modules#1080: a previous boot ending in these lines).
    ("gpu_lost", 79, re.compile(
        r"NVRM: (?:GPU\d+ )?(?:\w+: rpc(?:SendMessage|RecvPoll) failed with status 0x0*[fF]\b"
        r"|rpcRmApi\w*_GSP: GspRm\w* failed: .*\bstatus=0x0*[fF]\b"
        r"|\w+: Failed GPU reg read : 0xffffffff\. Check whether GPU is present on the bus)"
        r"|(?:NVRM|nvidia-modeset|nvidia-drm|\[drm\]).*\[NV_ERR_GPU_IS_LOST\]")),
)
# The statuses every NVIDIA kernel module quotes when the GPU refuses work until reset or is lost from the bus: a
# line holding one is read even where it is not the resource manager's (NVRM) own.
RESET_REQUIRED = "[NV_ERR_RESET_REQUIRED]"
GPU_IS_LOST = "[NV_ERR_GPU_IS_LOST]"
NVSWITCH = "nvidia-nvswitch"  # the NVSwitch driver's prefix: its SXid lines and its own failures
_MULTILINE_GPU = re.compile(r"NVRM: The NVIDIA GPU (?P<pci>[0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f.]+)\s*$")
_CAUSE = re.compile(r"caused by previous Xid (?P<xid>\d{1,6})\b", re.IGNORECASE)
_SELF_SEVERITY = re.compile(r"^[A-Z0-9_/]+\s+(?P<sev>Fatal|Nonfatal|Non-fatal)\b")
_RECOVERY = re.compile(r"recovery action changed from .*? to 0x[0-9A-Fa-f]+ \((?P<action>[^)]+)\)", re.IGNORECASE)
_SXID_CONTINUATION = re.compile(r"^(?:Severity \d+\b|Data \{)", re.IGNORECASE)
# An SXid that states no severity but says the switch powers itself off (therm_lr10.c / therm_ls10.c, every tag 515-595:
# "10006, TSENSE OVERT Threshold reached. Shutting Down", "PMGR OVERT ..."): its NVLinks are gone, a fatal one.
_SXID_SHUTDOWN = re.compile(r"\bOVERT Threshold reached\. Shutting Down")
_SXID = re.compile(r"nvidia-nvswitch\d*: SXid \((?:PCI:)?(?P<pci>[0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f.]+)\): "
                   r"(?P<sxid>\d{1,6}), (?P<rest>.*)$")


class KernelLineReader:
    """Every GPU failure a kernel-log line reports, read in log order (see :meth:`read`).

    An ``NVRM: Xid`` line is an event (and, when it says "caused by previous Xid N", the named
    Xid is one too, kind ``cause``); a driver message from :data:`DRIVER_MESSAGES` is an event of
    the Xid it stands for (kind ``nvrm:<id>``); an NVSwitch ``SXid`` line is an event of kind
    ``sxid`` (``sxid:fatal``/``sxid:nonfatal`` where the line says which). It keeps two pieces of
    state: the GPU a multi-line "fallen off the bus" notice named on its first line, and the SXids
    whose headline (``20034, Fatal, Link 30 ...``) it has read.

    The NVSwitch driver prints one SXid as a record of several lines: the headline with its
    severity, then ``Severity <n> Engine instance ...`` and ``Data {...}`` lines with the same SXid
    number and switch. Those continuation lines belong to the headline's event (they are not events
    of unknown severity): after a headline of that SXid on that switch they add nothing. A
    continuation line whose headline is not in the text (a pasted excerpt) stays an event of kind
    ``sxid``, judged as an SXid of unknown severity.
    """

    def __init__(self, *, boot_time: datetime | None = None, now: datetime | None = None,
                 zone: tzinfo = UTC) -> None:
        self.boot_time, self.now, self.zone = boot_time, now, zone
        self._pending_gpu: str | None = None
        self._sxid_headlines: set[tuple[str, int]] = set()

    def read(self, line: str) -> list[XidEvent | UnparsedXid]:
        bounded = line[:MAX_LINE]
        found = scan_xid_line(line, boot_time=self.boot_time, now=self.now, zone=self.zone)
        if isinstance(found, UnparsedXid):
            return [found]
        if found is not None:
            return self._xid(found)
        if ("NVRM" in bounded or RESET_REQUIRED in bounded or GPU_IS_LOST in bounded or NVSWITCH in bounded) and (
                driver := self._driver(line, bounded)):
            return driver
        if "SXid" in bounded and (m := _SXID.search(bounded)):
            return self._sxid(m, line)
        return []

    def _xid(self, event: XidEvent) -> list[XidEvent | UnparsedXid]:
        kind = event.kind
        if (m := _SELF_SEVERITY.match(event.message)) is not None:
            kind = "xid:nonfatal" if m.group("sev").lower().startswith("non") else "xid:fatal"
        elif (m := _RECOVERY.search(event.message)) is not None:
            kind = "xid:recovery=" + re.sub(r"[^a-z0-9]+", "_", m.group("action").strip().lower()).strip("_")
        out: list[XidEvent | UnparsedXid] = [replace(event, kind=kind) if kind != event.kind else event]
        if (cause := _CAUSE.search(event.message)) is not None:
            out.append(replace(event, xid=int(cause.group("xid")), kind="cause",
                               message=f"named as the cause of Xid {event.xid}: {event.message}"))
        return out

    def _driver(self, line: str, bounded: str) -> list[XidEvent | UnparsedXid]:
        if (m := _MULTILINE_GPU.search(bounded)) is not None:
            self._pending_gpu = m.group("pci")
            return []
        for name, xid, pattern in DRIVER_MESSAGES:
            if (m := pattern.search(bounded)) is None:
                continue
            pci = m.groupdict().get("pci") or (self._pending_gpu if name == "fallen_off_bus" else None)
            self._pending_gpu = None
            cut = bounded.find("NVRM")
            stamp = _safe_timestamp(bounded[: cut if cut >= 0 else m.start()], self.boot_time, self.now, self.zone)
            return [XidEvent(xid, pci, stamp, None, None, bounded[m.start():].strip()[:300], line, f"nvrm:{name}")]
        return []

    def _sxid(self, m: re.Match[str], line: str) -> list[XidEvent | UnparsedXid]:
        rest = m.group("rest").strip()
        head = rest.split(",", 1)[0].strip().lower().replace(" ", "")
        key = (m.group("pci").lower(), int(m.group("sxid")))
        if head in ("fatal", "non-fatal", "nonfatal"):
            kind = "sxid:fatal" if head == "fatal" else "sxid:nonfatal"
            self._sxid_headlines.add(key)
        elif _SXID_SHUTDOWN.search(rest):
            kind = "sxid:fatal"
        elif key in self._sxid_headlines and _SXID_CONTINUATION.match(rest):
            return []
        else:
            kind = "sxid"
        stamp = _safe_timestamp(line[: m.start()], self.boot_time, self.now, self.zone)
        return [XidEvent(int(m.group("sxid")), m.group("pci"), stamp, None, None, rest[:300], line, kind)]
