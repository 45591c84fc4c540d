"""Inline SVG charts drawn in Python: a report file must open on an air-gapped laptop.

Inline ``<svg>`` in HTML needs no namespace declaration, so the page carries no URL at all.

No plotting library and no script: a line chart (log-x for message sizes), a bar chart
with reference lines, a histogram (a distribution too large for one bar per member) and a
time chart cover every plot the HTML report shows. Hover text uses SVG ``<title>``
elements, which browsers show natively.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape

import msgspec

__all__ = ["STATUS_COLORS", "Bar", "Bin", "Envelope", "Ref", "Series", "bar_chart", "histogram", "human_bytes",
           "line_chart"]

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")
STATUS_COLORS = {"PASS": "#2e7d32", "SKIP": "#9e9e9e", "WARN": "#e0a800", "ERROR": "#8e24aa", "FAIL": "#c62828"}
_MARGIN = (56, 16, 30, 46)  # left, right, top, bottom


class Series(msgspec.Struct):
    """One line: its label and (x, y) points."""

    label: str
    points: list[tuple[float, float]]
    dashed: bool = False
    color: str | None = None
    legend: bool = True


class Bar(msgspec.Struct):
    """One bar; ``status`` picks its colour."""

    label: str
    value: float
    status: str = "PASS"
    note: str = ""


class Ref(msgspec.Struct):
    """A horizontal reference line (an expected value, a limit)."""

    value: float
    label: str
    color: str = "#555"
    extra: dict[str, str] = {}


class Envelope(msgspec.Struct):
    """A shaded band between a low and a high line: where many series lie, drawn once."""

    label: str
    points: list[tuple[float, float, float]]  # (x, low, high)
    color: str = "#d5dbe3"


class Bin(msgspec.Struct):
    """One histogram bar: the members whose value lies in [lo, hi), and their worst status."""

    lo: float
    hi: float
    count: int
    status: str = "PASS"


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:g}{unit}" if unit == "B" else f"{n:.0f}{unit}" if n == int(n) else f"{n:.1f}{unit}"
        n /= 1024
    return f"{n:g}"


def _nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks: list[float] = []
    t = first
    while not ticks or ticks[-1] < hi - step * 1e-9:  # the last tick covers hi: nothing drawn above the frame
        ticks.append(round(t, 10))
        t += step
    return ticks


def _fmt(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def _frame(width: int, height: int, title: str, y_label: str) -> list[str]:
    return [f'<svg class="chart" role="img" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" aria-label="{escape(title)}">',
            f"<title>{escape(title)}</title>",
            f'<text x="{width / 2:.0f}" y="16" text-anchor="middle" class="ct">{escape(title)}</text>',
            f'<text x="12" y="{height / 2:.0f}" transform="rotate(-90 12 {height / 2:.0f})" text-anchor="middle" '
            f'class="cl">{escape(y_label)}</text>']


def _y_axis(ticks: list[float], y: Callable[[float], float], x0: float, x1: float) -> list[str]:
    out = []
    for t in ticks:
        py = y(t)
        out.append(f'<line x1="{x0:.1f}" y1="{py:.1f}" x2="{x1:.1f}" y2="{py:.1f}" class="grid"/>'
                   f'<text x="{x0 - 4:.1f}" y="{py + 4:.1f}" text-anchor="end" class="tk">{_fmt(t)}</text>')
    return out


def _legend_entry(k: int, per_row: int, label: str, color: str, x0: float, x1: float, top: float) -> str:
    """The k-th legend entry of a chart: a colour swatch and its label, ``per_row`` to a row."""
    lx, ly = x0 + (k % per_row) * ((x1 - x0) / per_row), top + 10 + 14 * (k // per_row)
    return (f'<rect x="{lx:.0f}" y="{ly - 8:.0f}" width="10" height="10" fill="{color}"/>'
            f'<text x="{lx + 14:.0f}" y="{ly + 1:.0f}" class="lg">{escape(label)}</text>')


def line_chart(series: list[Series], *, title: str, x_label: str, y_label: str, log_x: bool = True,
               width: int = 600, height: int = 300, x_format: str = "bytes",
               envelopes: list[Envelope] | None = None) -> str:
    """Lines with markers; x on a log2 scale for message sizes. Empty input gives a note, not a broken chart.

    ``envelopes`` are shaded behind the lines, with a legend entry each: thousands of similar
    lines read better (and weigh less) as the band they fill.
    """
    envelopes = envelopes or []
    pts = [(x, y) for s in series for x, y in s.points if (x > 0 or not log_x)]
    pts += [(x, hi) for e in envelopes for x, _, hi in e.points if (x > 0 or not log_x)]
    if not pts:
        return f'<p class="empty">{escape(title)}: no data</p>'
    left, right, top, bottom = _MARGIN
    keyed = [s for s in series if s.legend]
    legend_h = 14 * ((len(keyed) + len(envelopes) + 2) // 3)
    plot_h = height - top - bottom - legend_h
    fx = (lambda v: math.log2(v)) if log_x else (lambda v: v)
    xs = [fx(x) for x, _ in pts]
    x_lo, x_hi = min(xs), max(xs)
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    yt = _nice_ticks(0.0, max(y for _, y in pts) * 1.05 or 1.0)
    y_hi = yt[-1]

    def px(v: float) -> float:
        return left + (fx(v) - x_lo) / (x_hi - x_lo) * (width - left - right)

    def py(v: float) -> float:
        return top + plot_h - v / y_hi * plot_h

    out = _frame(width, height, title, y_label) + _y_axis(yt, py, left, width - right)
    step = max(1, math.ceil((x_hi - x_lo) / 8))
    for e in range(math.ceil(x_lo), math.floor(x_hi) + 1, step) if log_x else []:
        v = 2.0**e
        label = human_bytes(v) if x_format == "bytes" else _fmt(v)
        out.append(f'<text x="{px(v):.1f}" y="{top + plot_h + 14:.1f}" text-anchor="middle" class="tk">{label}</text>')
    out.append(f'<text x="{(left + width - right) / 2:.0f}" y="{top + plot_h + 28:.0f}" text-anchor="middle" '
               f'class="cl">{escape(x_label)}</text>')
    for k, env in enumerate(envelopes):
        band = sorted(p for p in env.points if p[0] > 0 or not log_x)
        outline = [(px(x), py(hi)) for x, _, hi in band] + [(px(x), py(lo)) for x, lo, _ in reversed(band)]
        out.append(f'<polygon points="{" ".join(f"{cx:.1f},{cy:.1f}" for cx, cy in outline)}" fill="{env.color}" '
                   f'stroke="none"><title>{escape(env.label)}</title></polygon>')
        out.append(_legend_entry(len(keyed) + k, 3, env.label[:40], env.color, left, width - right,
                                 height - legend_h))
    for i, s in enumerate(series):
        color = s.color or PALETTE[(keyed.index(s) if s.legend else i) % len(PALETTE)]
        coords = [(px(x), py(y), x, y) for x, y in sorted(s.points) if x > 0 or not log_x]
        dash = ' stroke-dasharray="5 3"' if s.dashed else ""
        path = " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy, _, _ in coords)
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.8"{dash}/>')
        for cx, cy, x, y in coords:
            xl = human_bytes(x) if x_format == "bytes" else _fmt(x)
            out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="2.6" fill="{color}"><title>{escape(s.label)}: '
                       f"{xl}, {_fmt(y)}</title></circle>")
        if s.legend:
            out.append(_legend_entry(keyed.index(s), 3, s.label[:40], color, left, width - right, height - legend_h))
    out.append("</svg>")
    return "".join(out)


def bar_chart(bars: list[Bar], *, title: str, y_label: str, refs: list[Ref] | None = None, width: int = 600,
              height: int = 280) -> str:
    """Vertical bars coloured by status, with dashed reference lines labelled at the right edge."""
    if not bars:
        return f'<p class="empty">{escape(title)}: no data</p>'
    refs = refs or []
    left, right, top, bottom = _MARGIN
    right, top = right + 70, top + 8
    plot_h = height - top - bottom - 14
    yt = _nice_ticks(0.0, max([b.value for b in bars] + [r.value for r in refs]) * 1.08 or 1.0)
    y_hi = yt[-1]

    def py(v: float) -> float:
        return top + plot_h - max(v, 0.0) / y_hi * plot_h

    out = _frame(width, height, title, y_label) + _y_axis(yt, py, left, width - right)
    slot = (width - left - right) / len(bars)
    bw = max(2.0, min(48.0, slot * 0.7))
    for i, b in enumerate(bars):
        cx = left + slot * (i + 0.5)
        y = py(b.value)
        color = STATUS_COLORS.get(b.status, PALETTE[0])
        out.append(f'<rect x="{cx - bw / 2:.1f}" y="{y:.1f}" width="{bw:.1f}" height="{top + plot_h - y:.1f}" '
                   f'fill="{color}"><title>{escape(b.label)}: {_fmt(b.value)} {escape(b.note)}</title></rect>')
        if len(bars) <= 24:
            out.append(f'<text x="{cx:.1f}" y="{top + plot_h + 13:.1f}" text-anchor="middle" class="tk">'
                       f"{escape(b.label[-14:])}</text>")
    for r in refs:
        y = py(r.value)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="{r.color}" '
                   f'stroke-width="1.5" stroke-dasharray="6 3"/><text x="{width - right + 4}" y="{y + 4:.1f}" '
                   f'class="lg">{escape(r.label)} {_fmt(r.value)}</text>')
    out.append("</svg>")
    return "".join(out)


def histogram(bins: list[Bin], *, title: str, x_label: str, unit: str = "", refs: list[Ref] | None = None,
              note: str = "", width: int = 600, height: int = 280) -> str:
    """A distribution: one bar per value range, its height the members in it, its colour their
    worst status; ``refs`` are dashed vertical lines (an expected value, a limit, the median).

    A bin with any member is at least 3 px tall, so one straggler among 80,000 GPUs stays
    visible. ``note`` is a line under the axis (who is slowest, how many in all).
    """
    if not bins or not any(b.count for b in bins):
        return f'<p class="empty">{escape(title)}: no data</p>'
    refs = refs or []
    left, right, top, bottom = _MARGIN
    top += 12  # room for the reference labels
    bottom += 14 if note else 0
    plot_h = height - top - bottom
    x_lo = min([bins[0].lo] + [r.value for r in refs])
    x_hi = max([bins[-1].hi] + [r.value for r in refs])
    if x_hi <= x_lo:
        x_lo, x_hi = x_lo - 1.0, x_hi + 1.0
    yt = _nice_ticks(0.0, max(b.count for b in bins) * 1.05)
    y_hi = yt[-1]

    def px(v: float) -> float:
        return left + (v - x_lo) / (x_hi - x_lo) * (width - left - right)

    def py(v: float) -> float:
        return top + plot_h - v / y_hi * plot_h

    out = _frame(width, height, title, "count") + _y_axis(yt, py, left, width - right)
    for t in _nice_ticks(x_lo, x_hi, 6):
        if x_lo <= t <= x_hi:
            out.append(f'<text x="{px(t):.1f}" y="{top + plot_h + 14:.1f}" text-anchor="middle" class="tk">'
                       f"{_fmt(t)}</text>")
    out.append(f'<text x="{(left + width - right) / 2:.0f}" y="{top + plot_h + 28:.0f}" text-anchor="middle" '
               f'class="cl">{escape(x_label)}</text>')
    for b in bins:
        if not b.count:
            continue
        x0, x1 = px(b.lo), px(b.hi)
        h = max(top + plot_h - py(b.count), 3.0)
        out.append(f'<rect x="{x0:.1f}" y="{top + plot_h - h:.1f}" width="{max(x1 - x0 - 1, 1.0):.1f}" '
                   f'height="{h:.1f}" fill="{STATUS_COLORS.get(b.status, PALETTE[0])}"><title>{_fmt(b.lo)}-'
                   f"{_fmt(b.hi)} {escape(unit)}: {b.count}</title></rect>")
    for i, r in enumerate(refs):
        x = px(r.value)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" stroke="{r.color}" '
                   f'stroke-width="1.5" stroke-dasharray="6 3"/><text x="{x:.1f}" y="{top - 3 - 10 * (i % 2)}" '
                   f'text-anchor="middle" class="lg">{escape(r.label)} {_fmt(r.value)}</text>')
    if note:
        out.append(f'<text x="{left}" y="{height - 6}" class="lg">{escape(note)}</text>')
    out.append("</svg>")
    return "".join(out)


class Band(msgspec.Struct):
    """A shaded span of the x axis (a workload phase) with its label."""

    start: float
    end: float
    label: str


def time_chart(series: list[Series], *, title: str, y_label: str, bands: list[Band] | None = None,
               refs: list[Ref] | None = None, width: int = 640, height: int = 260) -> str:
    """Lines over time (x in seconds, linear), phases shaded behind them, limits as dashed lines.

    Points are joined without markers: a 10 Hz series has hundreds of them. Empty input gives
    a note, not a broken chart.
    """
    pts = [(x, y) for s in series for x, y in s.points]
    if not pts:
        return f'<p class="empty">{escape(title)}: no data</p>'
    bands, refs = bands or [], refs or []
    left, right, top, bottom = _MARGIN
    top += 12  # room for the phase labels
    keyed = [s for s in series if s.legend]
    legend_h = 14 * ((len(keyed) + 3) // 4)
    plot_h = height - top - bottom - legend_h
    x_hi = max(max(x for x, _ in pts), max((b.end for b in bands), default=0.0)) or 1.0
    yt = _nice_ticks(0.0, max([y for _, y in pts] + [r.value for r in refs]) * 1.05 or 1.0)
    y_hi = yt[-1]

    def px(v: float) -> float:
        return left + v / x_hi * (width - left - right)

    def py(v: float) -> float:
        return top + plot_h - max(v, 0.0) / y_hi * plot_h

    out = _frame(width, height, title, y_label)
    for i, b in enumerate(bands):
        x0, x1 = px(b.start), px(max(b.end, b.start))
        shade = "#eef3fb" if i % 2 == 0 else "#f7f7f7"
        out.append(f'<rect x="{x0:.1f}" y="{top}" width="{max(x1 - x0, 0.5):.1f}" height="{plot_h}" fill="{shade}">'
                   f"<title>{escape(b.label)}: {_fmt(b.start)}-{_fmt(b.end)} s</title></rect>")
        if x1 - x0 > 24:
            out.append(f'<text x="{(x0 + x1) / 2:.1f}" y="{top - 3}" text-anchor="middle" class="tk">'
                       f"{escape(b.label[: max(3, int((x1 - x0) / 6))])}</text>")
    out += _y_axis(yt, py, left, width - right)
    for t in _nice_ticks(0.0, x_hi, 6):
        if t <= x_hi:
            out.append(f'<text x="{px(t):.1f}" y="{top + plot_h + 14:.1f}" text-anchor="middle" class="tk">'
                       f"{_fmt(t)}</text>")
    out.append(f'<text x="{(left + width - right) / 2:.0f}" y="{top + plot_h + 28:.0f}" text-anchor="middle" '
               f'class="cl">seconds</text>')
    for r in refs:
        y = py(r.value)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="{r.color}" '
                   f'stroke-width="1.2" stroke-dasharray="6 3"><title>{escape(r.label)} {_fmt(r.value)}</title></line>')
    for i, s in enumerate(series):
        color = s.color or PALETTE[(keyed.index(s) if s.legend else i) % len(PALETTE)]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s.points)
        dash = ' stroke-dasharray="5 3"' if s.dashed else ""
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.4"{dash}>'
                   f"<title>{escape(s.label)}</title></polyline>")
        if s.legend:
            out.append(_legend_entry(keyed.index(s), 4, s.label[:30], color, left, width - right, height - legend_h))
    out.append("</svg>")
    return "".join(out)
