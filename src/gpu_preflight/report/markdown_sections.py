"""The Markdown health assessment's overview and judgement sections, and its table helpers.

Infrastructure overview, software-stack health, network strengths and concerns, the GPU
memory dashboard, the service-availability matrix, the error classification with its
high-risk items, the health-trend analysis and the conclusion — the sections of the user's
health-assessment report (spec 002) that :mod:`.markdown` lays out in the document's order.
The data come from :mod:`.review` and :mod:`.conclusion`, shared with the HTML page.
Every cell is escaped (:func:`~.text.markdown_text`): node names and summaries are data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .text import markdown_text

__all__ = ["cell", "conclusion_section", "errors_section", "gpu_memory_section", "infrastructure_section",
           "network_review_section", "row", "score", "services_section", "software_stack_section", "table",
           "trend_section"]

MATRIX_COLUMNS = 8  # nodes shown as columns of the service matrix; above, nodes counted per status


def cell(text: object) -> str:
    return markdown_text(text)


def row(*cells: object) -> str:
    return "| " + " | ".join(cell(c) for c in cells) + " |"


def table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    return [row(*head), "|" + "---|" * len(head), *(row(*r) for r in rows)]


def score(value: Any) -> str:
    return "—" if value is None else f"{float(value):.0f}/100"


def _pct(value: Any) -> str:
    return "not measured" if value is None else f"{float(value):g}%"


def _bullets(items: Sequence[str], empty: str) -> list[str]:
    return [f"- {cell(i)}" for i in items] or [f"- {empty}"]


def infrastructure_section(infra: Mapping[str, str]) -> list[str]:
    return ["## Infrastructure overview", "",
            *(f"- **{title}:** {cell(infra[key])}" for key, title in (
                ("type", "Type"), ("nodes", "Nodes"), ("network", "Network"), ("management", "Management"),
                ("purpose", "Purpose"))), ""]


def software_stack_section(stack: Mapping[str, Any], detail_max_nodes: int) -> list[str]:
    lines = ["## Software stack health", ""]
    columns = stack["columns"]
    if stack["listed"]:
        rows = [(n["node"], *(n[k] if n[k] is not None else "not read" for k, _ in columns)) for n in stack["nodes"]]
        lines += [*table(("Node", *(t for _, t in columns)), rows), ""]
    else:
        lines += [f"Per-node rows are listed up to report.detail_max_nodes ({detail_max_nodes}) nodes; the versions "
                  "below are counted over every node.", ""]
    lines += ["Do the nodes agree?", "",
              *table(("Component", "Agreement", "Versions"),
                     [(c["title"], c["status"], c["text"]) for c in stack["components"]]), ""]
    return lines


def network_review_section(review: Mapping[str, Sequence[str]]) -> list[str]:
    return ["## Network strengths and concerns", "", "### Network strengths", "",
            *_bullets(review["strengths"], "none measured"), "", "### Network concerns", "",
            *_bullets(review["concerns"], "none"), ""]


def gpu_memory_section(memory: Mapping[str, Any]) -> list[str]:
    lines = ["## GPU memory", "", "Memory in use and GPU utilisation as NVML read them when each node was checked "
             "(before any workload).", ""]
    rows = [(n["node"], n["gpus"], f"{n['memory_gb']:g} GB", _pct(n["used_percent"]), _pct(n["utilization_percent"]),
             n["health"], score(n["score"])) for n in memory["nodes"]]
    c = memory["cluster"]
    rows.append(("Cluster", sum(n["gpus"] for n in memory["nodes"]) if memory["listed"] else "—",
                 f"{c['memory_gb']:g} GB", _pct(c["used_percent"]), _pct(c["utilization_percent"]), c["health"],
                 score(c["score"])))
    return [*lines, *table(("Node", "GPUs", "GPU memory", "Memory in use", "GPU utilisation", "GPU health", "Score"),
                           rows), ""]


def services_section(matrix: Mapping[str, Any]) -> list[str]:
    lines = ["## Service availability", ""]
    if not matrix["rows"]:
        return [*lines, "No test group was judged.", ""]
    nodes = matrix["nodes"]
    extra = ("Cluster-wide",) if matrix["cluster_column"] else ()
    if nodes is not None:
        head = ("Test group", *nodes, *extra, "Reliability", "Status")
        rows = [(r["group"], *("not tested" if c is None else c for c in r["cells"]),
                 *((r["cluster"] or "—",) if extra else ()), _pct(r["reliability"]), r["status"])
                for r in matrix["rows"]]
    else:
        head = ("Test group", "PASS", "WARN", "FAIL", "ERROR", "Not tested", "Reliability", "Status",
                "Nodes with a problem")
        rows = [(r["group"], r["counts"]["PASS"], r["counts"]["WARN"], r["counts"]["FAIL"], r["counts"]["ERROR"],
                 r["untested_nodes"], _pct(r["reliability"]), r["status"], ", ".join(r["problem_nodes"]) or "—")
                for r in matrix["rows"]]
    lines += ["Each test group per node (the node's findings and those of cluster checks that name it); "
              + ("cluster-wide: findings about the cluster as a whole; " if extra else "")
              + "reliability: the share of nodes that judged it with a PASS; status: the group over the whole run.", "",
              *table(head, rows), ""]
    if matrix["not_tested"]:
        lines += [f"Not tested in this run: {cell(', '.join(matrix['not_tested']))}.", ""]
    return lines


def errors_section(errors: Mapping[str, Any]) -> list[str]:
    lines = ["## Error classification", ""]
    if errors["rows"]:
        lines += table(("Error type", "Component", "Frequency", "Severity", "Status", "Impact"),
                       [(r["type"], r["component"], f"{r['frequency']} instance(s)", r["severity"], r["status"],
                         r["impact"]) for r in errors["rows"]])
    else:
        lines.append("No error: nothing warns, fails or could not be measured.")
    lines += ["", f"No error in: {cell(', '.join(errors['clean']) or 'none')}.", "", "### High-risk items", ""]
    if not errors["high_risk"]:
        return [*lines, "None: nothing gates the run.", ""]
    for n, item in enumerate(errors["high_risk"], 1):
        lines += [f"{n}. **{cell(item['title'])}** ({cell(item['subjects'])})", f"   - Impact: {cell(item['impact'])}",
                  f"   - Mitigation: {cell(item['mitigation'])}"]
    if errors["more_high_risk"]:
        lines.append(f"\nand {errors['more_high_risk']} more (see Issues).")
    return [*lines, ""]


def trend_section(trend: Mapping[str, str]) -> list[str]:
    return ["## Health trend analysis", "",
            *(f"- **{title}:** {cell(trend[key])}" for key, title in (
                ("strengths", "Strengths"), ("concerns", "Concerns"), ("potential", "Potential"),
                ("priority", "Priority"))), ""]


def conclusion_section(end: Mapping[str, Any]) -> list[str]:
    return ["## Conclusion", "", f"**Current status: {cell(end['status'])}**", "", "**Strengths:**", "",
            *_bullets(end["strengths"], "none"), "", "**Critical issues:**", "", *_bullets(end["critical"], "none"),
            "", "**Readiness:**", "", *(f"- {r['level']}: **{r['status']}**" for r in end["readiness"]), "",
            f"**Decision:** {cell(end['decision'])}", ""]
