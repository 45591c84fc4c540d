"""The HTML report's plots: bus bandwidth sweeps, GEMM per GPU, temperature and power per GPU.

Each function returns inline SVG (or nothing when the report has no such data, so a
node-only run simply has fewer plots, not empty frames). Every member is drawn at any
scale, but not as its own mark past a few dozen: a bar per GPU becomes a histogram above
:data:`MAX_BARS` GPUs, and a grey line per node a shaded min-max band with its median
above :data:`MAX_GREY_LINES` nodes (the slowest :data:`MAX_LABELLED` keep their own
lines). 80,000 GPUs are then one chart of some forty bars, not 80,000 rectangles.
"""

from __future__ import annotations

import bisect
import statistics
from collections import defaultdict

from ..findings.model import ClusterReport
from ..ids import GPU_POWER_ID, GPU_THERMAL_ID
from .connectivity import node_names
from .load_plots import load_plots
from .measurements import Curve, busbw_curves, gemm_points, gpu_sensors, worst_status
from .plot_data import Spread, gemm_spreads, local_sweeps, sensor_spreads
from .svg import Bar, Bin, Envelope, Ref, Series, bar_chart, histogram, line_chart

__all__ = ["plots"]


MAX_LABELLED = 9
MAX_GREY_LINES = 100  # node-local lines drawn one by one; above, their band and median
MAX_BARS = 96  # bars drawn one per GPU; above, a histogram
BINS = 40
_RANK = {"PASS": 0, "SKIP": 1, "WARN": 2, "ERROR": 3, "FAIL": 4}
_BY_RANK = {rank: status for status, rank in _RANK.items()}


def _series(c: Curve, *, grey: bool = False) -> Series:
    return Series(c.label + ("" if c.success else " [failed]"), [(float(x), y) for x, y in c.points],
                  dashed=c.scope != "intra_node", color="#c8c8c8" if grey else None, legend=not grey)


def _chart(op: str, series: list[Series], envelopes: list[Envelope] | None = None) -> str:
    return line_chart(series, title=f"{op}: bus bandwidth vs message size", x_label="message size",
                      y_label="busbw (GB/s)", envelopes=envelopes)


def bandwidth_plots(report: ClusterReport, names: list[str] | None = None) -> list[str]:
    """Bus bandwidth vs message size, one chart per collective, a line per process group.

    With many nodes the slowest :data:`MAX_LABELLED` node-local lines keep their colour and
    legend (they are the ones to look at); the rest are thin grey lines without a legend, or,
    past :data:`MAX_GREY_LINES` of them, the band they fill (min to max per message size)
    and its median.
    """
    report = report
    if len(report.nodes) > MAX_LABELLED + MAX_GREY_LINES:
        return _banded(report, names)
    out = []
    for op, curves in sorted(busbw_curves(report).items()):
        drawn = [c for c in curves if c.points]
        local = sorted((c for c in drawn if c.scope == "intra_node"), key=lambda c: max(y for _, y in c.points))
        quiet = {id(c) for c in local[MAX_LABELLED:]} if len(local) > MAX_LABELLED else set()
        series = [_series(c, grey=id(c) in quiet) for c in drawn]
        series.sort(key=lambda s: s.legend)  # grey lines first, so the labelled ones draw on top
        if series:
            out.append(_chart(op, series))
    return out


def _banded(report: ClusterReport, names: list[str] | None) -> list[str]:
    out = []
    for op, sweeps in sorted(local_sweeps(report, MAX_LABELLED, names).items()):
        series = []
        envelopes = []
        if sweeps.groups > len(sweeps.slowest):
            sizes = sorted(sweeps.by_size.items())
            what = f"{sweeps.groups} node-local groups"
            envelopes.append(Envelope(f"{what}: min-max", [(float(x), min(ys), max(ys)) for x, ys in sizes]))
            series.append(Series(f"median of {what}", [(float(x), statistics.median(ys)) for x, ys in sizes],
                                 dashed=True, color="#555"))
        series += [_series(c) for c in sweeps.slowest + sweeps.others if c.points]
        if series:
            out.append(_chart(op, series, envelopes))
    return out


def gemm_plots(report: ClusterReport) -> list[str]:
    """GEMM TFLOP/s per GPU (or CPU worker) per precision, against the profile and the peers' median
    (a histogram of them all past :data:`MAX_BARS`)."""
    report = report
    spreads = gemm_spreads(report)
    if all(len(s.values) <= MAX_BARS for s in spreads.values()):
        return _gemm_bars(report)
    out = []
    for dtype, spread in sorted(spreads.items()):
        refs = [Ref(spread.expected, "expected", "#1565c0")] if spread.expected else []
        title = f"{dtype} GEMM TFLOP/s per {'GPU' if spread.on_gpu else 'worker'}"
        out.append(_distribution(spread, title=title, unit="TFLOP/s", refs=refs, low_is_bad=True))
    return out


def _gemm_bars(report: ClusterReport) -> list[str]:
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


def _distribution(spread: Spread, *, title: str, unit: str, refs: list[Ref], low_is_bad: bool = False) -> str:
    """A histogram of every member's value in :data:`BINS` equal bins, each coloured by the worst
    status among its members, the median dashed and the extreme member named under the axis
    (the lowest when ``low_is_bad``). Counted from the sorted values (C speed), not member by member."""
    ordered = sorted(spread.values)
    lo, hi = ordered[0], ordered[-1]
    n = BINS if hi > lo else 1
    step = (hi - lo) / n or 1.0
    cuts = [0, *(bisect.bisect_left(ordered, lo + i * step) for i in range(1, n)), len(ordered)]
    bins = [Bin(lo + i * step, lo + (i + 1) * step, cuts[i + 1] - cuts[i]) for i in range(n)]
    worst = [0] * n
    for _, value, status in spread.flagged:
        i = min(max(bisect.bisect_right(cuts, bisect.bisect_left(ordered, value)) - 1, 0), n - 1)
        worst[i] = max(worst[i], _RANK.get(status, 0))
    for b, rank in zip(bins, worst, strict=True):
        b.status = _BY_RANK[rank]
    median = statistics.median(ordered)
    extreme = spread.lowest if low_is_bad else spread.highest
    note = f"{len(ordered):,} in all · median {median:.4g} {unit}"
    if extreme is not None:
        note += f" · {'lowest' if low_is_bad else 'highest'} {extreme[1]:.4g} ({extreme[0]})"
    return histogram(bins, title=title, x_label=unit, unit=unit, refs=[*refs, Ref(median, "median", "#777")],
                     note=note)


def _statuses(report: ClusterReport, check_id: str) -> dict[str, str]:
    by_subject: dict[str, list[str]] = defaultdict(list)
    for f in report.findings:
        if f.check_id == check_id:
            by_subject[str(f.subject)].append(f.status.value)
    return {subject: worst_status(statuses) for subject, statuses in by_subject.items()}


def sensor_plots(report: ClusterReport, names: list[str] | None = None) -> list[str]:
    """Temperature and power per GPU as NVML read them, against each GPU model's own limits,
    coloured by the verdict of ``gpu.thermal`` / ``gpu.power`` on that GPU (histograms of
    them all past :data:`MAX_BARS` GPUs)."""
    report = report
    thermal, power_status = _statuses(report, GPU_THERMAL_ID), _statuses(report, GPU_POWER_ID)
    if sum(map(len, report.nodes.blocks("gpu"))) > MAX_BARS:
        temps, power, slowdown, limit = sensor_spreads(report, {"temperature": thermal, "power": power_status},
                                                       names)
        out = []
        if temps.values:
            out.append(_distribution(temps, title="GPU temperature", unit="°C",
                                     refs=[Ref(slowdown, "slowdown", "#c62828")] if slowdown else []))
        if power.values:
            out.append(_distribution(power, title="GPU power draw", unit="W",
                                     refs=[Ref(limit, "limit", "#c62828")] if limit else []))
        return out
    sensors = gpu_sensors(report)
    out = []
    temps_ = [s for s in sensors if s.temperature_c is not None]
    if temps_:
        slowdown = min((s.slowdown_c for s in temps_ if s.slowdown_c), default=None)
        bars = [Bar(s.subject, s.temperature_c or 0.0, thermal.get(s.subject, "PASS"), "°C") for s in temps_]
        out.append(bar_chart(bars, title="GPU temperature", y_label="°C",
                             refs=[Ref(slowdown, "slowdown", "#c62828")] if slowdown else []))
    power_ = [s for s in sensors if s.power_w is not None]
    if power_:
        limit = min((s.power_limit_w for s in power_ if s.power_limit_w), default=None)
        bars = [Bar(s.subject, s.power_w or 0.0, power_status.get(s.subject, "PASS"), "W") for s in power_]
        out.append(bar_chart(bars, title="GPU power draw", y_label="W",
                             refs=[Ref(limit, "limit", "#c62828")] if limit else []))
    return out


def plots(report: ClusterReport) -> dict[str, list[str]]:
    """Plot groups for the page, in display order; empty groups are left out."""
    report = report
    names = node_names(report)  # once: 10,000 sections
    groups = {"Bus bandwidth": bandwidth_plots(report, names), "GEMM throughput": gemm_plots(report),
              "Temperature and power": sensor_plots(report, names), "Under load": load_plots(report)}
    return {title: charts for title, charts in groups.items() if charts}
