"""Report formats rendered from the canonical dict: console (plain and rich), markdown, JUnit."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gpu_preflight import build_report, run_checks
from gpu_preflight.findings.canonical import TEST_GROUPS, report_groups, result_line, verdict_of
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.model import CheckResult, Finding, NodeReport, Status, verdict
from gpu_preflight.report import render, write_report
from gpu_preflight.report.console import render_console

from .conftest import H200_DUMP


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def faulty_report(tmp_path: Path) -> dict:
    dump = json.loads(H200_DUMP.read_text())
    dump["devices"][0]["nvmlDeviceGetCurrentClocksEventReasons"] = {"ok": 8}
    dump["devices"][0]["nvmlDeviceGetTemperature"] = {"ok": 86}
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(dump))
    return build_report([run_checks(replay=str(path), include=["gpu.*"], environ={})])


def test_console_plain_and_rich_end_with_result(tmp_path: Path) -> None:
    report = faulty_report(tmp_path)
    plain, rich = io.StringIO(), Tty()
    render_console(ClusterReport.of(report), plain)
    render_console(ClusterReport.of(report), rich)
    for text in (plain.getvalue(), rich.getvalue()):
        assert text.rstrip().splitlines()[-1] == "[RESULT] FAILURE: [gpu.clocks]"
    assert "hw slowdown active" in plain.getvalue()
    assert "\x1b[1;31mFAIL\x1b[0m" in rich.getvalue()  # coloured by rich (the layout: tests/test_console.py)


def test_summary_groups_issues_and_recommendations(tmp_path: Path) -> None:
    report = faulty_report(tmp_path)
    summary = report["cluster_summary"]
    assert summary["overall_status"] == "FAIL" and summary["exit_code"] == 2
    assert summary["test_results"]["gpu_health"] is False and summary["test_results"]["gpu_links"] is True
    assert summary["test_results"]["system_resources"] is False  # not run: not the same as passed, and says so
    assert summary["test_results_notes"]["system_resources"].startswith("not tested: ")
    assert summary["issues"][0].startswith("[FAIL]")
    assert any("cooling" in r for r in summary["recommendations"])
    assert "Cluster is ready for distributed training" not in summary["recommendations"]


def test_markdown_and_junit(tmp_path: Path) -> None:
    report = faulty_report(tmp_path)
    md = render(report, "md")
    assert "| FAIL | gpu.clocks |" in md and "[RESULT] FAILURE: [gpu.clocks]" in md
    root = ET.fromstring(render(report, "junit"))
    failures = root.findall(".//failure")
    assert [f.get("type") for f in failures] == ["hw_slowdown"]
    assert int(root.get("failures", "0")) == 1 and int(root.get("skipped", "0")) >= 1
    warn_out = [e.text for e in root.findall(".//system-out") if e.text and e.text.startswith("WARN")]
    assert warn_out and "86" in warn_out[0]


def test_write_report_keeps_raw_outputs_beside_it(tmp_path: Path) -> None:
    node = run_checks(replay=str(H200_DUMP), include=["gpu.*"], environ={})
    node.raw_artifacts["demo"] = ("demo.txt", "raw tool output\n")
    report = build_report([node])
    path = write_report(report, [node], tmp_path / "out")
    saved = json.loads(path.read_text())
    (art,) = saved["artifacts"]
    assert (path.parent / art["path"]).read_text() == "raw tool output\n"
    assert art["bytes"] == 16 and len(art["sha256"]) == 64
    assert "raw tool output" not in path.read_text()


def test_result_line_success() -> None:
    report = build_report([run_checks(replay=str(H200_DUMP), include=["gpu.*"], environ={})])
    assert result_line(ClusterReport.of(report)) == "[RESULT] SUCCESS"


# --------------------------------------------------------------------------- one verdict everywhere


def node(*findings: tuple[str, Status], host: str = "vm", summary: str = "{cid} is {status}") -> NodeReport:
    results = [CheckResult(cid, cid, [Finding(cid, status, f"{host}/gpu0", "test",
                                              summary.format(cid=cid, status=status.value))], 0.0)
               for cid, status in findings]
    return NodeReport(host, "2026-01-01T00:00:00+00:00", results)


@pytest.mark.parametrize(("statuses", "expected"), [
    ([], Status.ERROR), ([Status.SKIP, Status.SKIP], Status.ERROR), ([Status.PASS, Status.SKIP], Status.PASS),
    ([Status.PASS], Status.PASS), ([Status.SKIP, Status.WARN], Status.WARN),
    ([Status.WARN, Status.ERROR], Status.ERROR), ([Status.ERROR, Status.FAIL, Status.PASS], Status.FAIL),
])
def test_run_verdict_and_nothing_judged_is_error(statuses: list[Status], expected: Status) -> None:
    assert verdict(statuses) is expected


@pytest.mark.parametrize(("findings", "fail_on", "line", "code"), [
    ((("gpu.ecc.errors", Status.PASS), ("gpu.xid", Status.SKIP)), "fail", "[RESULT] SUCCESS", 0),
    ((("gpu.thermal", Status.WARN), ("gpu.power", Status.WARN), ("gpu.ecc.errors", Status.PASS)), "fail",
     "[RESULT] WARNING: [gpu.power, gpu.thermal]", 1),
    ((("gpu.thermal", Status.WARN), ("gpu.ecc.errors", Status.PASS)), "warn", "[RESULT] FAILURE: [gpu.thermal]", 2),
    ((("gpu.thermal", Status.WARN), ("gpu.pcie", Status.FAIL)), "fail", "[RESULT] FAILURE: [gpu.pcie]", 2),
    ((("gpu.thermal", Status.WARN), ("gpu.pcie", Status.FAIL)), "warn",
     "[RESULT] FAILURE: [gpu.pcie, gpu.thermal]", 2),
    ((("gpu.nvml", Status.ERROR), ("gpu.pcie", Status.FAIL)), "fail", "[RESULT] FAILURE: [gpu.pcie]; ERROR: [gpu.nvml]",
     2),
    ((("gpu.nvml", Status.ERROR), ("gpu.thermal", Status.WARN)), "fail", "[RESULT] ERROR: [gpu.nvml]", 3),
    ((("gpu.xid", Status.SKIP),), "fail", "[RESULT] ERROR: [run.coverage]", 3),
    ((), "fail", "[RESULT] ERROR: [run.coverage]", 3),
])
def test_result_line_and_exit_code_never_disagree(findings: tuple[tuple[str, Status], ...], fail_on: str, line: str,
                                                  code: int) -> None:
    n = node(*findings)
    n.fail_on = fail_on
    report = build_report([n])
    assert result_line(ClusterReport.of(report)) == line
    assert report["cluster_summary"]["exit_code"] == code == n.exit_code
    v = verdict_of(ClusterReport.of(report))
    assert (v.exit_code, v.line, v.status.value) == (code, line, report["cluster_summary"]["overall_status"])
    stream = io.StringIO()
    render_console(ClusterReport.of(report), stream)
    assert stream.getvalue().splitlines()[-1] == line
    assert stream.getvalue().startswith(f"gpu-preflight: {v.status.value}")


def test_nothing_judged_says_why_in_one_line() -> None:
    empty = build_report([node()])
    (f,) = empty["findings"]
    assert (f["check_id"], f["status"], f["code"]) == ("run.coverage", "ERROR", "nothing_judged")
    assert f["summary"] == "no check was run: the selection left no check to run (--check/--skip)"
    skipped = build_report([node(("gpu.xid", Status.SKIP))])
    assert skipped["findings"][-1]["summary"].startswith("no check was run: every check that ran was skipped")
    assert skipped["cluster_summary"]["issues"][0].startswith("[ERROR] cluster run.coverage: no check was run")
    assert "Cluster is ready for distributed training" not in skipped["cluster_summary"]["recommendations"]


def test_group_with_only_warnings_reads_warn_in_markdown_and_false_in_json() -> None:
    report = build_report([node(("gpu.thermal", Status.WARN), ("gpu.pcie", Status.PASS),
                                ("gpu.ecc.errors", Status.ERROR), ("system.shm", Status.SKIP))])
    assert report_groups(ClusterReport.of(report)) == {**dict.fromkeys(TEST_GROUPS), "gpu_health": Status.ERROR,
                                                  "gpu_links": Status.PASS}
    report = build_report([node(("gpu.thermal", Status.WARN), ("gpu.pcie", Status.PASS), ("system.shm", Status.SKIP))])
    md = render(report, "md")
    assert "| gpu_health | WARN |" in md and "| gpu_links | PASS |" in md
    assert "| system_resources | not tested |" in md and "FAIL" not in md.split("## Findings")[0]
    results = report["cluster_summary"]["test_results"]
    assert (results["gpu_health"], results["gpu_links"], results["system_resources"]) == (False, True, False)


LOG_LINE = ("\x1b[31mNVRM: Xid (PCI:0000:07:00): 79,\x1b[0m fell off the bus\x01\x0b <img src=x onerror=alert(1)> "
            "[click](http://evil) *bold* | pipe")


def test_markdown_escapes_log_text() -> None:
    md = render(build_report([node(("gpu.xid", Status.FAIL), summary=LOG_LINE)]), "md")
    row = next(line for line in md.splitlines() if line.startswith("| FAIL | gpu.xid |"))
    assert "<img" not in md and "&lt;img src=x onerror=alert(1)&gt;" in row
    assert r"\[click\](http://evil)" in row and r"\*bold\*" in row and r"\| pipe" in row
    assert "\x1b" not in md and "\x01" not in md and "\x0b" not in md
    assert row.count(" | ") == 6  # the escaped pipe does not split the row


def test_junit_is_valid_xml_with_control_characters_and_warn_follows_fail_on() -> None:
    n = node(("gpu.xid", Status.ERROR), ("gpu.thermal", Status.WARN), summary=LOG_LINE)
    text = render(build_report([n]), "junit")
    root = ET.fromstring(text)  # raises on \x01, \x0b or an escape character
    assert "\x1b" not in text and (root.get("failures"), root.get("errors")) == ("0", "1")
    (error,) = root.iter("error")
    assert error.get("message", "").startswith("NVRM: Xid (PCI:0000:07:00): 79, fell off the bus <img")
    warn_case = next(c for c in root.iter("testcase") if c.get("classname") == "gpu.thermal")
    assert [p.get("value") for p in warn_case.iter("property")] == ["WARN"] and warn_case.find("failure") is None
    n.fail_on = "warn"
    gated = ET.fromstring(render(build_report([n]), "junit"))
    (failure,) = gated.iter("failure")
    assert failure.get("type") == "WARN" and (gated.get("failures"), gated.get("errors")) == ("1", "1")


def test_gated_warning_is_said_as_a_failure_everywhere() -> None:
    n = node(("gpu.thermal", Status.WARN), ("gpu.pcie", Status.PASS))
    n.fail_on = "warn"
    report = build_report([n])
    assert report["cluster_summary"]["exit_code"] == 2 and report["cluster_summary"]["overall_status"] == "WARN"
    assert render(report, "md").startswith("# gpu-preflight report: WARN (gating: --fail-on warn)")
    page = render(report, "html")
    assert "not ready: warnings fail this run (--fail-on warn)" in page and 'data-exit-code="2"' in page
    assert "[RESULT] FAILURE: [gpu.thermal]" in page


def test_rich_console_shows_brackets_from_logs_as_text() -> None:
    """Without escaping, rich reads "[/red]" as a closing tag and raises MarkupError."""
    report = build_report([node(("gpu.xid", Status.FAIL), summary="dmesg: [bold]Xid[/] [/red] 79")])
    rich = Tty()
    render_console(ClusterReport.of(report), rich)
    assert "dmesg: [bold]Xid[/]" in rich.getvalue() and "[/red] 79" in rich.getvalue()
    assert rich.getvalue().splitlines()[-1] == "[RESULT] FAILURE: [gpu.xid]"
