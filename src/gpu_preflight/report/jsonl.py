"""JSON Lines: one compact JSON object per finding, then one verdict line.

Log pipelines (CloudWatch Logs, Loki, Fluent Bit, Elasticsearch) index a log *event*, and
most of them discover fields automatically only when the event is one JSON object on one
line. A table is for people; this is for the log store, so that "every FAIL on node X in
the last week" is a query instead of a grep. Every line carries ``event`` so the lines can
be told from the rest of a job's output, and the verdict line repeats the ``[RESULT]``
line and the headline numbers for metric extraction (SageMaker metric definitions, metric
filters).
"""

from __future__ import annotations

import json
from typing import Any

from .canonical import failed_checks, result_line

FINDING_EVENT = "gpu_preflight.finding"
VERDICT_EVENT = "gpu_preflight.verdict"
_ORDER = {"FAIL": 0, "ERROR": 1, "WARN": 2, "SKIP": 3, "PASS": 4}


def _line(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"), sort_keys=False, default=str)


def finding_lines(report: dict[str, Any]) -> list[str]:
    """One line per finding, with every field the report has for it, worst first.

    Worst first so that a log cut short still shows what matters.
    """
    findings = sorted(report.get("findings", []),
                      key=lambda f: (_ORDER.get(f.get("status", ""), 9), f.get("check_id", ""), f.get("subject", "")))
    return [_line({"event": FINDING_EVENT, **f}) for f in findings]


def verdict_line(report: dict[str, Any]) -> str:
    """The run's verdict, counts and performance summary on one line."""
    summary = report.get("cluster_summary", {})
    counts = summary.get("counts", {})
    info = report.get("cluster_info", {})
    return _line({
        "event": VERDICT_EVENT,
        "overall_status": summary.get("overall_status"),
        "exit_code": summary.get("exit_code"),
        "fail_findings": counts.get("FAIL", 0),
        "error_findings": counts.get("ERROR", 0),
        "warn_findings": counts.get("WARN", 0),
        "nodes": len(report.get("nodes", {})),
        "data_completeness": info.get("data_completeness"),
        "failed_checks": failed_checks(report),
        "performance_summary": summary.get("performance_summary", {}),
        "result": result_line(report),
    })


def render_jsonl(report: dict[str, Any]) -> str:
    """All finding lines and the verdict line, newline-terminated."""
    return "".join(line + "\n" for line in [*finding_lines(report), verdict_line(report)])
