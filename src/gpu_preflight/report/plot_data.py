"""The numbers behind the HTML plots of a large cluster, read in one pass each.

:mod:`.measurements` turns every GPU and every collective group into an object (a
``GemmPoint``, a ``GpuSensors``, a ``Curve``): right for a bar per GPU, and some two
seconds at 10,000 nodes x 8 GPUs. A distribution needs less: every member's value, the
few members whose finding is not PASS (they colour their bin), and the extreme member's
name. These readers collect exactly that, from the same report fields and with the same
rules (what :func:`.measurements.gemm_points` leaves out is left out here), so the plot
of a large cluster counts every member without building an object for each.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .connectivity import node_names
from .measurements import Curve, num

__all__ = ["Spread", "gemm_spreads", "local_sweeps", "sensor_spreads"]

_GPU_SUBJECT = re.compile(r"/gpu\d+$")
_NOT_MEASURED = ("gemm_wrong", "gemm_error", "not_run")


@dataclass
class Spread:
    """One measured quantity over many members (GPUs, nodes)."""

    values: list[float] = field(default_factory=list)
    flagged: list[tuple[str, float, str]] = field(default_factory=list)  # (subject, value, status) not PASS
    expected: float | None = None
    on_gpu: bool = True
    lowest: tuple[str, float] | None = None
    highest: tuple[str, float] | None = None

    def add(self, subject: str, value: float, status: str) -> None:
        self.values.append(value)
        if status != "PASS":
            self.flagged.append((subject, value, status))
        if self.lowest is None or value < self.lowest[1]:
            self.lowest = (subject, value)
        if self.highest is None or value > self.highest[1]:
            self.highest = (subject, value)

    def add_many(self, by_subject: Mapping[str, Any], status: str) -> None:
        """A rolled-up finding's ``{subject: value}``: the values at C speed, names only for the extremes."""
        values = [v if type(v) is float else num(v) for v in by_subject.values()]
        kept = [v for v in values if v is not None]
        if not kept:
            return
        self.values.extend(kept)
        lo, hi = min(kept), max(kept)
        for subject, value in by_subject.items():
            if status != "PASS" and (v := num(value)) is not None:
                self.flagged.append((str(subject), v, status))
        if self.lowest is None or lo < self.lowest[1]:
            self.lowest = (str(next(s for s, v in by_subject.items() if num(v) == lo)), lo)
        if self.highest is None or hi > self.highest[1]:
            self.highest = (str(next(s for s, v in by_subject.items() if num(v) == hi)), hi)


def gemm_spreads(report: Mapping[str, Any]) -> dict[str, Spread]:
    """Per precision, every correct GEMM measurement (as :func:`.measurements.gemm_points` reads them)."""
    out: dict[str, Spread] = {}
    for f in report.get("findings") or []:
        if f.get("check_id") != "compute.gemm" or f.get("code") in _NOT_MEASURED:
            continue
        details = f.get("details") or {}
        dtype = details.get("dtype")
        if not isinstance(dtype, str):
            continue
        spread = out.get(dtype)
        if spread is None:
            spread = out[dtype] = Spread()
        if spread.expected is None:
            spread.expected = num(details.get("expected")) or None
        rolled = details.get("subjects") if details.get("rolled_up") else None
        if isinstance(rolled, Mapping):
            spread.add_many(rolled, f["status"])
        else:
            value = num(f.get("observed"))
            if value is not None:
                spread.add(str(f["subject"]), value, f["status"])
    for spread in out.values():
        spread.on_gpu = bool(spread.lowest and _GPU_SUBJECT.search(spread.lowest[0]))
    return {dtype: s for dtype, s in out.items() if s.values}


def _numbers(raw: list[Any]) -> list[float]:
    """The finite numbers among ``raw`` as floats (what :func:`.measurements.num` accepts), at C speed."""
    return [float(v) for v in raw if (type(v) is float and v - v == 0) or type(v) is int]


def _spread(rows: list[tuple[str, str, Mapping[str, Any]]], raw: list[Any], statuses: Mapping[str, str]) -> Spread:
    """A sensor's spread over the GPUs ``rows`` (node name, gpu key, gpu block), ``raw`` its readings."""
    spread = Spread(values=_numbers(raw))
    if not spread.values:
        return spread
    lo, hi = min(spread.values), max(spread.values)
    spread.lowest = (_subject(*rows[raw.index(lo)][:2]), lo)
    spread.highest = (_subject(*rows[raw.index(hi)][:2]), hi)
    flagged = {subject: status for subject, status in statuses.items() if status != "PASS"}
    if flagged:
        nodes = {subject.split("/", 1)[0] for subject in flagged}
        for (name, key, _), value in zip(rows, raw, strict=True):
            if name in nodes and (subject := _subject(name, key)) in flagged and (v := num(value)) is not None:
                spread.flagged.append((subject, v, flagged[subject]))
    return spread


def _subject(name: str, key: str) -> str:
    suffix = key.rsplit("_", 1)[-1]
    return f"{name}/gpu{suffix if suffix.isdigit() else key}"


def sensor_spreads(report: Mapping[str, Any], statuses: Mapping[str, Mapping[str, str]]
                   ) -> tuple[Spread, Spread, float | None, float | None]:
    """Temperature and power of every GPU (``gpu`` block of each node section), the lowest
    slowdown temperature and power limit among them; ``statuses`` maps ``temperature`` and
    ``power`` to the worst status per GPU subject (only those not PASS matter). Read a
    column at a time with comprehensions: 80,000 GPUs."""
    rows = [(name, key, gpu) for name, section in zip(node_names(report), (report.get("nodes") or {}).values(),
                                                       strict=True)
            for key, gpu in (section.get("gpu") or {}).items()]
    temps = _spread(rows, [g.get("temperature_c") for _, _, g in rows], statuses.get("temperature") or {})
    power = _spread(rows, [g.get("power_draw_w") for _, _, g in rows], statuses.get("power") or {})
    slowdown = min((v for v in _numbers([g.get("slowdown_temperature_c") for _, _, g in rows]) if v), default=None)
    limit = min((v for v in _numbers([g.get("power_limit_w") for _, _, g in rows]) if v), default=None)
    return temps, power, slowdown, limit


@dataclass
class Sweeps:
    """One collective's sweeps: the node-local groups' values per message size, the slowest
    node-local curves, and every curve of the other scopes (the world, one rank per node)."""

    by_size: dict[int, list[float]] = field(default_factory=dict)
    groups: int = 0
    slowest: list[Curve] = field(default_factory=list)
    others: list[Curve] = field(default_factory=list)


def local_sweeps(report: Mapping[str, Any], keep: int) -> dict[str, Sweeps]:
    """Per collective, what :func:`.measurements.busbw_curves` reads (a group shared by several
    nodes once), the node-local groups reduced to their values per size and the ``keep``
    slowest of them (lowest peak) as curves."""
    names = node_names(report)
    out: dict[str, Sweeps] = {}
    seen: set[tuple[str, str, str]] = set()
    heaps: dict[str, list[tuple[float, int, str, str, list[tuple[int, float]], bool]]] = {}
    ops: dict[str, tuple[str, str]] = {}  # test key -> (scope, collective): a handful of keys, 60,000 entries
    count = 0
    for i, section in enumerate((report.get("nodes") or {}).values()):
        tests = (section.get("nccl") or {}).get("communication_tests") or {}
        for key, entry in tests.items():
            scope = entry.get("test_type") or ""
            known = ops.get(key)
            if known is None or known[0] != scope:
                known = ops[key] = (scope, key[len(scope) + 1:] if scope and key.startswith(scope + "_") else key)
            op = known[1]
            group = entry.get("group") or key
            if (op, scope, group) in seen:
                continue
            seen.add((op, scope, group))
            points = []
            peak = None
            for r in entry.get("results") or ():
                y, x = r.get("busbw_gbps"), r.get("size_bytes")
                if type(y) is not float or y != y:
                    y = num(y)
                    if y is None:
                        continue
                if type(x) is not int:
                    x = num(x)
                if not x:
                    continue
                points.append((int(x), y))
                if peak is None or y > peak:
                    peak = y
            sweeps = out.get(op)
            if sweeps is None:
                sweeps = out[op] = Sweeps()
            if scope != "intra_node":
                sweeps.others.append(Curve(op, scope, str(group), f"{group} ({scope or 'group'})", sorted(points),
                                           bool(entry.get("success"))))
                continue
            if peak is None:
                continue
            sweeps.groups += 1
            by_size = sweeps.by_size
            for x, y in points:
                column = by_size.get(x)
                if column is None:
                    by_size[x] = [y]
                else:
                    column.append(y)
            heap = heaps.setdefault(op, [])
            count += 1
            if len(heap) < keep or (-peak, -count) > heap[0][:2]:
                item = (-peak, -count, f"{names[i]} (node-local)", str(group), points, bool(entry.get("success")))
                (heapq.heappush if len(heap) < keep else heapq.heapreplace)(heap, item)
    for op, heap in heaps.items():
        out[op].slowest = [Curve(op, "intra_node", group, label, sorted(points), success)
                           for _, _, label, group, points, success in sorted(heap, key=lambda t: (-t[0], -t[1]))]
    return out
