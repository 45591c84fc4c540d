"""Put history findings into a report, as if a check of the run had made them.

The verdict, issues, recommendations and counts are recomputed with the report's own
summariser, so a regression WARN gates a ``--fail-on warn`` run exactly like any other
WARN. Call this before anything that reads the verdict (health scores, HTML, exit code).

The typed report gets a new value (:func:`~gpu_preflight.findings.canonical.with_findings`);
a report dict, as the end of a run still holds it, is updated in place from that value.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..findings.canonical import with_findings
from ..findings.model import ClusterCheck, ClusterReport, ReportFinding
from ..model import CheckResult, Finding
from ..registries import UnknownKey
from ..registry import describe
from .extract import NodeIndex

__all__ = ["add_findings"]

_VERDICT = ("overall_status", "exit_code", "issues", "recommendations", "counts")


def add_findings(report: ClusterReport, findings: Sequence[Finding]) -> ClusterReport:
    """``report`` with ``findings`` added (to ``findings`` and ``cluster_checks``) and its verdict
    worked out again: a new value."""
    if not findings:
        return report
    nodes = NodeIndex(report)
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
    return with_findings(report, listed, checks)


def _title(check_id: str) -> str:
    """The title the history's id was declared with (``checks/report_ids.py``; the run that
    judged its history has imported it already), else the id itself."""
    try:
        return describe(check_id).title
    except UnknownKey:
        return check_id
