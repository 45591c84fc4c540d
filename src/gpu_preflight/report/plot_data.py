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

import bisect
import heapq
import re
from collections.abc import Mapping
from typing import Any

import msgspec

from ..findings.model import ClusterReport, CollectiveTest
from ..ids import GEMM_ID
from .connectivity import node_names
from .measurements import Curve, num, scope_op, sweep_points

__all__ = ["Spread", "gemm_spreads", "local_sweeps", "sensor_spreads"]

_GPU_SUBJECT = re.compile(r"/gpu\d+$")
_NOT_MEASURED = ("gemm_wrong", "gemm_error", "not_run")


class Spread(msgspec.Struct):
    """One measured quantity over many members (GPUs, nodes)."""

    values: list[float] = []
    flagged: list[tuple[str, float, str]] = []  # (subject, value, status) not PASS
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
        """A rolled-up finding's ``{subject: value}``: the values at C speed, names only for the extremes.

        A map of floats (every rolled-up GEMM series) is taken as it is, without a walk per
        member; the extremes are named by their position among the values."""
        raw = list(by_subject.values())
        values: list[Any] = raw if set(map(type, raw)) == {float} else [v if type(v) is float else num(v)
                                                                          for v in raw]
        kept: list[float] = values if None not in values else [v for v in values if v is not None]
        if not kept:
            return
        self.values.extend(kept)
        lo, hi = min(kept), max(kept)
        if status != "PASS":
            for subject, value in by_subject.items():
                if (v := num(value)) is not None:
                    self.flagged.append((str(subject), v, status))
        subjects = list(by_subject)  # values[k] is subject k's (None where it is no number)
        if self.lowest is None or lo < self.lowest[1]:
            self.lowest = (str(subjects[values.index(lo)]), lo)
        if self.highest is None or hi > self.highest[1]:
            self.highest = (str(subjects[values.index(hi)]), hi)


def gemm_spreads(report: ClusterReport) -> dict[str, Spread]:
    """Per precision, every correct GEMM measurement (as :func:`.measurements.gemm_points` reads them)."""
    out: dict[str, Spread] = {}
    for f in report.findings:
        if f.check_id != GEMM_ID or f.code in _NOT_MEASURED:
            continue
        details = f.details
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
            spread.add_many(rolled, f.status.value)
        else:
            value = num(f.observed)
            if value is not None:
                spread.add(str(f.subject), value, f.status.value)
    for spread in out.values():
        spread.on_gpu = bool(spread.lowest and _GPU_SUBJECT.search(spread.lowest[0]))
    return {dtype: s for dtype, s in out.items() if s.values}


def _numbers(raw: list[Any]) -> list[float]:
    """The finite numbers among ``raw`` as floats (what :func:`.measurements.num` accepts), at C speed:
    a column of finite floats (a sensor read on every GPU) is copied whole."""
    if set(map(type, raw)) == {float}:
        total = sum(raw)
        if total - total == 0:  # no NaN or infinity among them (or their sum overflowed: read one by one)
            return list(raw)
    return [float(v) for v in raw if (type(v) is float and v - v == 0) or type(v) is int]


class _Gpus:
    """Every GPU's ``gpu`` block of a report, flat, with the way back from a position in the
    flat columns to its node and key (only the extremes and the flagged need a name)."""

    def __init__(self, report: ClusterReport, names: list[str]) -> None:
        self.names = names
        self.blocks: list[Mapping[str, Any]] = list(report.nodes.blocks("gpu"))
        self.starts: list[int] = []
        total = 0
        for block in self.blocks:
            self.starts.append(total)
            total += len(block)
        self.flat = [gpu for block in self.blocks for gpu in block.values()]  # once, for every column

    def column(self, field: str) -> list[Any]:
        return [gpu.get(field) for gpu in self.flat]

    def subject(self, index: int) -> str:
        node = bisect.bisect_right(self.starts, index) - 1
        key = list(self.blocks[node])[index - self.starts[node]]
        return _subject(self.names[node], key)

    def subjects_of(self, nodes: set[str]) -> dict[int, str]:
        """Position -> subject for every GPU of the named nodes."""
        out: dict[int, str] = {}
        for node, name in enumerate(self.names):
            if name in nodes:
                for k, key in enumerate(self.blocks[node]):
                    out[self.starts[node] + k] = _subject(name, key)
        return out


def _spread(gpus: _Gpus, raw: list[Any], statuses: Mapping[str, str]) -> Spread:
    """A sensor's spread over every GPU, ``raw`` its readings in :class:`_Gpus` order."""
    spread = Spread(values=_numbers(raw))
    if not spread.values:
        return spread
    lo, hi = min(spread.values), max(spread.values)
    spread.lowest = (gpus.subject(raw.index(lo)), lo)
    spread.highest = (gpus.subject(raw.index(hi)), hi)
    flagged = {subject: status for subject, status in statuses.items() if status != "PASS"}
    if flagged:
        for index, subject in gpus.subjects_of({s.split("/", 1)[0] for s in flagged}).items():
            if subject in flagged and (value := num(raw[index])) is not None:
                spread.flagged.append((subject, value, flagged[subject]))
    return spread


def _subject(name: str, key: str) -> str:
    suffix = key.rsplit("_", 1)[-1]
    return f"{name}/gpu{suffix if suffix.isdigit() else key}"


def sensor_spreads(report: ClusterReport, statuses: Mapping[str, Mapping[str, str]],
                   names: list[str] | None = None) -> tuple[Spread, Spread, float | None, float | None]:
    """Temperature and power of every GPU (``gpu`` block of each node section), the lowest
    slowdown temperature and power limit among them; ``statuses`` maps ``temperature`` and
    ``power`` to the worst status per GPU subject (only those not PASS matter). Read a
    column at a time with comprehensions: 80,000 GPUs."""
    typed = report
    gpus = _Gpus(typed, names if names is not None else node_names(typed))
    temps = _spread(gpus, gpus.column("temperature_c"), statuses.get("temperature") or {})
    power = _spread(gpus, gpus.column("power_draw_w"), statuses.get("power") or {})
    slowdown = min((v for v in _numbers(gpus.column("slowdown_temperature_c")) if v), default=None)
    limit = min((v for v in _numbers(gpus.column("power_limit_w")) if v), default=None)
    return temps, power, slowdown, limit


class Sweeps(msgspec.Struct):
    """One collective's sweeps: the node-local groups' values per message size, the slowest
    node-local curves, and every curve of the other scopes (the world, one rank per node)."""

    by_size: dict[int, list[float]] = {}
    groups: int = 0
    slowest: list[Curve] = []
    others: list[Curve] = []


def local_sweeps(report: ClusterReport, keep: int,
                 names: list[str] | None = None) -> dict[str, Sweeps]:
    """Per collective, what :func:`.measurements.busbw_curves` reads (a group shared by several
    nodes once), the node-local groups reduced to their values per size and the ``keep``
    slowest of them (lowest peak) as curves. A node-local sweep's values go straight into
    their size's column: 60,000 sweeps at 10,000 nodes, and only the slowest become curves.

    The sweeps are read as their JSON objects (:meth:`~..findings.model.NodeSections.collectives`,
    the faster path: this plot is drawn for large clusters only); the few that become curves are
    typed (:func:`_curve`)."""
    typed = report
    names = names if names is not None else node_names(typed)
    out: dict[str, Sweeps] = {}
    seen: set[tuple[str, str, str]] = set()
    peaks: dict[str, list[tuple[float, int, int, str, Mapping[str, Any]]]] = {}
    ops: dict[str, tuple[str, str]] = {}  # test key -> (scope, collective): a handful of keys, 60,000 entries
    count = 0
    for i, tests in enumerate(typed.nodes.collectives()):
        for key, entry in tests.items():
            scope = entry.get("test_type") or ""
            known = ops.get(key)
            if known is None or known[0] != scope:
                known = ops[key] = scope_op(key, scope)
            op = known[1]
            group = entry.get("group") or key
            if (op, scope, group) in seen:
                continue
            seen.add((op, scope, group))
            sweeps = out.get(op)
            if sweeps is None:
                sweeps = out[op] = Sweeps()
            if scope != "intra_node":
                sweeps.others.append(_curve(op, scope, str(group), f"{group} ({scope or 'group'})", entry))
                continue
            by_size = sweeps.by_size
            peak = None
            for r in entry.get("results") or ():
                y, x = r.get("busbw_gbps"), r.get("size_bytes")
                if type(y) is not float or y != y:  # the common case is a plain float; NaN is no reading
                    y = num(y)
                    if y is None:
                        continue
                if type(x) is not int:
                    x = num(x)
                    if not x:
                        continue
                    x = int(x)
                elif not x:
                    continue
                column = by_size.get(x)
                if column is None:
                    by_size[x] = [y]
                else:
                    column.append(y)
                if peak is None or y > peak:
                    peak = y
            if peak is None:
                continue
            sweeps.groups += 1
            count += 1
            found = peaks.get(op)
            if found is None:
                peaks[op] = [(peak, count, i, str(group), entry)]
            else:
                found.append((peak, count, i, str(group), entry))
    for op, found in peaks.items():
        out[op].slowest = [_curve(op, "intra_node", group, f"{names[i]} (node-local)", entry)
                           for _, _, i, group, entry in heapq.nsmallest(keep, found, key=_rank)]
    return out


def _curve(op: str, scope: str, group: str, label: str, entry: Mapping[str, Any]) -> Curve:
    """A sweep drawn as a line: its entry typed (:class:`~..findings.model.CollectiveTest`), its points
    as :func:`.measurements.busbw_curves` reads them."""
    test = CollectiveTest.from_dict(entry)
    return Curve(op, scope, group, label, sweep_points(test), test.success)


def _rank(item: tuple[float, int, int, str, Mapping[str, Any]]) -> tuple[float, int]:
    return item[0], item[1]
