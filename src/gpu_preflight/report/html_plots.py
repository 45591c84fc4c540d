"""The HTML report's plots: bus bandwidth sweeps, GEMM per GPU, temperature and power per GPU.

Each function returns inline SVG (or nothing when the report has no such data, so a
node-only run simply has fewer plots, not empty frames).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from .load_plots import load_plots
from .measurements import busbw_curves, gemm_points, gpu_sensors, worst_status
from .svg import Bar, Ref, Series, bar_chart, line_chart

__all__ = ["plots"]


MAX_LABELLED = 9


def bandwidth_plots(report: Mapping[str, Any]) -> list[str]:
    """Bus bandwidth vs message size, one chart per collective, a line per process group.

    With many nodes the slowest :data:`MAX_LABELLED` node-local lines keep their colour and
    legend (they are the ones to look at); the rest are thin grey lines without a legend.
    """
    out = []
    for op, curves in sorted(busbw_curves(report).items()):
        drawn = [c for c in curves if c.points]
        local = sorted((c for c in drawn if c.scope == "intra_node"), key=lambda c: max(y for _, y in c.points))
        quiet = {id(c) for c in local[MAX_LABELLED:]} if len(local) > MAX_LABELLED else set()
        series = [Series(c.label + ("" if c.success else " [failed]"), [(float(x), y) for x, y in c.points],
                         dashed=c.scope != "intra_node", color="#c8c8c8" if id(c) in quiet else None,
                         legend=id(c) not in quiet) for c in drawn]
        series.sort(key=lambda s: s.legend)  # grey lines first, so the labelled ones draw on top
        if series:
            out.append(line_chart(series, title=f"{op}: bus bandwidth vs message size", x_label="message size",
                                  y_label="busbw (GB/s)"))
    return out


def gemm_plots(report: Mapping[str, Any]) -> list[str]:
    """GEMM TFLOP/s per GPU (or CPU worker) per precision, against the profile and the peers' median."""
    by_dtype = defaultdict(list)
    for p in gemm_points(report):
        by_dtype[p.dtype].append(p)
    out = []
    for dtype, points in sorted(by_dtype.items()):
        refs = []
        expected = next((p.expected for p in points if p.expected), None)
        if expected:
            refs.append(Ref(expected, "expected", "#1565c0"))
        if len(points) >= 2:
            refs.append(Ref(statistics.median(p.tflops for p in points), "median", "#777"))
        bars = [Bar(p.subject, p.tflops, p.status, "TFLOP/s") for p in points]
        out.append(bar_chart(bars, title=f"{dtype} GEMM TFLOP/s per {'GPU' if points[0].on_gpu else 'worker'}",
                             y_label="TFLOP/s", refs=refs))
    return out


def _statuses(report: Mapping[str, Any], check_id: str) -> dict[str, str]:
    by_subject: dict[str, list[str]] = defaultdict(list)
    for f in report.get("findings") or []:
        if f.get("check_id") == check_id:
            by_subject[str(f["subject"])].append(f["status"])
    return {subject: worst_status(statuses) for subject, statuses in by_subject.items()}


def sensor_plots(report: Mapping[str, Any]) -> list[str]:
    """Temperature and power per GPU as NVML read them, against each GPU model's own limits,
    coloured by the verdict of ``gpu.thermal`` / ``gpu.power`` on that GPU."""
    sensors = gpu_sensors(report)
    thermal, power_status = _statuses(report, "gpu.thermal"), _statuses(report, "gpu.power")
    out = []
    temps = [s for s in sensors if s.temperature_c is not None]
    if temps:
        slowdown = min((s.slowdown_c for s in temps if s.slowdown_c), default=None)
        bars = [Bar(s.subject, s.temperature_c or 0.0, thermal.get(s.subject, "PASS"), "°C") for s in temps]
        out.append(bar_chart(bars, title="GPU temperature", y_label="°C",
                             refs=[Ref(slowdown, "slowdown", "#c62828")] if slowdown else []))
    power = [s for s in sensors if s.power_w is not None]
    if power:
        limit = min((s.power_limit_w for s in power if s.power_limit_w), default=None)
        bars = [Bar(s.subject, s.power_w or 0.0, power_status.get(s.subject, "PASS"), "W") for s in power]
        out.append(bar_chart(bars, title="GPU power draw", y_label="W",
                             refs=[Ref(limit, "limit", "#c62828")] if limit else []))
    return out


def plots(report: Mapping[str, Any]) -> dict[str, list[str]]:
    """Plot groups for the page, in display order; empty groups are left out."""
    groups = {"Bus bandwidth": bandwidth_plots(report), "GEMM throughput": gemm_plots(report),
              "Temperature and power": sensor_plots(report), "Under load": load_plots(report)}
    return {title: charts for title, charts in groups.items() if charts}
