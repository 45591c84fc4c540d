"""The HTML report's under-load plots: SM clock, power and temperature over time, per node.

One chart per quantity and node, a line per GPU, the workload phases shaded behind the
lines (from the node's first sampled GPU: the ranks of a node run their phases together)
and the GPU's own limits dashed. Nodes with a load finding worse than PASS come first;
at most :data:`MAX_NODES` nodes are drawn, so the page stays small on a large cluster
(their statistics stay in the JSON report).
"""

from __future__ import annotations

from ..findings.model import ClusterReport, LoadSummary
from .measurements import worst_status
from .svg import Band, Ref, Series, time_chart

__all__ = ["MAX_NODES", "load_plots", "node_loads"]

MAX_NODES = 8
# (a LoadSeries field, its title, unit, the LoadSummary.static key of its limit)
QUANTITIES = (("sm_mhz", "SM clock", "MHz", None), ("power_w", "power", "W", "power_limit_w"),
              ("temp_c", "GPU temperature", "°C", "temp_slowdown_c"))


def node_loads(report: ClusterReport) -> dict[str, dict[str, LoadSummary]]:
    """``{node name: {gpu label: load summary}}`` for nodes whose report section carries series."""
    out: dict[str, dict[str, LoadSummary]] = {}
    nodes = report.nodes
    for key, loads in zip(nodes, nodes.blocks("load"), strict=True):
        drawn = {gpu: load for gpu, load in (loads or {}).items() if load.series.t}
        if drawn:  # only these sections are typed, for their names
            out[str(nodes[key].node_info.hostname or key)] = drawn
    return out


def _bands(load: LoadSummary) -> list[Band]:
    names = load.phase_names or []
    t, phase = load.series.t or [], load.series.phase or []
    bands: list[Band] = []
    for x, p in zip(t, phase, strict=False):
        label = names[p] if 0 <= p < len(names) else str(p)
        if bands and bands[-1].label == label:
            bands[-1].end = x
        else:
            bands.append(Band(x, x, label))
    return bands


def _order(report: ClusterReport, nodes: list[str]) -> list[str]:
    worst: dict[str, str] = {}
    for f in report.findings:
        if f.check_id.startswith("load."):
            node = str(f.subject).split("/", 1)[0]
            worst[node] = worst_status([worst.get(node, "PASS"), f.status.value])
    rank = {"FAIL": 0, "ERROR": 1, "WARN": 2}
    return sorted(nodes, key=lambda n: (rank.get(worst.get(n, "PASS"), 3), n))


def load_plots(report: ClusterReport) -> list[str]:
    """SVG charts, worst nodes first; empty when no node sampled its GPUs under load."""
    report = report
    loads = node_loads(report)
    out: list[str] = []
    for node in _order(report, list(loads))[:MAX_NODES]:
        gpus = loads[node]
        first = gpus[sorted(gpus)[0]]
        for key, what, unit, limit_key in QUANTITIES:
            series = []
            for gpu in sorted(gpus):
                s = gpus[gpu].series
                pts = [(float(x), float(y)) for x, y in zip(s.t or [], getattr(s, key) or [], strict=False)
                       if y is not None]
                if pts:
                    series.append(Series(gpu, pts))
            limits = sorted({float(v) for g in gpus.values() if (v := g.static.get(limit_key))}) \
                if limit_key else []
            refs = [Ref(limits[0], "limit", "#c62828")] if limits else []
            if series:
                out.append(time_chart(series, title=f"{node}: {what} under load", y_label=unit,
                                      bands=_bands(first), refs=refs))
    return out
