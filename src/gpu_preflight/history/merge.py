"""Put history findings into a canonical report, as if a check of the run had made them.

The verdict, issues, recommendations and counts are recomputed with the report's own
summariser, so a regression WARN gates a ``--fail-on warn`` run exactly like any other
WARN. Call this before anything that reads the verdict (health scores, HTML, exit code).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..ids import HISTORY_REGRESSION, HISTORY_REPEAT_OFFENDER
from ..model import CheckResult, Finding
from .extract import NodeIndex

__all__ = ["add_findings"]

TITLES = {spec.id: spec.title for spec in (HISTORY_REGRESSION, HISTORY_REPEAT_OFFENDER)}


def add_findings(report: dict[str, Any], findings: Sequence[Finding]) -> dict[str, Any]:
    """Append ``findings`` (to ``findings`` and ``cluster_checks``) and refresh the summary; returns the report."""
    from ..report.canonical import summarize

    if not findings:
        return report
    summary = report.setdefault("cluster_summary", {})
    nodes = NodeIndex(report)
    for f in findings:
        index, _ = nodes.locate(f.subject, None)
        report.setdefault("findings", []).append({"node": nodes.keys[index] if index is not None else "cluster",
                                                  **f.to_dict()})
    by_check: dict[str, list[Finding]] = {}
    for f in findings:
        by_check.setdefault(f.check_id, []).append(f)
    report.setdefault("cluster_checks", []).extend(
        CheckResult(check_id, TITLES.get(check_id, check_id), found, 0.0).to_dict()
        for check_id, found in by_check.items())
    fail_on = (report.get("run") or {}).get("fail_on", "fail")
    fresh = summarize(report["findings"], fail_on, summary.get("unlisted"))
    for key in ("overall_status", "exit_code", "issues", "recommendations", "counts"):
        summary[key] = fresh[key]
    return report
