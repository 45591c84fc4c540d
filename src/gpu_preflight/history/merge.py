"""Put history findings into a report, as if a check of the run had made them.

The verdict, issues, recommendations and counts are recomputed with the report's own
summariser, so a regression WARN gates a ``--fail-on warn`` run exactly like any other
WARN. Call this before anything that reads the verdict (health scores, HTML, exit code).

The typed report gets a new value (:func:`~gpu_preflight.findings.canonical.with_findings`);
a report dict, as the end of a run still holds it, is updated in place from that value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

from ..findings.model import ClusterCheck, ClusterReport, ReportFinding
from ..model import CheckResult, Finding
from .extract import NodeIndex

__all__ = ["add_findings"]

_VERDICT = ("overall_status", "exit_code", "issues", "recommendations", "counts")


@overload
def add_findings(report: ClusterReport, findings: Sequence[Finding]) -> ClusterReport: ...
@overload
def add_findings(report: dict[str, Any], findings: Sequence[Finding]) -> dict[str, Any]: ...


def add_findings(report: ClusterReport | dict[str, Any],
                 findings: Sequence[Finding]) -> ClusterReport | dict[str, Any]:
    """``report`` with ``findings`` added (to ``findings`` and ``cluster_checks``) and its verdict
    worked out again: a new typed report, or the same dict updated."""
    from ..findings.canonical import with_findings

    if not findings:
        return report
    typed = ClusterReport.of(report)
    nodes = NodeIndex(typed)
    listed = []
    for f in findings:
        index, _ = nodes.locate(f.subject, None)
        listed.append(ReportFinding.from_dict({"node": nodes.keys[index] if index is not None else "cluster",
                                               **f.to_dict()}))
    by_check: dict[str, list[Finding]] = {}
    for f in findings:
        by_check.setdefault(f.check_id, []).append(f)
    checks = [ClusterCheck.from_dict(CheckResult(check_id, _title(check_id), found, 0.0).to_dict())
              for check_id, found in by_check.items()]
    later = with_findings(typed, listed, checks)
    if isinstance(report, ClusterReport):
        return later
    report.setdefault("findings", []).extend(f.to_dict() for f in listed)
    report.setdefault("cluster_checks", []).extend(c.to_dict() for c in checks)
    summary, fresh = report["cluster_summary"], later.cluster_summary.to_dict()
    for key in _VERDICT:
        summary[key] = fresh[key]
    return report


def _title(check_id: str) -> str:
    """The title the history's id was declared with (``checks/report_ids.py``; the run that
    judged its history has imported it already), else the id itself."""
    from ..registries import UnknownKey
    from ..registry import describe

    try:
        return describe(check_id).title
    except UnknownKey:
        return check_id
