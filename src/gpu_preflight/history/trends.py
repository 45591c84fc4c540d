"""Trends per node and GPU: how each number moved over the last runs.

A GPU's series follows its UUID (or serial), not the slot it sat in, so a GPU moved to
another host keeps one line; node- and cluster-wide numbers follow their node or
cluster. The change column compares the latest value with the median of the earlier
ones — the same baseline ``history.regression`` judges by.
"""

from __future__ import annotations

import fnmatch
import statistics
from typing import Any

import msgspec

from .store import HistoryStore, RunRow

__all__ = ["Trend", "render_runs", "render_trends", "trends"]

BARS = "▁▂▃▄▅▆▇█"


class Trend(msgspec.Struct):
    """One number over runs: (run id, timestamp, value) oldest first, labelled by where it was last seen."""

    subject: str
    metric: str
    unit: str
    uuid: str | None
    serial: str | None
    model: str | None
    points: list[tuple[int, str, float]] = []

    @property
    def values(self) -> list[float]:
        return [v for _, _, v in self.points]

    @property
    def change(self) -> float | None:
        """Latest value against the median of the earlier ones, as a fraction (-0.1: 10 % lower)."""
        if len(self.points) < 2:
            return None
        base = statistics.median(self.values[:-1])
        return (self.values[-1] - base) / base if base else None

    def sparkline(self) -> str:
        lo, hi = min(self.values), max(self.values)
        if hi == lo:
            return BARS[3] * len(self.values)
        return "".join(BARS[round((v - lo) / (hi - lo) * (len(BARS) - 1))] for v in self.values)

    def to_dict(self) -> dict[str, Any]:
        return {"subject": self.subject, "metric": self.metric, "unit": self.unit, "uuid": self.uuid,
                "serial": self.serial, "model": self.model, "change": self.change,
                "points": [{"run": r, "timestamp": t, "value": v} for r, t, v in self.points]}


def trends(store: HistoryStore, *, cluster: str | None = None, node: str | None = None, gpu: str | None = None,
           metric: str = "*", last: int = 20) -> list[Trend]:
    """Series of every matching number over the last ``last`` runs."""
    out: dict[tuple[str, str], Trend] = {}
    for run_id, ts, _cl, subject, m_node, slot, uuid, serial, model, name, value, unit in store.series(
            cluster=cluster, node=node, gpu=gpu, last=last):
        if not fnmatch.fnmatchcase(name, metric):
            continue
        if slot:  # a GPU's numbers follow the GPU wherever it sat
            entity = uuid or serial or f"{_cl}:{m_node}/{slot}"
        else:
            entity = f"{_cl}:{m_node or 'cluster'}"
        t = out.setdefault((entity, name), Trend(subject, name, unit, uuid, serial, model))
        t.subject = subject
        t.points.append((run_id, ts, value))
    return sorted(out.values(), key=lambda t: (t.subject, t.metric))


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.4g}"


def render_trends(found: list[Trend]) -> str:
    if not found:
        return "no measurements in the history for this selection\n"
    head = ("subject", "gpu", "metric", "unit", "runs", "last", "median", "min", "max", "change", "trend")
    rows = [head]
    for t in found:
        change = "" if t.change is None else f"{t.change:+.1%}"
        ident = (t.uuid or "")[:12] or (t.serial or "")
        rows.append((t.subject, ident, t.metric, t.unit, str(len(t.points)), _fmt(t.values[-1]),
                     _fmt(statistics.median(t.values)), _fmt(min(t.values)), _fmt(max(t.values)), change,
                     t.sparkline()))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n" for r in rows)


def render_runs(runs: list[RunRow]) -> str:
    if not runs:
        return "no runs in the history\n"
    rows = [("run", "timestamp", "cluster", "status", "nodes", "ranks", "source")]
    rows += [(str(r.id), r.timestamp[:19], r.cluster, r.status, str(r.num_nodes), str(r.world_size), r.source or "")
             for r in runs]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n" for r in rows)
