"""JUnit XML: one testcase per check and subject, so CI systems show node health as tests.

FAIL becomes ``<failure>``, ERROR ``<error>`` (could not measure), SKIP ``<skipped>`` with
the reason. WARN follows the run's ``--fail-on``: by default it does not fail the run, so it
is a passing testcase with a ``status=WARN`` property and its message in ``<system-out>``;
under ``--fail-on warn`` it gates, so it is a ``<failure type="WARN">``. The counts
therefore agree with the exit code: failures only when it is 2, errors whenever ERROR
findings exist, neither when it is 0 or 1. Each suite carries the run's verdict, exit code
and ``[RESULT]`` line as properties.

Text quoted from logs may hold ANSI escapes and control bytes that XML 1.0 cannot hold;
every value goes through :func:`.text.plain_text`, so the file always parses.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..findings.canonical import display, verdict_of
from ..findings.model import ClusterReport, ReportFinding
from .reporters import reporter
from .text import plain_text


@reporter("junit", typed=True)
def render_junit(report: ClusterReport) -> str:
    verdict = verdict_of(report)
    warn_fails = verdict.fail_on == "warn"
    suites = ET.Element("testsuites", name="gpu-preflight")
    by_node: dict[str, list[ReportFinding]] = {}
    for f in report.findings:
        by_node.setdefault(f.node or "node_0", []).append(f)
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for node, findings in sorted(by_node.items()):
        section = report.nodes.get(node)
        host = section.node_info.hostname if section is not None else node
        suite = ET.SubElement(suites, "testsuite", name=plain_text(f"{node} ({host})"),
                              timestamp=plain_text(report.timestamp))
        props = ET.SubElement(suite, "properties")
        for name, value in (("gpu-preflight.verdict", verdict.status.value),
                            ("gpu-preflight.exit_code", str(verdict.exit_code)),
                            ("gpu-preflight.result", verdict.line)):
            ET.SubElement(props, "property", name=name, value=plain_text(value))
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for f in findings:
            case = ET.SubElement(suite, "testcase", classname=plain_text(f.check_id),
                                 name=plain_text(f"{f.subject} [{f.code}]"))
            counts["tests"] += 1
            message = plain_text(f.summary)
            text = plain_text("\n".join(x for x in (
                f"observed: {display(f.observed, f.unit)}" if f.observed is not None else "",
                f"expected: {display(f.expected, f.unit)}" if f.expected is not None else "",
                f"recommendation: {f.recommendation}" if f.recommendation else "") if x))
            status = f.status.value
            if status == "FAIL" or (status == "WARN" and warn_fails):
                counts["failures"] += 1
                kind = f.code if status == "FAIL" else "WARN"
                ET.SubElement(case, "failure", message=message, type=plain_text(kind)).text = text
            elif status == "ERROR":
                counts["errors"] += 1
                ET.SubElement(case, "error", message=message, type=plain_text(f.code)).text = text
            elif status == "SKIP":
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=message)
            elif status == "WARN":
                ET.SubElement(ET.SubElement(case, "properties"), "property", name="status", value="WARN")
                ET.SubElement(case, "system-out").text = f"WARN: {message}\n{text}"
        for k, v in counts.items():
            suite.set(k, str(v))
            total[k] += v
    for k, v in total.items():
        suites.set(k, str(v))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
