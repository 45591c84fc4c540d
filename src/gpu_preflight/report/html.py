"""One self-contained HTML file a team can attach to a ticket, mail, or open offline years later.

Everything is inline — CSS, SVG charts drawn in Python, and a few lines of script that only
toggle passing rows — and the page holds no URL, so it renders the same on an air-gapped
laptop. It renders from the canonical report dict alone; scores and advice are computed
here when an older report lacks them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from html import escape
from typing import Any

from ..config.report_schema import ReportConfig
from ..model import Status
from .advice import URGENCIES, cost_benefit, recommendations_by_urgency
from .canonical import display, verdict_of
from .connectivity import MATRIX_MAX_NODES, node_names
from .html_plots import plots
from .scores import compute_scores
from .svg import STATUS_COLORS

__all__ = ["render_html"]

MAX_QUIET_ROWS = 2000
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
"""


def _badge(status: str) -> str:
    return f'<span class="st" style="background:{STATUS_COLORS.get(status, "#999")}">{escape(status)}</span>'


def _banner(report: Mapping[str, Any]) -> str:
    """The badge: status, headline and ``[RESULT]`` line, all from :func:`verdict_of` (as the exit code is)."""
    summary = report["cluster_summary"]
    verdict = verdict_of(report)
    status = verdict.status.value
    headline = _GATED_HEADLINE if verdict.gated else _HEADLINE.get(status, "")
    info = report.get("cluster_info") or {}
    topo = info.get("cluster_topology") or {}
    gpus = sum(len(s.get("gpu") or {}) for s in (report.get("nodes") or {}).values())
    counts = ", ".join(f"{v} {k}" for k, v in (summary.get("counts") or {}).items() if v)
    tool = report.get("tool") or {}
    color = STATUS_COLORS["FAIL"] if verdict.gated else STATUS_COLORS.get(status, "#555")
    return (f'<header class="banner" style="background:{color}" data-exit-code="{verdict.exit_code}">'
            f'<h1><span id="verdict">{escape(status)}</span>: {escape(headline)}</h1>'
            f'<p><code id="result">{escape(verdict.line)}</code></p>'
            f"<p>{escape(str(report.get('timestamp', '')))} · {topo.get('total_nodes', len(report.get('nodes') or {}))}"
            f" node(s), {gpus} GPU(s), world size {topo.get('world_size', 1)}, launcher "
            f"{escape(str(topo.get('launcher', 'none')))} · data {escape(str(info.get('data_completeness', '?')))}"
            f" · {escape(counts)}</p><p class=\"small\">gpu-preflight {escape(str(tool.get('version', '?')))}, "
            f"schema {escape(str(report.get('schema_version', '?')))}</p></header>")


def _card(title: str, score: float | None, rating: str | None, body: str, extra_class: str = "") -> str:
    color = _RATING_COLORS.get(rating or "", "#999")
    shown = f"{score:.0f}<span class=\"muted small\">/100</span>" if score is not None else "—"
    width = f"{score:.0f}" if score is not None else "0"
    return (f'<div class="card {extra_class}"><div>{escape(title)}</div><div class="score">{shown}</div>'
            f'<div class="meter"><span style="width:{width}%;background:{color}"></span></div>'
            f'<div class="rating" style="color:{color}">{escape(rating or "NOT TESTED")}</div>{body}</div>')


def _scores(scores: Mapping[str, Any]) -> str:
    overall = scores["overall"]
    cap = overall.get("cap")
    body = f'<div class="small muted">capped from {cap["mean"]:.0f}: {escape(cap["why"])}</div>' if cap else ""
    cards = [_card("Overall", overall["score"], overall["rating"], body, "overall")]
    for comp in scores["components"].values():
        items = []
        for d in comp["deductions"]:
            what = (f"{escape(d['check_id'])} <code>{escape(d['code'])}</code> {escape(d['status'])}"
                    f" ×{d['count']}: {escape(', '.join(d['subjects']))}") if "check_id" in d else \
                f"{escape(d['series'])}: dispersion {100 * d['dispersion']:.1f}% (slowest {escape(d['slowest'])})"
            items.append(f"<li>−{d['points']:g}: {what}</li>")
        if items:
            body = f'<details><summary class="small">what lowered it</summary><ul class="small">{"".join(items)}' \
                   f"</ul></details>"
        else:
            body = f'<div class="small muted">{escape(comp["reason"] or "nothing lowered it")}</div>'
        cards.append(_card(comp["title"], comp["score"], comp["rating"], body))
    return (f'<section id="scores"><h2>Health scores</h2><div class="cards">{"".join(cards)}</div>'
            f'<p class="small muted">How the scores are computed: {escape(scores.get("formula", ""))}.</p></section>')


def _recommendations(recs: Mapping[str, Any], cost: Mapping[str, Any]) -> str:
    parts = [f'<section id="recommendations"><h2>Recommendations</h2><p id="cost"><b>Cost-benefit:</b> '
             f"{escape(cost['line'])}</p>"]
    for urgency in URGENCIES:
        entries = recs.get(urgency) or []
        parts.append(f"<h3>{_URGENCY_TITLES[urgency]} ({len(entries)})</h3>")
        if not entries:
            parts.append('<p class="muted small">nothing</p>')
        for e in entries:
            color = STATUS_COLORS.get(e["status"], "#999") if urgency != "monitoring" else _WATCH
            badge = _badge(e["status"]) if urgency != "monitoring" else \
                f'<span class="st" style="background:{_WATCH}">WATCH</span>'
            who = ", ".join(e["subjects"][:12]) + (f" and {len(e['subjects']) - 12} more"
                                                   if len(e["subjects"]) > 12 else "")
            parts.append(f'<div class="rec" style="border-color:{color}">{badge} '
                         f"<b>{escape(e['recommendation'])}</b><br><span class=\"small\">"
                         f"{escape(e['check_id'] or e['component'])}: {escape(e['summary'])}"
                         f"{' — ' + escape(who) if who else ''}</span></div>")
    parts.append("</section>")
    return "".join(parts)


def _row_of(finding: Mapping[str, Any], names: list[str], keys: list[str]) -> str:
    node = finding.get("node")
    if node in keys:
        return names[keys.index(node)]
    subject = str(finding.get("subject", ""))
    head = subject.split("/", 1)[0]
    if head in names:
        return head
    m = re.fullmatch(r"group node(\d+)", subject)
    if m and int(m.group(1)) < len(names):
        return names[int(m.group(1))]
    return "cluster"


def _grid(report: Mapping[str, Any]) -> str:
    names, keys = node_names(report), list((report.get("nodes") or {}).keys())
    cells: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for f in report.get("findings") or []:
        cells.setdefault((_row_of(f, names, keys), f["check_id"]), []).append(f)
    checks = sorted({c for _, c in cells})
    rows = list(dict.fromkeys(names + sorted({r for r, _ in cells if r not in names})))
    head = "".join(f'<th class="v">{escape(c)}</th>' for c in checks)
    body = []
    for row in rows:
        tds = []
        for c in checks:
            found = cells.get((row, c))
            if not found:
                tds.append('<td class="c" style="background:#f3f3f3" title="not run here"></td>')
                continue
            worst = Status.worst(f["status"] for f in found).value
            tip = "; ".join(f"{f['status']} {f['subject']}: {f['summary']}" for f in found[:6])
            tds.append(f'<td class="c" style="background:{STATUS_COLORS[worst]}" title="{escape(c)} — '
                       f'{escape(tip)}"></td>')
        body.append(f'<tr><td class="n">{escape(row)}</td>{"".join(tds)}</tr>')
    legend = " ".join(_badge(s.value) for s in Status)
    return (f'<section id="grid"><h2>Node × check status</h2><p class="small">{legend} · grey: not run; hover a '
            f'cell for its findings</p><div class="grid"><table><tr><th></th>{head}</tr>{"".join(body)}</table>'
            f"</div></section>")


def _pair_list(conn: Mapping[str, Any]) -> str:
    """Large clusters: the N x N grid would be mostly empty and huge, so list the pairs that were not fine."""
    bad = sorted((p for p in conn["pairs"] if p["status"] != "PASS"), key=lambda p: (_ORDER[p["status"]], p["a"]))
    rows = "".join(f"<tr><td>{_badge(p['status'])}</td><td>{escape(p['a'])}</td><td>{escape(p['b'])}</td>"
                   f"<td>{'failed' if p['gbps'] is None else format(p['gbps'], '.3g')}</td></tr>" for p in bad)
    return (f'<section id="connectivity"><h2>Connectivity ({len(conn["pairs"])} node pairs measured, source: '
            f'{escape(conn["source"])})</h2><p class="small">{len(bad)} pair(s) not PASS; every pair is in '
            f"report.json under cluster_summary.health_scores.connectivity.</p><table><tr><th>Status</th><th>Node"
            f"</th><th>Node</th><th>GB/s</th></tr>{rows}</table></section>")


def _matrix(conn: Mapping[str, Any] | None) -> str:
    if not conn:
        return ""
    nodes = conn["nodes"]
    if len(nodes) > MATRIX_MAX_NODES or conn.get("cells") is None:
        return _pair_list(conn)
    head = "".join(f"<th>{escape(n)}</th>" for n in nodes)
    rows = []
    for i, name in enumerate(nodes):
        tds = []
        for cell in conn["cells"][i]:
            if cell is None:
                tds.append('<td class="muted">·</td>')
            else:
                gbps = f"{cell['gbps']:.3g}" if cell.get("gbps") is not None else "failed"
                tds.append(f'<td style="background:{STATUS_COLORS.get(cell["status"], "#999")};color:#fff">'
                           f"{gbps}</td>")
        rows.append(f"<tr><th>{escape(name)}</th>{''.join(tds)}</tr>")
    return (f'<section id="connectivity"><h2>Connectivity matrix (GB/s, source: {escape(conn["source"])})</h2>'
            f'<div class="grid"><table class="matrix"><tr><th></th>{head}</tr>{"".join(rows)}</table></div>'
            f'<p class="small muted">· not measured</p></section>')


def _plots(report: Mapping[str, Any]) -> str:
    groups = plots(report)
    if not groups:
        return '<section id="plots"><h2>Measurements</h2><p class="muted">No workload measurements in this report ' \
               "(a node-only run).</p></section>"
    body = "".join(f'<h3>{escape(title)}</h3><div class="charts">{"".join(charts)}</div>'
                   for title, charts in groups.items())
    return f'<section id="plots"><h2>Measurements</h2>{body}</section>'


def _findings(report: Mapping[str, Any]) -> str:
    """Every problem; passes and skips up to :data:`MAX_QUIET_ROWS` (a thousand-node run has hundreds of
    thousands of them, and they are all in report.json)."""
    rows, quiet_rows = [], 0
    for f in sorted(report.get("findings") or [], key=lambda f: (_ORDER[f["status"]], f["check_id"], f["subject"])):
        quiet = f["status"] in ("PASS", "SKIP")
        quiet_rows += quiet
        if quiet and quiet_rows > MAX_QUIET_ROWS:
            continue
        rows.append(f'<tr class="{"quiet" if quiet else "loud"}"{" hidden" if quiet else ""}><td>{_badge(f["status"])}'
                    f"</td><td>{escape(f['check_id'])}</td><td>{escape(str(f['subject']))}</td>"
                    f"<td>{escape(display(f.get('observed'), f.get('unit')))}</td>"
                    f"<td>{escape(display(f.get('expected'), f.get('unit')))}</td><td>{escape(f['summary'])}</td>"
                    f"<td>{escape(f.get('recommendation') or '')}</td></tr>")
    more = f" ({quiet_rows - MAX_QUIET_ROWS} more in report.json)" if quiet_rows > MAX_QUIET_ROWS else ""
    return (f'<section id="findings"><h2>Findings</h2><label><input type="checkbox" id="show-pass"> show PASS and '
            f"SKIP{more}</label><table><tr><th>Status</th><th>Check</th><th>Subject</th><th>Observed</th><th>Expected</th>"
            f'<th>Summary</th><th>Recommendation</th></tr>{"".join(rows)}</table></section>')


def render_html(report: Mapping[str, Any], config: ReportConfig | None = None) -> str:
    """The whole page for a canonical report dict (node-only or cluster run)."""
    cfg = config or ReportConfig()
    summary = report["cluster_summary"]
    scores = summary.get("health_scores") or compute_scores(report, cfg)
    recs = summary.get("recommendations_by_urgency") or recommendations_by_urgency(report, scores)
    cost = summary.get("cost_benefit") or cost_benefit(report, scores, cfg)
    nav = "".join(f'<a href="#{a}">{t}</a>' for a, t in (("scores", "Scores"), ("recommendations", "Recommendations"),
                                                        ("grid", "Status grid"), ("plots", "Measurements"),
                                                        ("findings", "Findings")))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>gpu-preflight: {escape(verdict_of(report).label)}</title><style>{CSS}</style></head><body>"
            f"{_banner(report)}<nav>{nav}</nav><main>{_scores(scores)}{_recommendations(recs, cost)}{_grid(report)}"
            f"{_matrix(scores.get('connectivity'))}{_plots(report)}{_findings(report)}</main>"
            f"<script>{SCRIPT}</script></body></html>\n")
