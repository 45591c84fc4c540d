"""The HTML page's overview and judgement sections, from the same :mod:`.review` and
:mod:`.conclusion` as the Markdown: infrastructure overview, software-stack health, network
strengths and concerns, the GPU memory dashboard, the error classification with its
high-risk items, the health-trend analysis and the conclusion.

Compact at any scale: per-node rows only up to ``report.detail_max_nodes`` (the views say
so above it), error rows one per cause, lists capped. The service-availability matrix is
the page's node × check grid (:mod:`.html`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

__all__ = [
    "conclusion_html",
    "errors_html",
    "gpu_memory_html",
    "infrastructure_html",
    "network_review_html",
    "score",
    "software_stack_html",
    "table",
    "td",
    "trend_html",
]

_AGREE_COLORS = {"AGREE": "#2e7d32", "DIFFER": "#e0a800", "NOT MEASURED": "#777"}


def td(*cells: object) -> str:
    """One table row of escaped cells."""
    return "<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in cells) + "</tr>"


def table(head: Sequence[str], rows: Sequence[str], ident: str = "") -> str:
    """A table with a header row; ``ident`` its id (the tests and the page's links find it by that)."""
    attr = f' id="{ident}"' if ident else ""
    return f"<table{attr}><tr>{''.join(f'<th>{escape(h)}</th>' for h in head)}</tr>{''.join(rows)}</table>"


def _list(items: Sequence[str], empty: str) -> str:
    return "<ul>" + ("".join(f"<li>{escape(i)}</li>" for i in items) or f"<li>{escape(empty)}</li>") + "</ul>"


def _dl(pairs: Sequence[tuple[str, str]], ident: str) -> str:
    return f'<ul id="{ident}">' + "".join(f"<li><b>{escape(k)}:</b> {escape(v)}</li>" for k, v in pairs) + "</ul>"


def _pct(value: Any) -> str:
    return "not measured" if value is None else f"{float(value):g}%"


def score(value: Any) -> str:
    return "—" if value is None else f"{float(value):.0f}/100"


def infrastructure_html(infra: Mapping[str, str]) -> str:
    pairs = [(t, infra[k]) for k, t in (("type", "Type"), ("nodes", "Nodes"), ("network", "Network"),
                                        ("management", "Management"), ("purpose", "Purpose"))]
    return f'<section id="infrastructure"><h2>Infrastructure overview</h2>{_dl(pairs, "infra-list")}</section>'


def software_stack_html(stack: Mapping[str, Any], detail_max_nodes: int) -> str:
    columns = stack["columns"]
    if stack["listed"]:
        rows = [td(n["node"], *(n[k] if n[k] is not None else "not read" for k, _ in columns)) for n in stack["nodes"]]
        per_node = table(("Node", *(t for _, t in columns)), rows, "stack-nodes")
    else:
        per_node = (f'<p class="small muted">One row per node up to report.detail_max_nodes ({detail_max_nodes}); '
                    f"the versions below are counted over every node.</p>")
    agree = [f"<tr><td>{escape(c['title'])}</td><td><b style=\"color:{_AGREE_COLORS.get(c['status'], '#777')}\">"
             f"{escape(c['status'])}</b></td><td>{escape(c['text'])}</td></tr>" for c in stack["components"]]
    return (f'<section id="software-stack"><h2>Software stack health</h2>{per_node}<h3>Do the nodes agree?</h3>'
            f"{table(('Component', 'Agreement', 'Versions'), agree, 'stack-agreement')}</section>")


def network_review_html(review: Mapping[str, Sequence[str]]) -> str:
    return (f'<section id="network-review"><h2>Network strengths and concerns</h2><h3>Network strengths</h3>'
            f'{_list(review["strengths"], "none measured")}<h3>Network concerns</h3>'
            f'{_list(review["concerns"], "none")}</section>')


def gpu_memory_html(memory: Mapping[str, Any]) -> str:
    rows = [td(n["node"], n["gpus"], f"{n['memory_gb']:g} GB", _pct(n["used_percent"]),
                _pct(n["utilization_percent"]), n["health"], score(n["score"])) for n in memory["nodes"]]
    c = memory["cluster"]
    rows.append(td("Cluster", sum(n["gpus"] for n in memory["nodes"]) if memory["listed"] else "—",
                    f"{c['memory_gb']:g} GB", _pct(c["used_percent"]), _pct(c["utilization_percent"]), c["health"],
                    score(c["score"])))
    return ('<section id="gpu-memory"><h2>GPU memory</h2><p class="small muted">Memory in use and GPU utilisation as '
            "NVML read them when each node was checked (before any workload).</p>"
            + table(("Node", "GPUs", "GPU memory", "Memory in use", "GPU utilisation", "GPU health", "Score"), rows,
                     "memory-dashboard") + "</section>")


def errors_html(errors: Mapping[str, Any]) -> str:
    if errors["rows"]:
        body = table(("Error type", "Component", "Frequency", "Severity", "Status", "Impact"), [
            td(r["type"], r["component"], f"{r['frequency']} instance(s)", r["severity"], r["status"], r["impact"])
            for r in errors["rows"]], "error-classes")
    else:
        body = '<p class="muted">No error: nothing warns, fails or could not be measured.</p>'
    risks = "".join(f"<li><b>{escape(i['title'])}</b> ({escape(i['subjects'])})<br><span class=\"small\">Impact: "
                    f"{escape(i['impact'])}<br>Mitigation: {escape(i['mitigation'])}</span></li>"
                    for i in errors["high_risk"])
    more = f"<p class=\"small muted\">and {errors['more_high_risk']} more (see Issues)</p>" \
        if errors["more_high_risk"] else ""
    high = f'<ol id="high-risk">{risks}</ol>{more}' if risks else '<p class="muted">None: nothing gates the run.</p>'
    return (f'<section id="errors"><h2>Error classification</h2>{body}<p class="small">No error in: '
            f"{escape(', '.join(errors['clean']) or 'none')}.</p><h3>High-risk items</h3>{high}</section>")


def trend_html(trend: Mapping[str, str]) -> str:
    pairs = [(t, trend[k]) for k, t in (("strengths", "Strengths"), ("concerns", "Concerns"),
                                        ("potential", "Potential"), ("priority", "Priority"))]
    return f"<h3>Health trend analysis</h3>{_dl(pairs, 'trend-analysis')}"


def conclusion_html(end: Mapping[str, Any]) -> str:
    ready = "".join(f"<li>{escape(r['level'])}: <b>{escape(r['status'])}</b></li>" for r in end["readiness"])
    return (f'<section id="conclusion"><h2>Conclusion</h2><p><b>Current status: {escape(end["status"])}</b></p>'
            f'<h3>Strengths</h3>{_list(end["strengths"], "none")}<h3>Critical issues</h3>'
            f'{_list(end["critical"], "none")}<h3>Readiness</h3><ul id="conclusion-readiness">{ready}</ul>'
            f'<p id="decision"><b>Decision:</b> {escape(end["decision"])}</p></section>')
