"""One self-contained HTML file a team can attach to a ticket, mail, or open offline years later.

Everything is inline — CSS, SVG charts drawn in Python, and a few lines of script that only
toggle passing rows and filter the node table — and the page holds no URL, so it renders
the same on an air-gapped laptop. It renders from the report alone (the typed
:class:`~.model.ClusterReport`, or its JSON dict read through ``ClusterReport.of``); scores
and advice are computed here when an older report lacks them.

It stays readable and small at any scale (a few MB at 10,000 nodes, where a page of every
cell was 110 MB): up to :data:`GRID_MAX_NODES` nodes it draws the node x check grid; above,
the findings per check with every status counted, and a searchable table of the nodes that
have a WARN, FAIL or ERROR, the nodes that passed summarised in one line. Failures and
warnings are always on the page: in full up to :data:`MAX_GROUP_ROWS` rows of one check,
cause and status, the further subjects of that cause named in one row. Measurements are
drawn as distributions once they outgrow one mark per member (:mod:`.html_plots`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from ..config.report_schema import ReportConfig
from ..findings.canonical import display, verdict_of
from ..findings.model import (
    ClusterInfo,
    ClusterReport,
    Connectivity,
    CostBenefit,
    HealthScores,
    Recommendation,
    ReportFinding,
)
from ..model import Status
from .advice import URGENCIES, cost_benefit, recommendations_by_urgency
from .connectivity import MATRIX_MAX_NODES
from .html_assessment import assessment_sections
from .html_plots import plots
from .reporters import reporter
from .review import NodeRows, header_facts
from .scores import compute_scores
from .svg import STATUS_COLORS

__all__ = ["render_html"]

MAX_QUIET_ROWS = 2000
GRID_MAX_NODES = 64  # nodes drawn as rows of the node x check grid; above, the node table
MAX_GROUP_ROWS = 100  # problem rows of one check, code and status shown in full; the rest are named
_WATCH = "#607d8b"
_ORDER = {"FAIL": 0, "ERROR": 1, "WARN": 2, "SKIP": 3, "PASS": 4}
_RATING_COLORS = {"EXCELLENT": "#2e7d32", "GOOD": "#558b2f", "MODERATE": "#e0a800", "CRITICAL": "#c62828"}
_URGENCY_TITLES = {"immediate": "Immediate (before the job starts)", "short_term": "Short term",
                   "monitoring": "Monitoring"}
_HEADLINE = {"PASS": "ready for distributed training", "SKIP": "nothing was checked",
             "WARN": "usable, with warnings", "ERROR": "could not be fully checked", "FAIL": "not ready"}
_GATED_HEADLINE = "not ready: warnings fail this run (--fail-on warn)"

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#f6f7f9}
main{max-width:1320px;margin:0 auto;padding:0 20px 40px}
.banner{color:#fff;padding:18px 24px}.banner h1{margin:0 0 4px;font-size:26px}.banner p{margin:2px 0}
nav{background:#fff;border-bottom:1px solid #ddd;padding:8px 24px}nav a{margin-right:16px;color:#1565c0}
section{background:#fff;border:1px solid #e0e0e0;border-radius:6px;margin:18px 0;padding:12px 18px}
h2{font-size:18px;margin:4px 0 10px}h3{font-size:15px;margin:12px 0 6px}
.cards{display:flex;flex-wrap:wrap;gap:12px}.card{border:1px solid #ddd;border-radius:6px;padding:10px 12px;
width:230px}.card.overall{width:250px;border-width:2px}.score{font-size:30px;font-weight:700}
.meter{height:8px;background:#eee;border-radius:4px;overflow:hidden}.meter span{display:block;height:100%}
.rating{font-weight:700}.muted{color:#777}.small{font-size:12px}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #eee;padding:4px 6px;text-align:left;
vertical-align:top}th{background:#fafafa}
.st{display:inline-block;min-width:44px;text-align:center;border-radius:3px;color:#fff;font-weight:600;
font-size:12px;padding:1px 4px}
.grid{overflow-x:auto}.grid table{width:auto}.grid th.v{writing-mode:vertical-rl;transform:rotate(180deg);
font-weight:500;font-size:12px;white-space:nowrap;padding:4px 2px}.grid td.c{width:18px;height:18px;
padding:0;border:1px solid #fff}.grid td.n{white-space:nowrap;font-weight:600}
.rec{border-left:4px solid #999;padding:4px 10px;margin:6px 0;background:#fbfbfb}
.charts{display:flex;flex-wrap:wrap;gap:14px}.chart{background:#fff;border:1px solid #eee}
.chart .ct{font-weight:600;font-size:13px}.chart .cl{font-size:11px;fill:#555}.chart .tk{font-size:10px;fill:#555}
.chart .lg{font-size:10px;fill:#333}.chart .grid{stroke:#eee}
table.matrix{width:auto}.matrix td{text-align:center;font-size:12px;min-width:60px}
code{background:#f0f0f0;padding:0 3px;border-radius:3px}.banner code{background:rgba(0,0,0,.25);color:#fff}
"""

SCRIPT = """
document.getElementById('show-pass').addEventListener('change', function (e) {
  document.querySelectorAll('tr.quiet').forEach(function (row) { row.hidden = !e.target.checked; });
});
var filter = document.getElementById('node-filter');
if (filter) {
  filter.addEventListener('input', function () {
    var words = filter.value.toLowerCase().split(/\\s+/).filter(Boolean);
    document.querySelectorAll('#node-table tr.nr').forEach(function (row) {
      var text = row.textContent.toLowerCase();
      row.hidden = !words.every(function (w) { return text.indexOf(w) >= 0; });
    });
  });
}
"""


def _badge(status: str) -> str:
    return f'<span class="st" style="background:{STATUS_COLORS.get(status, "#999")}">{escape(status)}</span>'


def _banner(report: ClusterReport) -> str:
    """The badge: status, headline and ``[RESULT]`` line, all from :func:`verdict_of` (as the exit code is).

    A report without ``cluster_info`` (an older or trimmed one) reads as :meth:`ClusterInfo.empty`;
    the node count then comes from its node sections."""
    verdict = verdict_of(report)
    status = verdict.status.value
    headline = _GATED_HEADLINE if verdict.gated else _HEADLINE.get(status, "")
    info, topo = report.cluster_info, report.cluster_info.cluster_topology
    known = info != ClusterInfo.empty()
    total = topo.total_nodes if known else len(report.nodes)
    gpus = sum(map(len, report.nodes.blocks("gpu")))
    counts = ", ".join(f"{v} {k}" for k, v in report.cluster_summary.counts.items() if v)
    color = STATUS_COLORS["FAIL"] if verdict.gated else STATUS_COLORS.get(status, "#555")
    head = header_facts(report)
    return (f'<header class="banner" style="background:{color}" data-exit-code="{verdict.exit_code}">'
            f'<h1><span id="verdict">{escape(status)}</span>: {escape(headline)}</h1>'
            f'<p><code id="result">{escape(verdict.line)}</code></p>'
            f"<p>{escape(report.timestamp)} · {total}"
            f" node(s), {gpus} GPU(s), world size {topo.world_size}, launcher "
            f"{escape(topo.launcher)} · data {escape(info.data_completeness if known else '?')}"
            f" · {escape(counts)}</p><p class=\"small\" id=\"assessment-type\">Updated "
            f"{escape(head['updated'] or 'unknown')} · assessment type: {escape(head['assessment_type'])} "
            f"({len(head['groups_judged'])} of {len(head['groups_judged']) + len(head['groups_not_tested'])} test "
            f"groups judged)</p><p class=\"small\">gpu-preflight {escape(report.tool.version or '?')}, "
            f"schema {escape(report.schema_version or '?')}</p></header>")


def _card(title: str, score: float | None, rating: str | None, body: str, extra_class: str = "") -> str:
    color = _RATING_COLORS.get(rating or "", "#999")
    shown = f"{score:.0f}<span class=\"muted small\">/100</span>" if score is not None else "—"
    width = f"{score:.0f}" if score is not None else "0"
    return (f'<div class="card {extra_class}"><div>{escape(title)}</div><div class="score">{shown}</div>'
            f'<div class="meter"><span style="width:{width}%;background:{color}"></span></div>'
            f'<div class="rating" style="color:{color}">{escape(rating or "NOT TESTED")}</div>{body}</div>')


def _scores(scores: HealthScores) -> str:
    overall = scores.overall
    cap = overall.cap
    body = f'<div class="small muted">capped from {cap.mean:.0f}: {escape(cap.why)}</div>' if cap else ""
    cards = [_card("Overall", overall.score, overall.rating, body, "overall")]
    for comp in scores.components.values():
        items = []
        for d in comp.deductions:
            what = (f"{escape(d.check_id)} <code>{escape(d.code or '')}</code> {escape(d.status or '')}"
                    f" ×{d.count}: {escape(', '.join(d.subjects or []))}") if d.check_id is not None else \
                f"{escape(d.series or '')}: dispersion {100 * (d.dispersion or 0.0):.1f}% " \
                f"(slowest {escape(d.slowest or '')})"
            items.append(f"<li>−{d.points:g}: {what}</li>")
        if items:
            body = f'<details><summary class="small">what lowered it</summary><ul class="small">{"".join(items)}' \
                   f"</ul></details>"
        else:
            body = f'<div class="small muted">{escape(comp.reason or "nothing lowered it")}</div>'
        cards.append(_card(comp.title, comp.score, comp.rating, body))
    return (f'<section id="scores"><h2>Health scores</h2><div class="cards">{"".join(cards)}</div>'
            f'<p class="small muted">How the scores are computed: {escape(scores.formula)}.</p></section>')


def _recommendations(recs: Mapping[str, Sequence[Recommendation]], cost: CostBenefit) -> str:
    parts = [f'<section id="recommendations"><h2>Recommendations</h2><p id="cost"><b>Cost-benefit:</b> '
             f"{escape(cost.line)}</p>"]
    for urgency in URGENCIES:
        entries = recs.get(urgency) or []
        parts.append(f"<h3>{_URGENCY_TITLES[urgency]} ({len(entries)})</h3>")
        if not entries:
            parts.append('<p class="muted small">nothing</p>')
        for e in entries:
            color = STATUS_COLORS.get(e.status, "#999") if urgency != "monitoring" else _WATCH
            badge = _badge(e.status) if urgency != "monitoring" else \
                f'<span class="st" style="background:{_WATCH}">WATCH</span>'
            who = ", ".join(e.subjects[:12]) + (f" and {len(e.subjects) - 12} more" if len(e.subjects) > 12 else "")
            parts.append(f'<div class="rec" style="border-color:{color}">{badge} '
                         f"<b>{escape(e.recommendation)}</b><br><span class=\"small\">"
                         f"{escape(e.check_id or e.component)}: {escape(e.summary)}"
                         f"{' — ' + escape(who) if who else ''}</span></div>")
    parts.append("</section>")
    return "".join(parts)


def _grid(report: ClusterReport) -> str:
    rows_of = NodeRows(report)
    names = rows_of.names
    if len(names) > GRID_MAX_NODES:
        return _node_table(report, rows_of)
    cells: dict[tuple[str, str], list[ReportFinding]] = {}
    for f in report.findings:
        cells.setdefault((rows_of.of(f), f.check_id), []).append(f)
    checks = sorted({c for _, c in cells})
    rows = list(dict.fromkeys(names + sorted({r for r, _ in cells if r not in rows_of.known})))
    head = "".join(f'<th class="v">{escape(c)}</th>' for c in checks)
    body = []
    for row in rows:
        tds = []
        for c in checks:
            found = cells.get((row, c))
            if not found:
                tds.append('<td class="c" style="background:#f3f3f3" title="not run here"></td>')
                continue
            worst = Status.worst(f.status for f in found).value
            tip = "; ".join(f"{f.status.value} {f.subject}: {f.summary}" for f in found[:6])
            tds.append(f'<td class="c" style="background:{STATUS_COLORS[worst]}" title="{escape(c)} — '
                       f'{escape(tip)}"></td>')
        body.append(f'<tr><td class="n">{escape(row)}</td>{"".join(tds)}</tr>')
    legend = " ".join(_badge(s.value) for s in Status)
    return (f'<section id="grid"><h2>Node × check status</h2><p class="small">{legend} · grey: not run; hover a '
            f'cell for its findings</p><div class="grid"><table><tr><th></th>{head}</tr>{"".join(body)}</table>'
            f"</div></section>")


def _check_counts(report: ClusterReport) -> str:
    """Every check with its findings counted per status: the listed ones and those the nodes of
    a large cluster kept to themselves (``cluster_summary.unlisted``)."""
    counts: dict[str, dict[str, int]] = {}
    for f in report.findings:
        by = counts.setdefault(f.check_id, {})
        by[f.status.value] = by.get(f.status.value, 0) + 1
    for check_id, unlisted in (report.cluster_summary.unlisted or {}).items():
        by = counts.setdefault(check_id, {})
        for status, n in unlisted.items():
            by[status] = by.get(status, 0) + int(n)
    order = [s.value for s in sorted(Status, key=lambda s: _ORDER[s.value])]
    rows = []
    for check_id, by in sorted(counts.items(), key=lambda kv: (min(_ORDER[s] for s in kv[1]), kv[0])):
        cells = "".join(f"<td>{by[s]:,}</td>" if by.get(s) else "<td></td>" for s in order)
        rows.append(f"<tr><td>{escape(check_id)}</td>{cells}</tr>")
    head = "".join(f"<th>{_badge(s)}</th>" for s in order)
    return (f'<h3>Findings per check</h3><table id="check-counts"><tr><th>Check</th>{head}</tr>{"".join(rows)}'
            f"</table>")


def _node_table(report: ClusterReport, rows_of: NodeRows) -> str:
    """Large clusters: the nodes with a WARN, FAIL or ERROR (every one, searchable), the rest counted."""
    problems: dict[str, dict[str, str]] = {}  # node -> check id -> worst status
    for f in report.findings:
        status = f.status.value
        if status in ("PASS", "SKIP"):
            continue
        checks = problems.setdefault(rows_of.of(f), {})
        current = checks.get(f.check_id)
        if current is None or _ORDER[status] < _ORDER[current]:
            checks[f.check_id] = status
    nodes = len(rows_of.names)
    bad = [n for n in problems if n != "cluster"]
    rows = []
    for node, checks in sorted(problems.items(), key=lambda kv: (min(_ORDER[s] for s in kv[1].values()), kv[0])):
        worst = min(checks.values(), key=_ORDER.__getitem__)
        listed = ", ".join(f"{escape(c)} ({s})" for c, s in sorted(checks.items(), key=lambda kv: (_ORDER[kv[1]],
                                                                                                   kv[0])))
        rows.append(f'<tr class="nr"><td>{_badge(worst)}</td><td class="n">{escape(node)}</td><td>{len(checks)}'
                    f"</td><td>{listed}</td></tr>")
    clean = nodes - len(bad)
    table = (f'<p><input type="search" id="node-filter" placeholder="filter: node name, check id or status" '
             f'size="40"></p><table id="node-table"><tr><th>Worst</th><th>Node</th><th>Checks</th>'
             f'<th>Checks with a WARN, FAIL or ERROR</th></tr>{"".join(rows)}</table>') if rows else ""
    return (f'<section id="grid"><h2>Nodes</h2><p id="node-summary"><b>{clean:,} of {nodes:,} nodes</b> have no WARN, '
            f"FAIL or ERROR finding; {len(bad):,} have at least one (each below, with the checks that found it)."
            f'</p>{table}{_check_counts(report)}</section>')


def _pair_list(conn: Connectivity) -> str:
    """Large clusters: the N x N grid would be mostly empty and huge, so list the pairs that were not fine."""
    bad = sorted((p for p in conn.pairs if p["status"] != "PASS"), key=lambda p: (_ORDER[p["status"]], p["a"]))
    rows = "".join(f"<tr><td>{_badge(p['status'])}</td><td>{escape(p['a'])}</td><td>{escape(p['b'])}</td>"
                   f"<td>{'failed' if p['gbps'] is None else format(p['gbps'], '.3g')}</td></tr>" for p in bad)
    return (f'<section id="connectivity"><h2>Connectivity ({len(conn.pairs)} node pairs measured, source: '
            f'{escape(conn.source)})</h2><p class="small">{len(bad)} pair(s) not PASS; every pair is in '
            f"report.json under cluster_summary.health_scores.connectivity.</p><table><tr><th>Status</th><th>Node"
            f"</th><th>Node</th><th>GB/s</th></tr>{rows}</table></section>")


def _matrix(conn: Connectivity | None) -> str:
    if conn is None:
        return ""
    nodes = conn.nodes
    if len(nodes) > MATRIX_MAX_NODES or conn.cells is None:
        return _pair_list(conn)
    head = "".join(f"<th>{escape(n)}</th>" for n in nodes)
    rows = []
    for i, name in enumerate(nodes):
        tds = []
        for cell in conn.cells[i]:
            if cell is None:
                tds.append('<td class="muted">·</td>')
            else:
                gbps = f"{cell['gbps']:.3g}" if cell["gbps"] is not None else "failed"
                tds.append(f'<td style="background:{STATUS_COLORS.get(cell["status"], "#999")};color:#fff">'
                           f"{gbps}</td>")
        rows.append(f"<tr><th>{escape(name)}</th>{''.join(tds)}</tr>")
    return (f'<section id="connectivity"><h2>Connectivity matrix (GB/s, source: {escape(conn.source)})</h2>'
            f'<div class="grid"><table class="matrix"><tr><th></th>{head}</tr>{"".join(rows)}</table></div>'
            f'<p class="small muted">· not measured</p></section>')


def _plots(report: ClusterReport) -> str:
    groups = plots(report)
    if not groups:
        return '<section id="plots"><h2>Measurements</h2><p class="muted">No workload measurements in this report ' \
               "(a node-only run).</p></section>"
    body = "".join(f'<h3>{escape(title)}</h3><div class="charts">{"".join(charts)}</div>'
                   for title, charts in groups.items())
    return f'<section id="plots"><h2>Measurements</h2>{body}</section>'


def _row(f: ReportFinding, quiet: bool) -> str:
    return (f'<tr class="{"quiet" if quiet else "loud"}"{" hidden" if quiet else ""}><td>{_badge(f.status.value)}'
            f"</td><td>{escape(f.check_id)}</td><td>{escape(str(f.subject))}</td>"
            f"<td>{escape(display(f.observed, f.unit))}</td>"
            f"<td>{escape(display(f.expected, f.unit))}</td><td>{escape(f.summary)}</td>"
            f"<td>{escape(f.recommendation or '')}</td></tr>")


def _findings(report: ClusterReport) -> str:
    """Every problem; passes and skips up to :data:`MAX_QUIET_ROWS` (a thousand-node run has hundreds of
    thousands of them, and they are all in report.json).

    Past :data:`MAX_GROUP_ROWS` problems of one check, code and status (one cause on every GPU
    of a large cluster), the rest of them are named in one row, subjects only: each is on the
    page, and its values are in report.json.
    """
    rows, quiet_rows = [], 0
    rest: list[str] = []
    group: tuple[str, str, str] | None = None
    shown = 0

    def flush() -> None:
        if rest and group is not None:
            rows.append(f'<tr class="loud more"><td>{_badge(group[0])}</td><td>{escape(group[1])}</td>'
                        f'<td colspan="5">{len(rest):,} more ({escape(group[2] or "same cause")}): '
                        f"{escape(', '.join(rest))}</td></tr>")
        rest.clear()

    for f in sorted(report.findings, key=lambda f: (_ORDER[f.status.value], f.check_id, f.code or "", f.subject)):
        quiet = f.status.value in ("PASS", "SKIP")
        if not quiet:
            key = (f.status.value, f.check_id, f.code or "")
            if key != group:
                flush()
                group, shown = key, 0
            shown += 1
            if shown > MAX_GROUP_ROWS:
                rest.append(str(f.subject))
                continue
        else:
            flush()
            group = None
            quiet_rows += 1
            if quiet_rows > MAX_QUIET_ROWS:
                continue
        rows.append(_row(f, quiet))
    flush()
    more = f" ({quiet_rows - MAX_QUIET_ROWS} more in report.json)" if quiet_rows > MAX_QUIET_ROWS else ""
    return (f'<section id="findings"><h2>Findings</h2><label><input type="checkbox" id="show-pass"> show PASS and '
            f"SKIP{more}</label><table><tr><th>Status</th><th>Check</th><th>Subject</th><th>Observed</th><th>Expected</th>"
            f'<th>Summary</th><th>Recommendation</th></tr>{"".join(rows)}</table></section>')


@reporter("html", typed=True)
def render_html(report: ClusterReport, config: ReportConfig | None = None) -> str:
    """The whole page for a report, typed or its JSON dict (node-only or cluster run): every
    section, the score, advice, assessment and plot helpers included, reads the typed report."""
    cfg = config or ReportConfig()
    typed = report
    summary = typed.cluster_summary
    scores = summary.health_scores or compute_scores(typed, cfg)
    recs = summary.recommendations_by_urgency or recommendations_by_urgency(typed, scores)
    cost = summary.cost_benefit or cost_benefit(typed, scores, cfg)
    nav = "".join(f'<a href="#{a}">{t}</a>' for a, t in (("scores", "Scores"), ("recommendations", "Recommendations"),
                                                        ("assessment", "Assessment"), ("node-specs", "Node specs"),
                                                        ("software-stack", "Software"),
                                                        ("conclusion", "Conclusion"),
                                                        ("grid", "Nodes"), ("plots", "Measurements"),
                                                        ("findings", "Findings")))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>gpu-preflight: {escape(verdict_of(typed).label)}</title><style>{CSS}</style></head><body>"
            f"{_banner(typed)}<nav>{nav}</nav><main>{_scores(scores)}{_recommendations(recs, cost)}"
            f"{assessment_sections(typed, scores, recs, cfg)}{_grid(typed)}"
            f"{_matrix(scores.connectivity)}{_plots(typed)}{_findings(typed)}</main>"
            f"<script>{SCRIPT}</script></body></html>\n")
