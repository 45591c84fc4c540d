"""Report formats rendered from the canonical dict: console (plain and rich), markdown, JUnit."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from gpu_preflight import build_report, run_checks
from gpu_preflight.report import render, write_report
from gpu_preflight.report.canonical import result_line
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
    render_console(report, plain)
    render_console(report, rich)
    for text in (plain.getvalue(), rich.getvalue()):
        assert text.rstrip().splitlines()[-1] == "[RESULT] FAILURE: [gpu.clocks]"
    assert "hw slowdown active" in plain.getvalue()
    assert "┃" in rich.getvalue() or "│" in rich.getvalue()  # drawn by rich


def test_summary_groups_issues_and_recommendations(tmp_path: Path) -> None:
    report = faulty_report(tmp_path)
    summary = report["cluster_summary"]
    assert summary["overall_status"] == "FAIL" and summary["exit_code"] == 2
    assert summary["test_results"]["gpu_health"] is False and summary["test_results"]["gpu_links"] is True
    assert summary["test_results"]["system_resources"] is None  # not run: not the same as passed
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
    assert result_line(report) == "[RESULT] SUCCESS"
