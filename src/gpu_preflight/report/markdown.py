"""Markdown report: for pull requests, tickets and wikis."""

from __future__ import annotations

from typing import Any

from .canonical import display, result_line


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: dict[str, Any]) -> str:
    summary = report["cluster_summary"]
    topo = report["cluster_info"]["cluster_topology"]
    lines = [
        f"# gpu-preflight report: {summary['overall_status']}",
        "",
        f"- Generated: {report['timestamp']}",
        f"- Nodes: {topo['total_nodes']}, GPUs per node: {topo['gpus_per_node']}",
        f"- Tool: gpu-preflight {report.get('tool', {}).get('version', '?')}, schema {report.get('schema_version')}",
        "",
        "## Test results",
        "",
        "| Group | Result |",
        "|---|---|",
    ]
    for name, ok in summary["test_results"].items():
        lines.append(f"| {name} | {'not tested' if ok is None else ('pass' if ok else 'FAIL')} |")
    lines += ["", "## Findings", "", "| Status | Check | Subject | Observed | Expected | Summary | Recommendation |",
              "|---|---|---|---|---|---|---|"]
    order = {"FAIL": 0, "ERROR": 1, "WARN": 2, "SKIP": 3, "PASS": 4}
    for f in sorted(report.get("findings", []), key=lambda f: (order[f["status"]], f["check_id"], f["subject"])):
        lines.append("| " + " | ".join(_cell(c) for c in (
            f["status"], f["check_id"], f["subject"], display(f.get("observed"), f.get("unit")),
            display(f.get("expected"), f.get("unit")), f["summary"], f.get("recommendation") or "")) + " |")
    if summary["recommendations"]:
        lines += ["", "## Recommendations", ""] + [f"- {_cell(r)}" for r in summary["recommendations"]]
    if report.get("artifacts"):
        lines += ["", "## Artifacts", ""] + [f"- {a['name']}: `{a['path']}`" for a in report["artifacts"]]
    lines += ["", "```", result_line(report), "```", ""]
    return "\n".join(lines)
