"""Markdown report: the health assessment, for pull requests, tickets and wikis.

Laid out as the user's health-assessment report (spec 002): executive summary with the
overall score, the component table with trends, node specifications, connectivity,
performance stability, issues with impact and priority, recommendations by urgency, the
score targets, readiness, the monitoring schedule — then the test groups, every finding
and the ``[RESULT]`` line. The derivations come from :mod:`.assessment` (shared with the
HTML page); the verdict and each group's status from :func:`~.canonical.verdict_of` and
:func:`~.canonical.report_groups`, the same functions that give the exit code and the
JSON ``test_results``.

Every cell that carries text from a finding (subjects, readings, summaries quoting logs) is
escaped: a kernel log line with ``<img src=...>`` or ``[link](...)`` must show as text in a
rendered pull request, not as HTML.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..config.report_schema import ReportConfig
from ..findings.canonical import display, report_groups, verdict_of
from ..findings.model import ClusterReport, CostBenefit, HealthAssessment, HealthScores, Recommendation, Trend
from .advice import URGENCIES, cost_benefit, recommendations_by_urgency
from .assessment import assessment_of, component_order, node_specs, pair_latencies
from .conclusion import conclusion, error_classes, network_review, optimization, trend_analysis
from .connectivity import MATRIX_MAX_NODES, reachability_markdown
from .markdown_sections import (
    MATRIX_COLUMNS,
    conclusion_section,
    errors_section,
    gpu_memory_section,
    infrastructure_section,
    network_review_section,
    services_section,
    software_stack_section,
    trend_section,
)
from .markdown_sections import cell as _cell
from .markdown_sections import row as _row
from .markdown_sections import score as _score
from .markdown_sections import table as _table
from .reporters import reporter
from .review import gpu_memory, header_facts, infrastructure, service_matrix, software_stack
from .scores import compute_scores

_ORDER = {"FAIL": 0, "ERROR": 1, "WARN": 2, "SKIP": 3, "PASS": 4}
URGENCY_TITLES = {"immediate": "Immediate: before the next job", "short_term": "Short term: within 1-2 weeks",
                  "monitoring": "Monitoring"}
MAX_SUBJECTS = 6


def _num(value: Any, digits: int = 4) -> str:
    return "—" if value is None else f"{float(value):.{digits}g}"


def _who(subjects: Sequence[str], count: int) -> str:
    shown = ", ".join(subjects[:MAX_SUBJECTS])
    more = max(count, len(subjects)) - min(len(subjects), MAX_SUBJECTS)
    return f"{shown} and {more} more" if more > 0 else shown


def _summary(scores: HealthScores, assessment: HealthAssessment) -> list[str]:
    overall = scores.overall
    trend = assessment.trends.get("overall")
    lines = ["## Executive summary", "",
             f"**Overall health score: {_score(overall.score)} ({overall.rating or 'NOT TESTED'})**"
             f" · trend: {trend.trend if trend else 'no history'}", ""]
    if overall.cap is not None:
        lines += [f"Capped from {overall.cap.mean:.0f}: {_cell(overall.cap.why)}.", ""]
    for gap in overall.incomplete or []:
        lines.append(f"- Incomplete: {_cell(gap.title)}: {_cell(gap.missing)}.")
    ready = assessment.readiness
    lines += [f"- Development/testing: **{ready.development.status}**",
              f"- Production: **{ready.production.status}**", ""]
    rows = []
    for name in component_order(scores.components):
        comp = scores.components[name]
        rows.append((comp.title, _score(comp.score), comp.rating or "NOT TESTED",
                     _trend(assessment.trends.get(name))))
    return lines + _table(("Component", "Score", "Status", "Trend"), rows) + [""]


def _trend(entry: Trend | None) -> str:
    if entry is None:
        return "no history"
    if entry.change is None:
        return entry.trend
    return f"{entry.trend} ({entry.change:+g} vs {entry.baseline:g}, {entry.runs} run(s))"


def _nodes(specs: Mapping[str, Any], cfg: ReportConfig) -> list[str]:
    lines = ["## Node specifications", "",
             f"{specs['total_nodes']} node(s), {specs['total_gpus']} GPU(s), "
             f"{specs['total_gpu_memory_gb']:g} GB GPU memory in total.", ""]
    if not specs["listed"]:
        return [*lines, f"Per-node rows are listed up to report.detail_max_nodes ({cfg.detail_max_nodes}) nodes; "
                        "every node's section is in report.json.", ""]
    with_address = any(n["address"] for n in specs["nodes"])
    head = ["Node", *(["Address"] if with_address else []), "GPUs", "Model", "GPU memory", "Score", "Rating",
            "Worst finding"]
    rows = [(n["node"], *([n["address"] or "—"] if with_address else []), n["gpus"], ", ".join(n["models"]) or "—",
             f"{n['gpu_memory_gb']:g} GB", _score(n["score"]), n["rating"] or "NOT TESTED", n["worst"] or "—")
            for n in specs["nodes"]]
    note = [] if with_address else ["No node address is recorded in this report; nodes are named as the run saw "
                                    "them.", ""]
    return [*lines, *_table(head, rows), "", *note]


def _connectivity(report: ClusterReport, scores: HealthScores) -> list[str]:
    conn = scores.connectivity
    lines = ["## Connectivity", ""]
    if conn is None:
        lines += ["No link between two nodes was measured.", ""]
    elif len(conn.nodes) <= MATRIX_MAX_NODES and conn.cells is not None:
        lines += [f"Node-pair bandwidth, GB/s (source: {_cell(conn.source)}; · not measured):", ""]
        rows = []
        for name, cells in zip(conn.nodes, conn.cells, strict=True):
            rows.append((name, *("·" if c is None else
                                 f"{'failed' if c['gbps'] is None else format(c['gbps'], '.3g')} {c['status']}"
                                 for c in cells)))
        lines += [*_table(("Node", *conn.nodes), rows), ""]
    else:
        bad = [p for p in conn.pairs if p["status"] != "PASS"]
        lines += [f"{len(conn.pairs)} node pairs measured (source: {_cell(conn.source)}); {len(bad)} not PASS.",
                  ""]
        if bad:
            lines += [*_table(("Node", "Node", "GB/s", "Status"), [
                (p["a"], p["b"], "failed" if p["gbps"] is None else format(p["gbps"], ".3g"), p["status"])
                for p in bad]), ""]
    latency = pair_latencies(report)
    if latency:
        lines += ["Latency per node pair (fi_pingpong, smallest message):", "",
                  *_table(("Server", "Client", "Provider", "Message", "Latency", "Status"), [
                      (p["a"], p["b"], p["provider"] or "—", f"{p['size_bytes']} B", f"{p['latency_us']:g} µs",
                       p["status"] or "not judged") for p in latency]), ""]
    else:
        lines += ["Latency: not measured (no fi_pingpong pair in this report).", ""]
    return [*lines, *reachability_markdown(report)]


def _stability(assessment: HealthAssessment) -> list[str]:
    rows = [(s.series, s.n, f"{_num(s.mean)} {s.unit}".strip(), f"{_num(s.min)}-{_num(s.max)}", _num(s.std_dev, 3),
             f"{100 * float(s.cv):.1f}%", s.slowest, f"{float(s.points):g}" if s.counted else "—")
            for s in assessment.stability]
    if not rows:
        return ["## Performance stability", "", "Not measured: needs GEMM on two or more GPUs, node-local "
                "collectives on two or more nodes, or node-to-node exchanges.", ""]
    return ["## Performance stability", "", *_table(
        ("Measurement", "n", "Mean", "Range", "Std dev", "CV", "Slowest", "Points"), rows), ""]


def _issues(assessment: HealthAssessment) -> list[str]:
    found = assessment.issues
    if not found:
        return ["## Issues", "", "None: nothing warns, fails or could not be measured.", ""]
    rows = [(i.priority, i.status, i.check_id or i.component, i.summary, f"{i.title}: {i.impact}",
             _who(i.subjects, i.count)) for i in found]
    return ["## Issues", "", *_table(("Priority", "Status", "Check", "Issue", "Impact", "Subjects"), rows), ""]


def _recommendations(recs: Mapping[str, Sequence[Recommendation]], cost: CostBenefit) -> list[str]:
    lines = ["## Recommendations", ""]
    for urgency in URGENCIES:
        entries = recs.get(urgency) or []
        lines += [f"### {URGENCY_TITLES[urgency]} ({len(entries)})", ""]
        if not entries:
            lines += ["Nothing.", ""]
            continue
        for e in entries:
            who = _who(e.subjects, e.count)
            lines.append(f"- **{_cell(e.recommendation)}** ({_cell(e.check_id or e.component)}: "
                         f"{_cell(e.summary)}{' — ' + _cell(who) if who else ''})")
        lines.append("")
    return [*lines, f"Cost-benefit: {_cell(cost.line)}", ""]


def _targets(assessment: HealthAssessment) -> list[str]:
    t = assessment.targets
    rows = []
    for r in t.components:
        if r.target is None:
            rows.append((r.title, "—", "—", "—", f"test it ({r.by[0]})"))
        else:
            rows.append((r.title, _score(r.score), _score(r.target), f"{r.change:+g}", ", ".join(r.by) or "keep"))
    o = t.overall
    rows.append(("Overall", _score(o.score), _score(o.target), "—" if o.change is None else f"{o.change:+g}",
                 o.rating or "—"))
    return [f"## Target scores ({t.days} days)", "",
            *_table(("Component", "Now", "Target", "Change", "By fixing"), rows), ""]


def _readiness(assessment: HealthAssessment, optimize: Mapping[str, str]) -> list[str]:
    lines = ["## Readiness assessment", ""]
    ready = assessment.readiness
    for entry, title in ((ready.development, "Development/testing"), (ready.production, "Production")):
        lines.append(f"- **{title}: {entry.status}**")
        lines += [f"  - {_cell(reason)}" for reason in entry.reasons]
    lines += [f"- **Optimization: {optimize['status']}**", f"  - {_cell(optimize['reason'])}"]
    return [*lines, ""]


def _schedule(assessment: HealthAssessment) -> list[str]:
    s = assessment.schedule
    rows = [(i.when, i.what, f"`{i.command}`") for i in s.items]
    lines = ["## Monitoring schedule", "", _row("When", "What", "Command"), "|---|---|---|"]
    lines += ["| " + " | ".join((_cell(w), _cell(x), c)) + " |" for w, x, c in rows]
    when = s.next_assessment or "unknown (no run timestamp)"
    return [*lines, "", f"**Next assessment:** {when} ({s.days:g} days after this run, {s.setting}).", ""]


@reporter("md", typed=True)
def render_markdown(report: ClusterReport, config: ReportConfig | None = None) -> str:
    """The assessment of a typed report (:func:`~gpu_preflight.report.render` hands the JSON dict
    over as :meth:`ClusterReport.of` reads it), the score, advice and assessment helpers included."""
    cfg = config or ReportConfig()
    summary = report.cluster_summary
    topo = report.cluster_info.cluster_topology
    verdict = verdict_of(report)
    scores = summary.health_scores or compute_scores(report, cfg)
    recs = summary.recommendations_by_urgency or recommendations_by_urgency(report, scores)
    cost = summary.cost_benefit or cost_benefit(report, scores, cfg)
    assessment = assessment_of(report, scores, recs, cfg)
    head = header_facts(report)
    specs = node_specs(report, cfg)
    optimize = optimization(scores, cfg)
    lines = [
        f"# gpu-preflight report: {verdict.label}",
        "",
        "Infrastructure health assessment.",
        "",
        f"- Generated: {_cell(report.timestamp)}",
        f"- Updated: {_cell(head['updated'] or 'unknown (no timestamp)')}",
        f"- Assessment type: {head['assessment_type']} ({len(head['groups_judged'])} of "
        f"{len(head['groups_judged']) + len(head['groups_not_tested'])} test groups judged)",
        f"- Nodes: {topo.total_nodes}, GPUs per node: {topo.gpus_per_node}",
        f"- Tool: gpu-preflight {_cell(report.tool.version or '?')}, schema {_cell(report.schema_version or None)}",
        f"- Exit code: {verdict.exit_code} ({verdict.word})",
        "",
        *_summary(scores, assessment),
        *infrastructure_section(infrastructure(report, scores)),
        *_nodes(specs, cfg),
        *software_stack_section(software_stack(report, cfg), cfg.detail_max_nodes),
        *_connectivity(report, scores),
        *network_review_section(network_review(report, scores)),
        *gpu_memory_section(gpu_memory(report, specs, scores)),
        *services_section(service_matrix(report, MATRIX_COLUMNS)),
        *_stability(assessment),
        *_issues(assessment),
        *errors_section(error_classes(assessment, scores)),
        *_recommendations(recs, cost),
        *trend_section(trend_analysis(scores, assessment)),
        *_targets(assessment),
        *_readiness(assessment, optimize),
        *_schedule(assessment),
        *conclusion_section(conclusion(scores, assessment, optimize, verdict)),
        "## Test results",
        "",
        "| Group | Result |",
        "|---|---|",
    ]
    groups = report_groups(report)
    for name, status in groups.items():
        lines.append(f"| {name} | {'not tested' if status is None else status.value} |")
    lines += ["", "## Findings", "", "| Status | Check | Subject | Observed | Expected | Summary | Recommendation |",
              "|---|---|---|---|---|---|---|"]
    for f in sorted(report.findings, key=lambda f: (_ORDER[f.status.value], f.check_id, f.subject)):
        lines.append("| " + " | ".join(_cell(c) for c in (
            f.status.value, f.check_id, f.subject, display(f.observed, f.unit), display(f.expected, f.unit),
            f.summary, f.recommendation or "")) + " |")
    if report.artifacts:
        lines += ["", "## Artifacts", ""] + [f"- {_cell(a['name'])}: {_cell(a['path'])}" for a in report.artifacts]
    lines += ["", "```", verdict.line, "```", ""]
    return "\n".join(lines)
