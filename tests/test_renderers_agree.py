"""Every renderer says what the JSON says about every finding's status.

The fixed multi-node report of ``tests/test_markdown_golden.py`` (and a WARN run gated by
``--fail-on warn``) is rendered in every format; each output is parsed back into (status,
check, subject) and compared, as a multiset, with the report's ``findings``: Markdown,
HTML, JUnit, JSON Lines, the verbose console, the Prometheus textfile (worst status per
check and subject), and the assessment's issues (worst status of the findings they group).
"""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from html import unescape
from typing import Any

import pytest

from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.model import Status
from gpu_preflight.outputs.textfile import render_textfile
from gpu_preflight.report import render
from gpu_preflight.report.console import render_console
from gpu_preflight.report.jsonl import render_jsonl
from gpu_preflight.report.text import markdown_text

from .test_markdown_golden import REPORT

Triple = tuple[str, str, str]
STATUS_WORDS = "|".join(s.value for s in Status)


def _reports() -> dict[str, dict[str, Any]]:
    fixed: dict[str, Any] = json.loads(REPORT.read_text(encoding="utf-8"))
    gated = json.loads(json.dumps(fixed))
    gated["findings"] = [f for f in gated["findings"] if f["status"] != "FAIL"]
    gated["run"]["fail_on"] = "warn"
    gated["cluster_summary"].update(overall_status="WARN", exit_code=2)
    for key in ("health_scores", "recommendations_by_urgency", "cost_benefit", "assessment"):
        gated["cluster_summary"].pop(key, None)
    return {"fail": fixed, "gated-warn": gated}


REPORTS = _reports()


def expected(report: dict[str, Any]) -> Counter[Triple]:
    return Counter((f["status"], f["check_id"], str(f["subject"])) for f in report["findings"])


def from_markdown(report: dict[str, Any]) -> Counter[Triple]:
    table = render(report, "md").split("## Findings", 1)[1].split("```", 1)[0]
    rows = re.findall(rf"^\| ({STATUS_WORDS}) \| (.+?) \| (.+?) \| ", table, re.M)
    return Counter(rows)


def from_html(report: dict[str, Any]) -> Counter[Triple]:
    page = render(report, "html").split('<section id="findings">', 1)[1]
    rows = re.findall(r'<tr class="(?:loud|quiet)"(?: hidden)?><td><span class="st"[^>]*>(\w+)</span></td>'
                      r"<td>([^<]*)</td><td>([^<]*)</td>", page)
    return Counter((s, unescape(c), unescape(subject)) for s, c, subject in rows)


def from_junit(report: dict[str, Any]) -> Counter[Triple]:
    out: Counter[Triple] = Counter()
    for case in ET.fromstring(render(report, "junit")).iter("testcase"):
        failure, error = case.find("failure"), case.find("error")
        if failure is not None:
            status = "WARN" if failure.get("type") == "WARN" else "FAIL"
        elif error is not None:
            status = "ERROR"
        elif case.find("skipped") is not None:
            status = "SKIP"
        elif any(p.get("value") == "WARN" for p in case.iter("property")):
            status = "WARN"
        else:
            status = "PASS"
        subject = re.sub(r" \[[^\]]*\]$", "", case.get("name", ""))
        out[(status, case.get("classname", ""), subject)] += 1
    return out


def from_jsonl(report: dict[str, Any]) -> Counter[Triple]:
    lines = [json.loads(line) for line in render_jsonl(ClusterReport.of(report)).splitlines()]
    return Counter((x["status"], x["check_id"], str(x["subject"])) for x in lines
                   if x["event"] == "gpu_preflight.finding")


def from_console(report: dict[str, Any]) -> Counter[Triple]:
    stream = io.StringIO()
    render_console(ClusterReport.of(report), stream, verbose=True, width=400)
    rows = re.findall(rf"^({STATUS_WORDS})\s+(\S+)  (.+?)  ", stream.getvalue(), re.M)
    return Counter(rows)


def worst(counter: Counter[Triple]) -> dict[tuple[str, str], str]:
    rank = {s.value: s.rank for s in Status}
    out: dict[tuple[str, str], str] = {}
    for status, check, subject in counter:
        if (check, subject) not in out or rank[status] > rank[out[(check, subject)]]:
            out[(check, subject)] = status
    return out


@pytest.mark.parametrize("name", list(REPORTS))
def test_every_renderer_agrees_with_the_json_on_every_status(name: str) -> None:
    report = REPORTS[name]
    want = expected(report)
    assert len(want) > 20
    md_want = Counter((s, markdown_text(c), markdown_text(subject)) for (s, c, subject), n in want.items()
                      for _ in range(n))
    assert from_markdown(report) == md_want
    assert from_html(report) == want
    assert from_junit(report) == want
    assert from_jsonl(report) == want
    assert from_console(report) == want
    series = re.findall(r'^gpu_preflight_check_status\{([^}]*)\} 1$', render_textfile(ClusterReport.of(report)), re.M)
    shown = {}
    for labels in series:
        kv = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels))
        shown[(kv["check"], kv["subject"])] = kv["status"].upper()
    assert shown == worst(want)


@pytest.mark.parametrize("name", list(REPORTS))
def test_issues_say_the_status_of_the_findings_they_group(name: str) -> None:
    from gpu_preflight.report.advice import recommendations_by_urgency
    from gpu_preflight.report.assessment import issues
    from gpu_preflight.report.scores import compute_scores

    report = REPORTS[name]
    typed = ClusterReport.of(report)
    summary = typed.cluster_summary
    scores = summary.health_scores or compute_scores(typed)
    recs = summary.recommendations_by_urgency or recommendations_by_urgency(typed, scores)
    found = summary.assessment.issues if summary.assessment is not None else issues(recs)
    assert found
    rank = {s.value: s.rank for s in Status}
    for issue in found:
        members = [f for f in report["findings"] if f["check_id"] == issue.check_id
                   and (f.get("code") or "") == issue.code and str(f["subject"]) in issue.subjects]
        assert members and issue.status == max((f["status"] for f in members), key=rank.__getitem__)
    md = render(report, "md").split("## Issues", 1)[1].split("## Recommendations", 1)[0]
    shown = re.findall(rf"^\| (HIGH|MEDIUM) \| ({STATUS_WORDS}) \| (.+?) \| ", md, re.M)
    assert shown == [(i.priority, i.status, markdown_text(str(i.check_id))) for i in found]
