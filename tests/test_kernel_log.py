"""Kernel-log parsing (every prefix style, the shared corpus) and the kernel-log backend."""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.backends import kernel_log as backend
from gpu_preflight.parsers.kernel_log import kernel_log_denied, normalize_pci, parse_xid_events

XID_DIR = "kernel-xid"
BURST = "gpud-dmesg-decode-iso-xid13-xid43-burst.log"
BOOT = datetime(2025, 1, 21, 0, 0, 0, tzinfo=UTC)
XID79_OLD = "NVRM: Xid (0000:03:00): 79, GPU has fallen off the bus."
XID13 = ("NVRM: Xid (PCI:0000:38:00): 13, pid=2924364, name=pt_main_thread, "
         "Graphics SM Warp Exception on (GPC 8, TPC 5, SM 0): Out Of Range Address")


def read_corpus(corpus: Path, name: str) -> str:
    return (corpus / XID_DIR / name).read_text(encoding="utf-8")


def only(text: str, **kwargs: Any) -> tuple[int, datetime | None]:
    """The (xid, timestamp) of the single event in ``text``."""
    events = parse_xid_events(text, **kwargs)
    assert len(events) == 1, events
    return events[0].xid, events[0].timestamp


# --- the shared corpus -------------------------------------------------------------------


def test_burst_counts_pci_and_time_span(corpus: Path) -> None:
    events = parse_xid_events(read_corpus(corpus, BURST))
    assert len(events) == 636
    assert sum(e.xid == 13 for e in events) == 629
    assert sum(e.xid == 43 for e in events) == 7
    assert {e.pci for e in events} == {"0000:38:00"}
    stamps = [e.timestamp for e in events]
    assert all(t is not None and t.utcoffset() == timedelta(0) for t in stamps)
    dated = [t for t in stamps if t is not None]
    assert min(dated) == datetime(2025, 1, 21, 2, 21, 33, 498559, tzinfo=UTC)
    assert max(dated) == datetime(2025, 1, 21, 4, 41, 44, 287197, tzinfo=UTC)


def test_burst_fields_of_unknown_pid_and_of_last_line_without_newline(corpus: Path) -> None:
    text = read_corpus(corpus, BURST)
    assert not text.endswith("\n")
    events = parse_xid_events(text)
    first, last = events[0], events[-1]
    assert (first.xid, first.pid, first.process) == (13, None, None)
    assert first.message == "Graphics SM Warp Exception on (GPC 8, TPC 5, SM 0): Out Of Range Address"
    assert (last.xid, last.pid, last.process, last.message) == (43, 2924364, "pt_main_thread", "Ch 00000008")
    assert last.raw == text.splitlines()[-1]
    assert kernel_log_denied(text) is None


def test_permission_denied_capture_is_a_denial_not_an_empty_log(corpus: Path) -> None:
    text = read_corpus(corpus, "hcdeep-dmesg-permission-denied-gke.txt")
    assert kernel_log_denied(text) == "dmesg: read kernel buffer failed: Operation not permitted"
    assert parse_xid_events(text) == []


def test_bare_xid63_line(corpus: Path) -> None:
    (event,) = parse_xid_events(read_corpus(corpus, "stas00-xid63-row-remapper.log"), boot_time=BOOT)
    assert (event.xid, event.pci, event.pid, event.process, event.timestamp) == (63, "0000:10:1c", 1896, None, None)
    assert event.message == "Row Remapper: New row marked for remapping, reset gpu to activate."
    assert normalize_pci(event.pci or "") == "0000:10:1c"


def test_nccl_segfault_log_has_no_xid(corpus: Path) -> None:
    text = read_corpus(corpus, "gpud-dmesg-libnccl-segfault.log")
    assert "segfault" in text
    assert parse_xid_events(text) == []
    assert kernel_log_denied(text) is None


# --- prefix styles -------------------------------------------------------------------------


@pytest.mark.parametrize(("line", "expected"), [
    (f"2025-01-21T02:21:33,498559+00:00 {XID13}", datetime(2025, 1, 21, 2, 21, 33, 498559, tzinfo=UTC)),
    (f"kern  :warn  : 2025-01-21T02:21:33,498559+00:00 {XID13}",
     datetime(2025, 1, 21, 2, 21, 33, 498559, tzinfo=UTC)),
    (f"2025-01-21T03:21:33,000001+01:00 {XID13}", datetime(2025, 1, 21, 2, 21, 33, 1, tzinfo=UTC)),
    (f"2025-01-21T02:21:33+0000 gpu-node-7 kernel: {XID13}", datetime(2025, 1, 21, 2, 21, 33, tzinfo=UTC)),
    (f"2025-01-20T21:21:33.250000-05:00 gpu-node-7 kernel: {XID13}",
     datetime(2025, 1, 21, 2, 21, 33, 250000, tzinfo=UTC)),
    (f"2025-01-21T02:21:33Z gpu-node-7 kernel: [ 8493.5] {XID13}", datetime(2025, 1, 21, 2, 21, 33, tzinfo=UTC)),
    (f"[Tue Jan 21 02:21:33 2025] {XID13}", datetime(2025, 1, 21, 2, 21, 33, tzinfo=UTC)),
    (f"[Sun Feb  2 16:24:18 2025] {XID13}", datetime(2025, 2, 2, 16, 24, 18, tzinfo=UTC)),
    (f"[ 8493.250000] {XID13}", BOOT + timedelta(seconds=8493.25)),
    (f"6,1234,8493250000,-;{XID13}", BOOT + timedelta(seconds=8493.25)),
    (f"4,99,17,c;{XID79_OLD}", BOOT + timedelta(microseconds=17)),
    (XID13, None),
])
def test_timestamp_of_each_prefix_style(line: str, expected: datetime | None) -> None:
    (event,) = parse_xid_events(line, boot_time=BOOT)
    assert event.timestamp == expected
    assert event.timestamp is None or event.timestamp.tzinfo is UTC


def test_boot_relative_stamps_without_boot_time_stay_undated() -> None:
    text = f"[ 8493.250000] {XID13}\n6,1234,8493250000,-;{XID13}\n"
    assert [e.timestamp for e in parse_xid_events(text)] == [None, None]


def test_local_time_formats_use_the_given_zone() -> None:
    cest = timezone(timedelta(hours=2))
    assert only(f"[Tue Jan 21 04:21:33 2025] {XID13}", local_tz=cest)[1] == datetime(2025, 1, 21, 2, 21, 33,
                                                                                        tzinfo=UTC)


def test_syslog_year_comes_from_now_and_rolls_back_over_new_year() -> None:
    line = f"Dec 31 23:59:58 gpu-node-7 kernel: [ 12.5] {XID13}"
    assert only(line, now=datetime(2024, 12, 31, 23, 59, 59, tzinfo=UTC))[1] == datetime(
        2024, 12, 31, 23, 59, 58, tzinfo=UTC)
    assert only(line, now=datetime(2025, 1, 1, 0, 5, tzinfo=UTC))[1] == datetime(2024, 12, 31, 23, 59, 58, tzinfo=UTC)
    assert only(f"Jan  5 01:02:03 host kernel: {XID13}", now=datetime(2025, 1, 5, 2, tzinfo=UTC))[1] == datetime(
        2025, 1, 5, 1, 2, 3, tzinfo=UTC)


def test_syslog_without_now_has_no_year_so_no_timestamp_but_falls_back_to_boot_stamp() -> None:
    line = f"Jan 21 02:21:33 gpu-node-7 kernel: [ 60.0] {XID13}"
    assert only(line)[1] is None
    assert only(line, boot_time=BOOT)[1] == BOOT + timedelta(seconds=60)


# --- Xid line forms ---------------------------------------------------------------------------


def test_old_form_without_pci_prefix_and_without_pid() -> None:
    (event,) = parse_xid_events(f"[  269.517039] {XID79_OLD}")
    assert (event.xid, event.pci, event.pid, event.process) == (79, "0000:03:00", None, None)
    assert event.message == "GPU has fallen off the bus."


def test_pid_and_name_forms() -> None:
    text = "\n".join([
        "NVRM: Xid (PCI:0000:38:00): 43, pid=2815167, name=pt_main_thread, Ch 00000008",
        "NVRM: Xid (PCI:0000:9B:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception: ESR 0x1=0x2",
        "NVRM: Xid (PCI:0000:9b:00): 119, pid=512, name=nvidia-smi, Timeout after 6s of waiting for RPC",
        "NVRM: Xid (PCI:0000:9b:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
    ])
    got = [(e.xid, e.pci, e.pid, e.process, e.message) for e in parse_xid_events(text)]
    assert got == [
        (43, "0000:38:00", 2815167, "pt_main_thread", "Ch 00000008"),
        (13, "0000:9B:00", None, None, "Graphics Exception: ESR 0x1=0x2"),
        (119, "0000:9b:00", 512, "nvidia-smi", "Timeout after 6s of waiting for RPC"),
        (154, "0000:9b:00", None, None, "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"),
    ]


def test_non_xid_lines_crlf_and_kmsg_continuations_are_skipped() -> None:
    text = (
        "NVRM: GPU at PCI:0000:38:00: GPU-4a1b2c3d-0000-1111-2222-333344445555\r\n"
        "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 30 LTSSM Fault Up\r\n"
        f"6,1235,8493250001,-;{XID79_OLD}\r\n"
        " SUBSYSTEM=pci\r\n"
        "pt_main_thread[2536443]: segfault at 7f797fe00000 ip 00007f7c7ac69996 error 4 in libnccl.so.2\r\n"
    )
    events = parse_xid_events(text, boot_time=BOOT)
    assert [(e.xid, e.message) for e in events] == [(79, "GPU has fallen off the bus.")]
    assert not events[0].raw.endswith("\r")


def test_naive_times_are_refused() -> None:
    with pytest.raises(ValueError, match="boot_time must be timezone-aware"):
        parse_xid_events(XID13, boot_time=datetime(2025, 1, 21))
    with pytest.raises(ValueError, match="now must be timezone-aware"):
        parse_xid_events(XID13, now=datetime(2025, 1, 21))


@pytest.mark.parametrize(("raw", "expected"), [
    ("0000:38:00", "0000:38:00"),
    ("00000000:38:00.0", "0000:38:00"),
    ("PCI:0000:9B:00", "0000:9b:00"),
    ("0000:10:1c", "0000:10:1c"),
    ("38:00.0", "0000:38:00"),
    ("00010000:c1:00.0", "10000:c1:00"),
])
def test_normalize_pci(raw: str, expected: str) -> None:
    assert normalize_pci(raw) == expected


@pytest.mark.parametrize("raw", ["", "gpu0", "0000:zz:00", "1:2:3:4"])
def test_normalize_pci_rejects_garbage(raw: str) -> None:
    with pytest.raises(ValueError, match="not a PCI address"):
        normalize_pci(raw)


@pytest.mark.parametrize("text", [
    "dmesg: read kernel buffer failed: Permission denied",
    "dmesg: klogctl failed: Operation not permitted\n",
    "No journal files were opened due to insufficient permissions.",
    "cat: /dev/kmsg: Operation not permitted",
])
def test_denial_variants(text: str) -> None:
    assert kernel_log_denied(text) == text.strip()


def test_log_that_mentions_permissions_is_not_a_denial() -> None:
    text = "[ 1.0] audit: Operation not permitted for pid 7\n[ 2.0] NVRM: loading NVIDIA UNIX driver\n"
    assert kernel_log_denied(text) is None


# --- backend ---------------------------------------------------------------------------------


def fake_tool(tmp_path: Path, name: str, script: str) -> tuple[str, ...]:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return (str(path),)


@pytest.fixture
def no_sources(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every kernel-log source missing, so each test switches on only the ones it needs."""
    monkeypatch.setattr(backend, "DMESG_ARGV", (str(tmp_path / "no-dmesg"),))
    monkeypatch.setattr(backend, "KMSG_PATH", str(tmp_path / "no-kmsg"))
    monkeypatch.setattr(backend, "JOURNALCTL_ARGV", (str(tmp_path / "no-journalctl"),))


def test_read_kernel_log_on_this_machine() -> None:
    log = backend.read_kernel_log()
    assert log.source in ("dmesg", "/dev/kmsg", "journalctl")
    assert log.text.strip()
    assert kernel_log_denied(log.text) is None
    assert log.boot_time is not None and log.boot_time < datetime.now(UTC)


@pytest.mark.skipif(not os.access("/dev/kmsg", os.R_OK), reason="/dev/kmsg not readable here")
def test_kmsg_is_read_first_record_by_record(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No dmesg process where the device can be read: a dmesg that would fail is never run."""
    monkeypatch.setattr(backend, "DMESG_ARGV", fake_tool(tmp_path, "dmesg", "echo ran > ran\nexit 1\n"))
    log = backend.read_kernel_log()
    assert log.source == "/dev/kmsg"
    assert log.failures == ()
    assert not (tmp_path / "ran").exists() and not Path("ran").exists()
    records = log.text.splitlines()
    assert records[0].split(";", 1)[0].count(",") >= 3


def test_kmsg_linked_to_an_empty_device_falls_through_to_dmesg(no_sources: None, monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    """Some container runtimes point /dev/kmsg at /dev/null: an empty read is a failure, not a clean log."""
    monkeypatch.setattr(backend, "KMSG_PATH", os.devnull)
    monkeypatch.setattr(backend, "DMESG_ARGV", fake_tool(tmp_path, "dmesg", f"echo '[  5.0] {XID13}'\n"))
    log = backend.read_kernel_log()
    assert log.source == "dmesg"
    assert log.failures == (f"{os.devnull}: no kernel messages",)
    assert [e.xid for e in parse_xid_events(log.text)] == [13]


def test_all_sources_failing_names_each_reason(no_sources: None) -> None:
    with pytest.raises(backend.KernelLogUnavailable) as info:
        backend.read_kernel_log()
    assert info.value.failures == (f"{backend.KMSG_PATH}: not present", "dmesg: not installed",
                                   "journalctl: not installed")
    assert str(info.value) == "; ".join(info.value.failures)


def test_denied_dmesg_falls_through_to_journal(no_sources: None, monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    monkeypatch.setattr(backend, "DMESG_ARGV", fake_tool(
        tmp_path, "dmesg", "echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2\nexit 1\n"))
    monkeypatch.setattr(backend, "JOURNALCTL_ARGV", fake_tool(
        tmp_path, "journalctl", f"echo '2025-01-21T02:21:33+0000 node kernel: {XID79_OLD}'\n"))
    log = backend.read_kernel_log()
    assert log.source == "journalctl"
    assert log.failures[1] == "dmesg: read kernel buffer failed: Operation not permitted"
    assert [e.xid for e in parse_xid_events(log.text)] == [79]


def test_denial_on_stdout_with_status_zero_still_fails(no_sources: None, monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    monkeypatch.setattr(backend, "DMESG_ARGV", fake_tool(
        tmp_path, "dmesg", "echo 'dmesg: read kernel buffer failed: Operation not permitted'\n"))
    with pytest.raises(backend.KernelLogUnavailable, match=r"; dmesg: read kernel buffer failed: Operation not"):
        backend.read_kernel_log()


@pytest.mark.parametrize(("script", "reason"), [
    ("echo 'boom' >&2\nexit 3\n", "dmesg: exit status 3: boom"),
    ("exit 0\n", "dmesg: no kernel messages"),
    ("sleep 5\n", "dmesg: timed out after 0.3 s"),
])
def test_dmesg_failures(no_sources: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                        script: str, reason: str) -> None:
    monkeypatch.setattr(backend, "DMESG_ARGV", fake_tool(tmp_path, "dmesg", script))
    with pytest.raises(backend.KernelLogUnavailable) as info:
        backend.read_kernel_log(timeout_s=0.3)
    assert info.value.failures[1] == reason


def test_kmsg_format_file_is_read_and_dated_by_boot_time(no_sources: None, monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    kmsg = tmp_path / "kmsg"
    kmsg.write_bytes(b"6,1,100,-;Linux version 6.8\n" + f"4,2,8493250000,-;{XID13}\n".encode() * 3000)
    monkeypatch.setattr(backend, "KMSG_PATH", str(kmsg))
    log = backend.read_kernel_log()
    assert log.source == str(kmsg)
    events = parse_xid_events(log.text, boot_time=log.boot_time)
    assert len(events) == 3000
    assert log.boot_time is not None and events[0].timestamp == log.boot_time + timedelta(seconds=8493.25)


def test_unreadable_kmsg_reports_the_os_reason(no_sources: None, monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    monkeypatch.setattr(backend, "KMSG_PATH", str(tmp_path))
    with pytest.raises(backend.KernelLogUnavailable) as info:
        backend.read_kernel_log()
    assert info.value.failures[0] == f"{tmp_path}: Is a directory"


def test_read_kernel_log_file(corpus: Path) -> None:
    log = backend.read_kernel_log_file(corpus / XID_DIR / BURST)
    assert log.source == f"file:{corpus / XID_DIR / BURST}"
    assert (log.boot_time, len(parse_xid_events(log.text))) == (None, 636)


def test_read_kernel_log_file_refuses_saved_denial_and_missing_file(corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(backend.KernelLogUnavailable, match="Operation not permitted"):
        backend.read_kernel_log_file(corpus / XID_DIR / "hcdeep-dmesg-permission-denied-gke.txt")
    with pytest.raises(backend.KernelLogUnavailable, match="No such file"):
        backend.read_kernel_log_file(tmp_path / "missing.log")
    with pytest.raises(backend.KernelLogFileError, match="No such file"):
        backend.SavedKernelLog(tmp_path / "missing.log")


def test_boot_time_from_btime_then_uptime_then_unknown(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text("cpu  1 2 3\nbtime 1737417600\nprocesses 5\n")
    assert backend.read_boot_time(tmp_path) == datetime(2025, 1, 21, tzinfo=UTC)
    (tmp_path / "stat").write_text("cpu  1 2 3\n")
    (tmp_path / "uptime").write_text("3600.00 7000.00\n")
    booted = backend.read_boot_time(tmp_path)
    assert booted is not None
    assert abs((datetime.now(UTC) - timedelta(hours=1) - booted).total_seconds()) < 5
    (tmp_path / "uptime").unlink()
    assert backend.read_boot_time(tmp_path) is None
