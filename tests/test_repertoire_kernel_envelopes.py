"""The envelopes around a kernel message, derived from the tools that print them (docs/repertoire/kernel-envelopes.md).

util-linux dmesg (-r, -d, -T -d, --time-format iso of v2.30-v2.31, caller ids, -J -x), systemd's journalctl -k output
modes (short-full, short-unix, short-delta, json, json-seq, json-pretty, export, verbose) and rsyslog's RFC 5424 file
template put different prefixes, or whole records, around the same kernel line. The fixtures
(tests/fixtures/repertoire/kernel-envelopes, provenance in its PROVENANCE.md) render one healthy log and the same log
ending in an Xid 79 under each: the healthy log is a kernel log that passes (it was exit 3 under most of them), the
Xid is judged as under plain dmesg, and where the envelope states a wall clock the Xid is dated by it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text, parse_as
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind
from gpu_preflight.parsers.dmesg import scan
from gpu_preflight.parsers.kernel_log import line_timestamp, parse_xid_events

FORMS = Path(__file__).parent / "fixtures" / "repertoire" / "kernel-envelopes"
XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus."
AT = datetime(2026, 12, 7, 12, 0, 0, 500000, tzinfo=UTC)  # the fixtures' Xid: 3600.5 s after a boot at 11:00 UTC
BOOT = AT - timedelta(seconds=3600.5)

ENVELOPES = ["dmesg-r", "dmesg-d", "dmesg-t-d", "dmesg-iso-v2.30", "dmesg-T-d", "dmesg-caller-id", "dmesg-J-x",
             "journalctl-short-full", "journalctl-short-unix", "journalctl-short-delta", "journalctl-json",
             "journalctl-json-seq", "journalctl-json-pretty", "journalctl-export", "journalctl-verbose",
             "journalctl-short-no-hostname", "rsyslog-rfc5424"]
# The envelopes that state a wall-clock time on the Xid's own line (the others state seconds since boot): there the
# Xid is dated, as under dmesg -T or --time-format iso.
DATED = {"dmesg-iso-v2.30", "dmesg-T-d", "journalctl-short-full", "journalctl-short-unix", "journalctl-json",
         "journalctl-json-seq", "rsyslog-rfc5424"}
# Multi-line journal records: the time is on the record's own earlier line (__REALTIME_TIMESTAMP, verbose's header),
# which the streamed log reader looks back for.
RECORDS = {"journalctl-json-pretty", "journalctl-export", "journalctl-verbose"}


def form(name: str) -> str:
    return (FORMS / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("envelope", ENVELOPES)
def test_a_healthy_kernel_log_under_each_envelope_is_a_kernel_log_that_passes(envelope: str) -> None:
    text = form(f"{envelope}-healthy.txt")
    assert detect_kind(text) == "dmesg"
    findings = judge_text(text, Config(), source="n1")
    assert findings and not [f for f in findings if f.status in (Status.FAIL, Status.WARN, Status.ERROR)]


@pytest.mark.parametrize("envelope", ENVELOPES)
def test_an_xid_79_under_each_envelope_fails_as_under_plain_dmesg(envelope: str) -> None:
    text = form(f"{envelope}-xid79.txt")
    assert detect_kind(text) == "dmesg"
    (f,) = [f for f in judge_text(text, Config(), source="n1") if f.check_id == "gpu.xid"]
    assert (f.code, f.status) == ("xid_79", Status.FAIL) and f.subject.endswith("pci:0000:3b:00")
    (event,) = parse_xid_events(text)
    stamp = event.timestamp and event.timestamp.replace(microsecond=0)  # dmesg -T and short-full print no fraction
    assert stamp == (AT.replace(microsecond=0) if envelope in DATED else None)
    (xid,) = parse_as("dmesg", text).xid_events  # the streamed reader judge uses
    assert (xid.timestamp or "")[:19] == ("2026-12-07T12:00:00" if envelope in DATED | RECORDS else "")


@pytest.mark.parametrize(("line", "expected"), [
    # dmesg -r (dmesg.c "<%d>[%5ld.%06ld] "): the priority in front of the uptime stamp
    (f"<3>[ 3600.500000] {XID79}", AT),
    # RFC 5424 (rsyslog RSYSLOG_SyslogProtocol23Format): priority, version 1, ISO stamp with offset
    (f"<3>1 2026-12-07T13:00:00.500000+01:00 gpu-node-7 kernel - - - {XID79}", AT),
    # RFC 3164 as a relay writes it with the priority kept: needs `now` for its year
    (f"<3>Dec  7 12:00:00 gpu-node-7 kernel: {XID79}", AT.replace(microsecond=0)),
    # dmesg -T -d (dmesg.c "[%s <%12.06f>] ")
    (f"[Mon Dec  7 12:00:00 2026 <    0.000123>] {XID79}", AT.replace(microsecond=0)),
    # journalctl -o short-full / with-unit (format_timestamp: "%a %Y-%m-%d %H:%M:%S %Z"), and a numeric zone
    (f"Mon 2026-12-07 12:00:00 UTC gpu-node-7 kernel: {XID79}", AT.replace(microsecond=0)),
    (f"Mon 2026-12-07 07:00:00.500000 -05:00 gpu-node-7 kernel: {XID79}", AT),
    # journalctl -o short-unix ("%10lu.%06lu")
    (f"1796644800.500000 gpu-node-7 kernel: {XID79}", AT),
])
def test_the_wall_clock_of_each_envelope_dates_the_xid(line: str, expected: datetime) -> None:
    (event,) = parse_xid_events(line, boot_time=BOOT, now=AT + timedelta(days=1))
    assert event.timestamp == expected


def test_a_named_local_zone_is_read_in_the_given_zone_as_dmesg_t_is() -> None:
    line = f"Mon 2026-12-07 13:00:00 CET gpu-node-7 kernel: {XID79}"
    assert parse_xid_events(line, local_tz=timezone(timedelta(hours=1)))[0].timestamp == AT.replace(microsecond=0)


def test_a_journal_json_entry_is_dated_past_its_long_cursor() -> None:
    """The log's last time (the Xid window's end) is read from the entry's __REALTIME_TIMESTAMP, which follows a
    __CURSOR of about 150 characters."""
    last = form("journalctl-json-xid79.txt").splitlines()[-1]
    assert last.index("__REALTIME_TIMESTAMP") > 96
    assert line_timestamp(last) == AT


def test_journalctl_k_run_without_access_to_the_system_journal_is_a_refused_read_not_an_unknown_text() -> None:
    """The hint and '-- No entries --' (the kernel's messages are in the system journal the user cannot read): as
    'No journal files were opened due to insufficient permissions', the kernel log could not be read (ERROR)."""
    text = form("journalctl-k-unprivileged.txt")
    assert detect_kind(text) == "dmesg"
    (f,) = judge_text(text, Config(), source="n1")
    assert (f.check_id, f.status) == ("gpu.xid", Status.ERROR) and "could not be read" in f.summary


def test_the_journal_hint_above_readable_kernel_lines_is_no_refusal() -> None:
    hint = form("journalctl-k-unprivileged.txt").split("-- No entries --")[0]
    findings = judge_text(hint + form("journalctl-short-full-healthy.txt"), Config(), source="n1")
    assert not [f for f in findings if f.status in (Status.FAIL, Status.WARN, Status.ERROR)]


def test_a_journal_record_cut_by_the_chunk_start_stays_undated() -> None:
    """The streamed reader looks back for the record's time only in the chunk holding its MESSAGE line: a record
    whose head is in the chunk before is undated (kept in every window), never given an earlier record's time."""
    text = form("journalctl-export-xid79.txt").encode()
    cut = text.rindex(b"__MONOTONIC_TIMESTAMP=")  # after the last record's __REALTIME_TIMESTAMP line
    (xid,) = scan([text[:cut], text[cut:]]).xid_events
    assert xid.timestamp is None
    (whole,) = scan([text]).xid_events
    assert whole.timestamp is not None and whole.timestamp.startswith("2026-12-07T12:00:00")


def test_dmesg_color_always_is_read_once_its_colours_are_removed() -> None:
    """dmesg --color=always colours the stamp, the subsystem prefix up to its ': ' ('NVRM: ') and an err-level message
    apart (dmesg.c print_record), which splits 'NVRM: Xid' with escape sequences; the paste reader removes them first,
    so the Xid is judged and dated as under dmesg -T, and the healthy log passes."""
    (f,) = [f for f in judge_text(form("dmesg-T-color-xid79.txt"), Config(), source="n1") if f.check_id == "gpu.xid"]
    assert (f.code, f.status) == ("xid_79", Status.FAIL) and "2026-12-07 12:00" in f.summary
    healthy = judge_text(form("dmesg-T-color-healthy.txt"), Config(), source="n1")
    assert healthy and not [f for f in healthy if f.status in (Status.FAIL, Status.WARN, Status.ERROR)]


def test_a_coloured_log_streamed_without_the_paste_reader_still_shows_its_xid() -> None:
    """--kernel-log FILE streams the saved log straight to the kernel-log reader (no paste reader): a coloured dmesg
    there read 'no Xid events' and passed a node whose GPU fell off the bus."""
    record = scan([form("dmesg-T-color-xid79.txt").encode()])
    (xid,) = record.xid_events
    assert (xid.xid, xid.pci_bus_id, xid.timestamp) == (79, "0000:3b:00", "2026-12-07T12:00:00+00:00")
    assert record.last_timestamp == "2026-12-07T12:00:00+00:00"
