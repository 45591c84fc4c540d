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

A failed read (``dmesg: read kernel buffer failed: Operation not permitted``) contains
no Xid lines either; :func:`kernel_log_denied` tells it apart from a clean log, so a
collector can say "cannot read kernel log" instead of "no Xid errors".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo

__all__ = ["XidEvent", "kernel_log_denied", "normalize_pci", "parse_xid_events"]


@dataclass(frozen=True)
class XidEvent:
    """One ``NVRM: Xid`` line: the Xid, the GPU it names and when it happened."""

    xid: int
    pci: str | None
    timestamp: datetime | None
    pid: int | None
    process: str | None
    message: str
    raw: str


_XID = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f]+:[0-9A-Fa-f]+(?::[0-9A-Fa-f.]+)?)\): "
                  r"(?P<xid>\d+)(?P<rest>.*)$")
_PID = re.compile(r"^pid=(?:'?<unknown>'?|(?P<pid>\d+))(?:,\s*|$)")
_NAME = re.compile(r"^name=(?P<name>[^,]*)(?:,\s*|$)")

_KMSG = re.compile(r"^\s*\d+,\d+,(?P<usec>\d+),[^;]*;\s*$")
_DECODE = re.compile(r"^\s*[a-z0-9]+\s*:\s*(?:emerg|alert|crit|err|warn|notice|info|debug)\s*:\s*")
_ISO = re.compile(r"^\s*(?P<date>\d{4}-\d{2}-\d{2})[T ](?P<time>\d{2}:\d{2}:\d{2})"
                  r"(?:[.,](?P<frac>\d+))?(?P<tz>Z|[+-]\d{2}:?\d{2})?")
_CTIME = re.compile(r"^\s*\[(?:[A-Z][a-z]{2}\s+)?(?P<mon>[A-Z][a-z]{2})\s+(?P<day>\d{1,2})\s+"
                    r"(?P<time>\d{2}:\d{2}:\d{2})\s+(?P<year>\d{4})\]")
_SYSLOG = re.compile(r"^\s*(?P<mon>[A-Z][a-z]{2})\s+(?P<day>\d{1,2})\s+(?P<time>\d{2}:\d{2}:\d{2})\s")
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
    return [event for line in text.splitlines() if (event := _parse_line(line, boot_time, now, zone))]


def kernel_log_denied(text: str) -> str | None:
    """The failure line when ``text`` is a refused read of the kernel log, else ``None``.

    An unprivileged ``dmesg`` (``kernel.dmesg_restrict=1``, a container without
    CAP_SYSLOG) prints this instead of the log; treating it as an empty log would report
    a node with Xid 79 as clean.
    """
    m = _DENIED.search(text)
    return m.group(0).strip() if m else None


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


def _require_aware(**values: datetime | None) -> None:
    for name, value in values.items():
        if value is not None and value.utcoffset() is None:
            raise ValueError(f"{name} must be timezone-aware, got {value!r}")


def _parse_line(line: str, boot_time: datetime | None, now: datetime | None,
                zone: tzinfo) -> XidEvent | None:
    m = _XID.search(line)
    if m is None:
        return None
    pid, process, message = _fields(m.group("rest"))
    return XidEvent(
        xid=int(m.group("xid")),
        pci=m.group("pci"),
        timestamp=_timestamp(line[: m.start()], boot_time, now, zone),
        pid=pid,
        process=process,
        message=message,
        raw=line,
    )


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
    if m is None or m.group("mon") not in _MONTHS:
        return None
    return _civil(int(m.group("year")), m.group("mon"), m.group("day"), m.group("time"), zone)


def _syslog(prefix: str, now: datetime | None, zone: tzinfo) -> datetime | None:
    """``Jan 21 02:21:33 host kernel:``: the year is now's, or last year's if that is ahead."""
    m = _SYSLOG.match(prefix)
    if m is None or m.group("mon") not in _MONTHS or now is None:
        return None
    local_now = now.astimezone(zone)
    stamp = _civil(local_now.year, m.group("mon"), m.group("day"), m.group("time"), zone)
    if stamp is not None and stamp > local_now + timedelta(days=1):
        stamp = _civil(local_now.year - 1, m.group("mon"), m.group("day"), m.group("time"), zone)
    return stamp


def _civil(year: int, month: str, day: str, clock: str, zone: tzinfo) -> datetime | None:
    hour, minute, second = (int(p) for p in clock.split(":"))
    try:
        return datetime(year, _MONTHS[month], int(day), hour, minute, second, tzinfo=zone)
    except ValueError:
        return None


_ABSOLUTE = (_iso, _ctime, _syslog)

