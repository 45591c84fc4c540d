"""gpu.xid end to end: kernel logs (corpus and inline) judged through the policy, mapped to GPUs."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpu_preflight import Status, run_checks
from gpu_preflight.config import ConfigError

from .conftest import H200_DUMP


def xid_findings(tmp_path: Path, log: str | Path, *extra: str, dump: dict | None = None) -> list:
    if isinstance(log, str):
        path = tmp_path / "dmesg.txt"
        path.write_text(log)
        log = path
    replay = H200_DUMP
    if dump is not None:
        replay = tmp_path / "dump.json"
        replay.write_text(json.dumps(dump))
    node = run_checks(replay=str(replay), kernel_log=str(log), include=["gpu.xid"], overrides=list(extra),
                      environ={})
    return [f for f in node.findings if f.check_id == "gpu.xid"]


def iso(minutes_ago: float) -> str:
    return (datetime.now(UTC) - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%S,000000+00:00")


def test_xid79_on_the_replayed_gpu_fails_and_names_it(tmp_path: Path) -> None:
    log = f"{iso(5)} NVRM: Xid (PCI:0000:00:06): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
    (f,) = xid_findings(tmp_path, log)
    assert f.status is Status.FAIL and f.code == "xid_79" and f.subject.endswith("/gpu0")
    assert f.recommendation and f.details["cause"] == "hardware"


def test_old_events_outside_the_window_are_left_out_and_counted(tmp_path: Path) -> None:
    log = (f"{iso(180)} NVRM: Xid (PCI:0000:00:06): 13, pid=1, name=x, Graphics Exception\n"
           f"{iso(170)} NVRM: Xid (PCI:0000:00:06): 79, pid=1, name=x, GPU has fallen off the bus.\n"
           f"{iso(60)} NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build\n"
           f"{iso(0)} kernel: eth0: link up\n")
    (f,) = xid_findings(tmp_path, log)
    assert f.status is Status.PASS and f.code == "ok"  # the driver reloaded after the Xid 79
    assert "2 older event(s) left out" in f.summary and f.details["events_outside_window"] == 2
    wide = xid_findings(tmp_path, log, "xid.window_hours=4")  # the Xid 13 shows too (an application fault: WARN)
    assert [(f.code, f.status) for f in wide] == [("xid_79", Status.FAIL), ("xid_13", Status.WARN)]
    assert wide[0].details["events_outside_window"] == 0


def test_a_fatal_xid_older_than_the_window_without_a_reset_still_warns_with_its_age(tmp_path: Path) -> None:
    log = (f"{iso(60)} NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build\n"
           f"{iso(180)} NVRM: Xid (PCI:0000:00:06): 13, pid=1, name=x, Graphics Exception\n"
           f"{iso(170)} NVRM: Xid (PCI:0000:00:06): 79, pid=1, name=x, GPU has fallen off the bus.\n"
           f"{iso(0)} kernel: eth0: link up\n")
    (f,) = xid_findings(tmp_path, log)  # the reload is logged before the Xid: it does not cover it
    assert (f.status, f.code, f.subject.rsplit("/", 1)[1]) == (Status.WARN, "xid_79_before_window", "gpu0")
    assert "2.8 h before the end of the 2 h up to" in f.summary and "no driver load, boot" in f.summary
    assert f.details["before_window"] is True and f.details["age_hours"] == 2.8
    assert f.details["operator_action"] == "reboot_node" and f.details["events_outside_window"] == 2


def test_application_xid_warns_from_the_first(tmp_path: Path) -> None:
    line = "{ts} NVRM: Xid (PCI:0000:00:06): 13, pid=7, name=pt_main_thread, Graphics Exception\n"
    (once,) = xid_findings(tmp_path, line.format(ts=iso(1)))
    assert once.status is Status.WARN  # the job on that GPU died: worth a look, not a fault of the node
    burst = "".join(line.format(ts=iso(1 + i)) for i in range(5))
    (f,) = xid_findings(tmp_path, burst)
    assert f.status is Status.WARN and f.observed == 5


def test_severity_override_and_bad_override(tmp_path: Path) -> None:
    log = f"{iso(1)} NVRM: Xid (PCI:0000:00:06): 79, pid=1, name=x, GPU has fallen off the bus.\n"
    assert xid_findings(tmp_path, log, 'xid.severity_overrides={"79" = "warn"}')[0].status is Status.WARN
    with pytest.raises(ConfigError):
        xid_findings(tmp_path, log, 'xid.severity_overrides={"79" = "panic"}')


def test_a_saved_log_of_a_denied_read_is_an_error_with_the_reason(tmp_path: Path, corpus: Path) -> None:
    """The user named a saved log that only records dmesg being refused: nothing was seen, so ERROR."""
    (f,) = xid_findings(tmp_path, corpus / "kernel-xid" / "hcdeep-dmesg-permission-denied-gke.txt")
    assert f.status is Status.ERROR and f.code == "saved_log_unreadable" and "Operation not permitted" in f.summary


def test_replay_without_kernel_log_skips() -> None:
    node = run_checks(replay=str(H200_DUMP), include=["gpu.xid"], environ={})
    (f,) = node.findings
    assert f.status is Status.SKIP and "--kernel-log" in f.summary


def test_corpus_burst_is_grouped_per_xid(tmp_path: Path, corpus: Path) -> None:
    findings = xid_findings(tmp_path, corpus / "kernel-xid" / "gpud-dmesg-decode-iso-xid13-xid43-burst.log",
                            "xid.window_hours=1000000")
    by_code = {f.code: f for f in findings}
    assert by_code["xid_13"].observed == 629 and by_code["xid_43"].observed == 7
    assert all(f.subject.endswith("pci:0000:38:00") for f in findings)  # not a GPU of the replayed node


def test_live_kernel_log_on_this_machine() -> None:
    node = run_checks(include=["gpu.xid"], environ={})
    (f,) = node.findings
    assert f.status is Status.SKIP  # no GPU here: nothing to judge, and never a PASS
    assert "cannot read kernel log" in f.summary or "no GPU to judge" in f.summary


def test_no_gpu_and_no_xid_is_skip_but_xids_still_reported(tmp_path: Path) -> None:
    clean = tmp_path / "clean.txt"
    clean.write_text("[    0.000000] Linux version 6.1\n")
    node = run_checks(kernel_log=str(clean), include=["gpu.xid"], environ={})
    assert [f.status for f in node.findings] == [Status.SKIP]
    bad = tmp_path / "bad.txt"
    bad.write_text(f"{iso(1)} NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n")
    node = run_checks(kernel_log=str(bad), include=["gpu.xid"], environ={})
    assert [f.status for f in node.findings] == [Status.FAIL]
