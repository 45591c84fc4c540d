"""JSON Lines: one compact JSON object per finding, then one verdict line.

Log pipelines (CloudWatch Logs, Loki, Fluent Bit, Elasticsearch) index a log *event*, and
most of them discover fields automatically only when the event is one JSON object on one
line. A table is for people; this is for the log store, so that "every FAIL on node X in
the last week" is a query instead of a grep. Every line carries ``event`` so the lines can
be told from the rest of a job's output, and the verdict line repeats the ``[RESULT]``
line and the headline numbers for metric extraction (SageMaker metric definitions, metric
filters).

Both functions take the typed report (:class:`~.model.ClusterReport`) or its JSON dict and
read the typed one, as every other format does, so the lines say what the report says.
"""

from __future__ import annotations

import json
from typing import Any

from ..findings.canonical import failed_checks, result_line
from ..findings.model import ClusterReport

FINDING_EVENT = "gpu_preflight.finding"
VERDICT_EVENT = "gpu_preflight.verdict"
_ORDER = {"FAIL": 0, "ERROR": 1, "WARN": 2, "SKIP": 3, "PASS": 4}


def _line(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"), sort_keys=False, default=str)


def finding_lines(report: ClusterReport) -> list[str]:
    """One line per finding, with every field the report has for it, worst first.

    Worst first so that a log cut short still shows what matters.
    """
    findings = sorted(report.findings,
                      key=lambda f: (_ORDER.get(f.status.value, 9), f.check_id, f.subject))
    return [_line({"event": FINDING_EVENT, **f.to_dict()}) for f in findings]


def verdict_line(report: ClusterReport) -> str:
    """The run's verdict, counts and performance summary on one line."""
    typed = report
    summary = typed.cluster_summary
    counts = summary.counts
    return _line({
        "event": VERDICT_EVENT,
        "overall_status": summary.overall_status.value,
        "exit_code": summary.exit_code,
        "fail_findings": counts.get("FAIL", 0),
        "error_findings": counts.get("ERROR", 0),
        "warn_findings": counts.get("WARN", 0),
        "nodes": len(typed.nodes),
        "data_completeness": typed.cluster_info.data_completeness,
        "failed_checks": failed_checks(typed),
        "performance_summary": summary.performance_summary,
        "result": result_line(typed),
    })


def render_jsonl(report: ClusterReport) -> str:
    """All finding lines and the verdict line, newline-terminated."""
    typed = report
    return "".join(line + "\n" for line in [*finding_lines(typed), verdict_line(typed)])
