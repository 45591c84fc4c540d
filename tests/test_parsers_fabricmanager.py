"""NVIDIA Fabric Manager's log (``/var/log/fabricmanager.log``), judged by ``nvswitch.fabric_manager`` (issue 27;
real logs in tests/fixtures/field/kernel, from leptonai/gpud's test data). The fabric manager reports every
NVSwitch error the switch driver raised with its severity (``detected NVSwitch non-fatal error 12028 on fid 0 on
NVSwitch pci bus id ... physical id 3 port 61``): judged as the kernel log's SXid lines are. Lines are built here
in its layout (``[Mon D YYYY HH:MM:SS] [LEVEL] [tid N] message``)."""

from __future__ import annotations

from pathlib import Path

from gpu_preflight.actions import DETAIL_KEY
from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text

EVIDENCE = Path(__file__).parent / "fixtures" / "evidence"
START = ("Fabric Manager Log initializing at: 12/19/2024 22:08:53.808\n"
         "[Dec 19 2024 22:08:53] [INFO] [tid 1570] Fabric Manager version 535.161.08 is running with the following "
         "configuration options\n"
         "[Dec 19 2024 22:08:54] [INFO] [tid 1570] detected system topology is based on DGX/HGX H100\n")


def line(stamp: str, level: str, message: str) -> str:
    return f"[Dec 19 2024 {stamp}] [{level}] [tid 1374] {message}\n"


def switch_error(stamp: str, severity: str, port: int) -> str:
    return line(stamp, "ERROR", f"detected NVSwitch {severity} error 12028 on fid 0 on NVSwitch pci bus id "
                                f"00000000:86:00.0 physical id 3 port {port}")


def verdicts(text: str) -> list[tuple[Status, str, str, object]]:
    return [(f.status, f.code, f.subject, f.details.get(DETAIL_KEY))
            for f in judge_text(text, Config(), source="n1") if f.check_id == "nvswitch.fabric_manager"]


def test_the_own_fixture_is_read_and_its_non_fatal_errors_warn() -> None:
    text = (EVIDENCE / "fabricmanager-log-hgx-h100-nonfatal-12028.txt").read_text()
    assert detect_kind(text) == "fabricmanager-log"
    _kind, record = parse_text(text, "fabricmanager-log")
    assert (record.starts, len(record.switch_errors), record.errors) == (1, 2, [])
    first = record.switch_errors[0]
    assert (first.sxid, first.switch, first.port, first.fatal) == (12028, "00000000:85:00.0", 19, False)
    assert verdicts(text) == [(Status.WARN, "nvswitch_nonfatal", "n1/00000000:85:00.0/sxid12028", "monitor")]


def test_a_fatal_nvswitch_error_fails_with_a_reboot() -> None:
    found = verdicts(START + switch_error("23:00:01", "fatal", 61))
    assert found == [(Status.FAIL, "nvswitch_fatal", "n1/00000000:86:00.0/sxid12028", "reboot_node")]


def test_errors_older_than_the_window_before_the_last_line_are_counted_not_judged() -> None:
    text = START + switch_error("19:17:49", "non-fatal", 34) + line("23:30:00", "INFO", "multicast group 0 is freed.")
    ((status, code, _subject, _action),) = verdicts(text)
    assert (status, code) == (Status.PASS, "ok")


def test_another_error_line_warns_and_a_fatal_one_fails() -> None:
    found = verdicts(START + line("22:09:10", "ERROR", "failed to register GPU with UUID GPU-0000 with the fabric")
                     + line("22:09:11", "FATAL", "fabric manager exiting due to an unrecoverable error"))
    assert {(s, c) for s, c, _, _ in found} == {(Status.WARN, "fm_error"), (Status.FAIL, "fm_fatal")}


def test_a_log_of_info_lines_passes() -> None:
    assert [(s, c) for s, c, _, _ in verdicts(START)] == [(Status.PASS, "ok")]


def test_text_without_its_log_lines_is_not_a_fabric_manager_log() -> None:
    assert detect_kind("Fabric Manager is great\n[INFO] nothing here\n") != "fabricmanager-log"
