"""The HTML page's health-assessment sections, from the same :mod:`.assessment` as the Markdown.

Readiness (development, production, optimization), component trends, score targets, the
health-trend analysis and the schedule; the infrastructure overview, error classification,
software stack, network strengths and concerns, GPU memory and the conclusion
(:mod:`.html_review`); node specifications (one row
per node up to ``report.detail_max_nodes``, totals above); latency per node pair and the
name-resolution and reachability matrix beside the page's bandwidth matrix; performance stability; issues
with impact and priority. Compact tables only: the page must stay small at 10,000 nodes,
so nothing here grows with the node count past ``detail_max_nodes`` except the issue rows,
which are grouped by check, code and advice (one row per cause, not per subject).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from ..config.report_schema import ReportConfig
from ..findings.canonical import verdict_of
from ..findings.model import ClusterReport, HealthAssessment, HealthScores, Readiness, Recommendation
from .assessment import NEEDS_FIXES, READY, assessment_of, component_order, node_specs, pair_latencies
from .conclusion import conclusion, error_classes, network_review, optimization, trend_analysis
from .connectivity import reachability_html
from .html_review import (
    conclusion_html,
    errors_html,
    gpu_memory_html,
    infrastructure_html,
    network_review_html,
    software_stack_html,
    trend_html,
)
from .html_review import score as _score
from .html_review import table as _table
from .html_review import td as _td
from .review import gpu_memory, infrastructure, software_stack
from .svg import STATUS_COLORS

__all__ = ["assessment_sections"]

MAX_SUBJECTS = 6
MAX_LATENCY_ROWS = 200
_READY_COLORS = {READY: STATUS_COLORS["PASS"], NEEDS_FIXES: STATUS_COLORS["FAIL"], "TUNED": STATUS_COLORS["PASS"],
                 "NOT MEASURED": "#777"}


def _num(value: Any) -> str:
    return "—" if value is None else f"{float(value):.4g}"


def _who(subjects: Sequence[str], count: int) -> str:
    more = max(count, len(subjects)) - min(len(subjects), MAX_SUBJECTS)
    shown = ", ".join(subjects[:MAX_SUBJECTS])
    return f"{shown} and {more} more" if more > 0 else shown


def _readiness(assessment: HealthAssessment, optimize: Mapping[str, str]) -> str:
    parts = []
    ready = assessment.readiness
    levels = [("development", "Development/testing", ready.development), ("production", "Production", ready.production),
              ("optimization", "Optimization", Readiness(status=optimize["status"], reasons=[optimize["reason"]]))]
    for level, title, entry in levels:
        color = _READY_COLORS.get(entry.status, STATUS_COLORS["WARN"])
        reasons = "".join(f"<li>{escape(r)}</li>" for r in entry.reasons)
        parts.append(f'<div class="card" id="readiness-{level}"><div>{title}</div>'
                     f'<div class="rating" style="color:{color}">{escape(entry.status)}</div>'
                     f'<ul class="small">{reasons}</ul></div>')
    return f'<h3>Readiness</h3><div class="cards">{"".join(parts)}</div>'


def _components(scores: HealthScores, assessment: HealthAssessment) -> str:
    targets = {t.component: t for t in assessment.targets.components}
    rows = []
    for name in component_order(scores.components):
        comp, trend, target = scores.components[name], assessment.trends.get(name), targets.get(name)
        change = "" if trend is None or trend.change is None else f" ({trend.change:+g} vs {trend.baseline:g})"
        rows.append(_td(comp.title, _score(comp.score), comp.rating or "NOT TESTED",
                        f"{trend.trend if trend else 'no history'}{change}", _score(target.target if target else None),
                        ", ".join(target.by if target else []) or "keep"))
    overall, t_overall, trend = scores.overall, assessment.targets.overall, assessment.trends.get("overall")
    rows.append(_td("Overall", _score(overall.score), overall.rating or "NOT TESTED",
                    trend.trend if trend else "no history", _score(t_overall.target), t_overall.rating or ""))
    days = assessment.targets.days
    return "<h3>Components, trends and targets</h3>" + _table(
        ("Component", "Score", "Status", "Trend", f"Target ({days} days)", "By fixing"), rows, "components")


def _schedule(assessment: HealthAssessment) -> str:
    s = assessment.schedule
    rows = [f"<tr><td>{escape(i.when)}</td><td>{escape(i.what)}</td><td><code>{escape(i.command)}</code>"
            f"</td></tr>" for i in s.items]
    when = s.next_assessment or "unknown (no run timestamp)"
    return (f"<h3>Monitoring schedule</h3>{_table(('When', 'What', 'Command'), rows)}"
            f'<p id="next-assessment"><b>Next assessment:</b> {escape(when)} ({s.days:g} days after this run, '
            f"{escape(s.setting)}).</p>")


def _nodes(specs: Mapping[str, Any], cfg: ReportConfig) -> str:
    head = (f"<p>{specs['total_nodes']:,} node(s), {specs['total_gpus']:,} GPU(s), "
            f"{specs['total_gpu_memory_gb']:,.6g} GB GPU memory in total.</p>")
    if not specs["listed"]:
        body = (f'<p class="small muted">One row per node up to report.detail_max_nodes ({cfg.detail_max_nodes}); '
                f"every node's section is in report.json.</p>")
    else:
        with_address = any(n["address"] for n in specs["nodes"])
        rows = [_td(n["node"], *([n["address"] or "—"] if with_address else []), n["gpus"],
                    ", ".join(n["models"]) or "—", f"{n['gpu_memory_gb']:g} GB", _score(n["score"]),
                    n["rating"] or "NOT TESTED", n["worst"] or "—") for n in specs["nodes"]]
        cols = ("Node", *(["Address"] if with_address else []), "GPUs", "Model", "GPU memory", "Score", "Rating",
                "Worst finding")
        note = "" if with_address else '<p class="small muted">No node address is recorded in this report.</p>'
        body = _table(cols, rows, "node-specs") + note
    return f'<section id="node-specs"><h2>Node specifications</h2>{head}{body}</section>'


def _latency(report: ClusterReport) -> str:
    found = pair_latencies(report)
    if found:
        rows = [_td(p["a"], p["b"], p["provider"] or "—", f"{p['size_bytes']} B", f"{p['latency_us']:g} µs",
                    p["status"] or "not judged") for p in found[:MAX_LATENCY_ROWS]]
        more = f'<p class="small muted">{len(found) - MAX_LATENCY_ROWS} more pairs in report.json.</p>' \
            if len(found) > MAX_LATENCY_ROWS else ""
        body = _table(("Server", "Client", "Provider", "Message", "Latency", "Status"), rows, "latency") + more
    else:
        body = '<p class="muted">Latency: not measured (no fi_pingpong pair in this report).</p>'
    return (f'<section id="latency"><h2>Latency and name resolution</h2>{body}'
            f'{reachability_html(report)}</section>')


def _stability(assessment: HealthAssessment) -> str:
    rows = [_td(s.series, s.n, f"{_num(s.mean)} {s.unit}".strip(), f"{_num(s.min)}-{_num(s.max)}", _num(s.std_dev),
                f"{100 * float(s.cv):.1f}%", s.slowest, f"{float(s.points):g}" if s.counted else "—")
            for s in assessment.stability]
    body = _table(("Measurement", "n", "Mean", "Range", "Std dev", "CV", "Slowest", "Points"), rows, "stability") \
        if rows else '<p class="muted">Not measured: needs GEMM on two or more GPUs, node-local collectives on two ' \
                     "or more nodes, or node-to-node exchanges.</p>"
    return f'<section id="stability"><h2>Performance stability</h2>{body}</section>'


def _issues(assessment: HealthAssessment) -> str:
    found = assessment.issues
    if not found:
        return '<section id="issues"><h2>Issues</h2><p class="muted">None: nothing warns, fails or could not be ' \
               "measured.</p></section>"
    rows = [f'<tr><td>{escape(i.priority)}</td><td><span class="st" style="background:'
            f'{STATUS_COLORS.get(i.status, "#999")}">{escape(i.status)}</span></td>'
            f"<td>{escape(str(i.check_id or i.component))}</td><td>{escape(i.summary)}</td>"
            f"<td>{escape(i.title)}: {escape(i.impact)}</td><td>{escape(_who(i.subjects, i.count))}</td></tr>"
            for i in found]
    return (f'<section id="issues"><h2>Issues</h2>'
            f"{_table(('Priority', 'Status', 'Check', 'Issue', 'Impact', 'Subjects'), rows, 'issue-table')}</section>")


def assessment_sections(report: ClusterReport, scores: HealthScores,
                        recs: Mapping[str, Sequence[Recommendation]], cfg: ReportConfig) -> str:
    """The assessment sections, in the page's order after the scores and recommendations."""
    assessment = assessment_of(report, scores, recs, cfg)
    specs = node_specs(report, cfg)
    optimize = optimization(scores, cfg)
    return (f'<section id="assessment"><h2>Assessment</h2>{_readiness(assessment, optimize)}'
            f"{_components(scores, assessment)}{trend_html(trend_analysis(scores, assessment))}"
            f"{_schedule(assessment)}</section>{infrastructure_html(infrastructure(report, scores))}"
            f"{_issues(assessment)}{errors_html(error_classes(assessment, scores))}{_nodes(specs, cfg)}"
            f"{software_stack_html(software_stack(report, cfg), cfg.detail_max_nodes)}{_latency(report)}"
            f"{network_review_html(network_review(report, scores))}{gpu_memory_html(gpu_memory(report, specs, scores))}"
            f"{_stability(assessment)}{conclusion_html(conclusion(scores, assessment, optimize, verdict_of(report)))}")
