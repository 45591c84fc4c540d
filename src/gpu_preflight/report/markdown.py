"""Markdown report: for pull requests, tickets and wikis.

Every cell that carries text from a finding (subjects, readings, summaries quoting logs) is
escaped: a kernel log line with ``<img src=...>`` or ``[link](...)`` must show as text in a
rendered pull request, not as HTML. The verdict and each group's status come from
:func:`~.canonical.verdict_of` and :func:`~.canonical.group_statuses`, the same functions
that give the exit code and the JSON ``test_results``.
"""

from __future__ import annotations

from typing import Any

from .canonical import display, group_statuses, verdict_of
from .text import markdown_text

_ORDER = {"FAIL": 0, "ERROR": 1, "WARN": 2, "SKIP": 3, "PASS": 4}


def _cell(text: object) -> str:
    return markdown_text(text)


def render_markdown(report: dict[str, Any]) -> str:
    summary = report["cluster_summary"]
    topo = report["cluster_info"]["cluster_topology"]
    verdict = verdict_of(report)
    lines = [
        f"# gpu-preflight report: {verdict.label}",
        "",
        f"- Generated: {_cell(report['timestamp'])}",
        f"- Nodes: {topo['total_nodes']}, GPUs per node: {topo['gpus_per_node']}",
        f"- Tool: gpu-preflight {_cell(report.get('tool', {}).get('version', '?'))}, "
        f"schema {_cell(report.get('schema_version'))}",
        f"- Exit code: {verdict.exit_code} ({verdict.word})",
        "",
        "## Test results",
        "",
        "| Group | Result |",
        "|---|---|",
    ]
    groups = group_statuses(report.get("findings") or [], summary.get("unlisted"))
    for name, status in groups.items():
        lines.append(f"| {name} | {'not tested' if status is None else status.value} |")
    lines += ["", "## Findings", "", "| Status | Check | Subject | Observed | Expected | Summary | Recommendation |",
              "|---|---|---|---|---|---|---|"]
    for f in sorted(report.get("findings", []), key=lambda f: (_ORDER[f["status"]], f["check_id"], f["subject"])):
        lines.append("| " + " | ".join(_cell(c) for c in (
            f["status"], f["check_id"], f["subject"], display(f.get("observed"), f.get("unit")),
            display(f.get("expected"), f.get("unit")), f["summary"], f.get("recommendation") or "")) + " |")
    if summary["recommendations"]:
        lines += ["", "## Recommendations", ""] + [f"- {_cell(r)}" for r in summary["recommendations"]]
    if report.get("artifacts"):
        lines += ["", "## Artifacts", ""] + [f"- {_cell(a['name'])}: {_cell(a['path'])}" for a in report["artifacts"]]
    lines += ["", "```", verdict.line, "```", ""]
    return "\n".join(lines)
