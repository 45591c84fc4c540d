"""JUnit XML: one testcase per check and subject, so CI systems show node health as tests.

FAIL becomes ``<failure>``, ERROR ``<error>`` (could not measure), SKIP ``<skipped>``
with the reason; WARN passes but keeps its message in ``<system-out>``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from .canonical import display


def render_junit(report: dict[str, Any]) -> str:
    suites = ET.Element("testsuites", name="gpu-preflight")
    by_node: dict[str, list[dict[str, Any]]] = {}
    for f in report.get("findings", []):
        by_node.setdefault(f.get("node", "node_0"), []).append(f)
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for node, findings in sorted(by_node.items()):
        host = report["nodes"].get(node, {}).get("node_info", {}).get("hostname", node)
        suite = ET.SubElement(suites, "testsuite", name=f"{node} ({host})", timestamp=report["timestamp"])
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for f in findings:
            case = ET.SubElement(suite, "testcase", classname=f["check_id"], name=f"{f['subject']} [{f['code']}]")
            counts["tests"] += 1
            message = f["summary"]
            text = "\n".join(x for x in (
                f"observed: {display(f.get('observed'), f.get('unit'))}" if f.get("observed") is not None else "",
                f"expected: {display(f.get('expected'), f.get('unit'))}" if f.get("expected") is not None else "",
                f"recommendation: {f['recommendation']}" if f.get("recommendation") else "") if x)
            if f["status"] == "FAIL":
                counts["failures"] += 1
                ET.SubElement(case, "failure", message=message, type=f["code"]).text = text
            elif f["status"] == "ERROR":
                counts["errors"] += 1
                ET.SubElement(case, "error", message=message, type=f["code"]).text = text
            elif f["status"] == "SKIP":
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=message)
            elif f["status"] == "WARN":
                ET.SubElement(case, "system-out").text = f"WARN: {message}\n{text}"
        for k, v in counts.items():
            suite.set(k, str(v))
            total[k] += v
    for k, v in total.items():
        suites.set(k, str(v))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
