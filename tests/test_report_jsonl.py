"""JSON Lines output: one parseable object per finding, worst first, then the verdict."""

from __future__ import annotations

import json
from pathlib import Path

from gpu_preflight.findings.canonical import result_line
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.report.jsonl import FINDING_EVENT, VERDICT_EVENT, render_jsonl

from .platform_reports import cluster_report


def test_one_line_per_finding_then_the_verdict(tmp_path: Path) -> None:
    report = cluster_report(tmp_path, {"algo-1": False, "algo-2": True})
    text = render_jsonl(ClusterReport.of(report))
    assert text.endswith("\n")
    lines = [json.loads(line) for line in text.splitlines()]
    assert len(lines) == len(report["findings"]) + 1
    findings, verdict = lines[:-1], lines[-1]
    assert {f["event"] for f in findings} == {FINDING_EVENT}
    assert findings[0]["status"] == "FAIL" and findings[0]["subject"] == "algo-2/gpu0"
    assert [f["status"] for f in findings] == sorted((f["status"] for f in findings),
                                                     key=["FAIL", "ERROR", "WARN", "SKIP", "PASS"].index)
    assert sorted(json.dumps(f, sort_keys=True) for f in findings) == sorted(
        json.dumps({"event": FINDING_EVENT, **f}, sort_keys=True) for f in report["findings"])
    assert verdict["event"] == VERDICT_EVENT
    assert (verdict["overall_status"], verdict["exit_code"], verdict["nodes"]) == ("FAIL", 2, 2)
    assert verdict["failed_checks"] == ["gpu.pcie"] and verdict["result"] == result_line(ClusterReport.of(report))


def test_lines_never_break_inside_a_value(tmp_path: Path) -> None:
    report = cluster_report(tmp_path, {"n1": True})
    report["findings"][0]["summary"] = "two\nlines"
    assert len(render_jsonl(ClusterReport.of(report)).splitlines()) == len(report["findings"]) + 1
