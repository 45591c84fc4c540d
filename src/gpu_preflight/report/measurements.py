"""Measurements read back out of a canonical report: GEMM per GPU, bandwidth sweeps, GPU sensors.

The health scores and the HTML plots both need the numbers behind the findings. They read
them from the report alone (typed, or its dict read through ``ClusterReport.of``; not from the
gathered payloads), so a report saved months ago scores and plots exactly as a fresh one does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import msgspec

from ..findings.model import ClusterReport, CollectiveTest, ReportFinding
from ..ids import GEMM_ID
from ..model import Status
from .connectivity import node_names

__all__ = ["Curve", "GemmPoint", "GpuSensors", "busbw_curves", "gemm_by_gpu", "gemm_points", "gpu_sensors",
           "node_peak_busbw", "scope_op", "sweep_points"]

_GPU_SUBJECT = re.compile(r"/gpu\d+$")


def num(value: Any) -> float | None:
    """A finite number, or None for anything else (N/A dicts, strings, bools, NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value == value else None


class GemmPoint(NamedTuple):
    """One GPU's (or CPU worker's) GEMM throughput for one precision (a tuple: 80,000 GPUs make 320,000)."""

    subject: str
    dtype: str
    tflops: float
    expected: float | None
    status: str
    on_gpu: bool


def gemm_points(report: ClusterReport) -> list[GemmPoint]:
    """Correct GEMM measurements from ``compute.gemm`` findings (wrong or failed runs have no speed)."""
    return _gemm_points(report.findings)


def _gemm_points(findings: Iterable[ReportFinding]) -> list[GemmPoint]:
    out = []
    on_gpu: dict[str, bool] = {}  # 80,000 subjects over four precisions: one regex match each
    for f in findings:
        if f.check_id != GEMM_ID or f.code in ("gemm_wrong", "gemm_error", "not_run"):
            continue
        details = f.details
        dtype, expected = details.get("dtype"), num(details.get("expected"))
        if not isinstance(dtype, str):
            continue
        rolled = details.get("subjects") if details.get("rolled_up") else None
        values = rolled.items() if isinstance(rolled, Mapping) else ((f.subject, f.observed),)
        status = f.status.value
        for subject, observed in values:  # a rolled-up pass holds every GPU's value (checks/rollup.py)
            tflops = observed if type(observed) is float else num(observed)
            if tflops is not None:
                gpu = on_gpu.get(subject)
                if gpu is None:
                    gpu = on_gpu[subject] = bool(_GPU_SUBJECT.search(subject))
                out.append(GemmPoint(subject, dtype, tflops, expected, status, gpu))
    return out


def gemm_by_gpu(report: ClusterReport) -> dict[str, dict[str, float]]:
    """Per precision, each GPU's TFLOP/s (CPU workers left out): what the consistency score compares.

    A rolled-up pass whose members all ran on GPUs (``details.gpu_only``) lends its value map
    whole; anything else goes point by point through :func:`gemm_points`.
    """
    out: dict[str, dict[str, float]] = {}
    borrowed: set[str] = set()  # precisions whose map is a finding's own (not to be written to)
    rest = []
    for f in report.findings:
        details = f.details if f.check_id == GEMM_ID else {}
        subjects = details.get("subjects")
        dtype = details.get("dtype")
        if details.get("rolled_up") and details.get("gpu_only") and isinstance(subjects, dict) \
                and isinstance(dtype, str):
            if dtype not in out:  # the whole series, as the check rolled it up: used as it is
                out[dtype] = subjects
                borrowed.add(dtype)
                continue
            own = out[dtype] = dict(out[dtype]) if dtype in borrowed else out[dtype]
            borrowed.discard(dtype)
            own.update(subjects)
        else:
            rest.append(f)
    for p in _gemm_points(rest):
        if p.on_gpu:
            if p.dtype in borrowed:
                out[p.dtype] = dict(out[p.dtype])
                borrowed.discard(p.dtype)
            out.setdefault(p.dtype, {})[p.subject] = p.tflops
    return out


class Curve(msgspec.Struct):
    """A bandwidth sweep of one collective on one process group."""

    op: str
    scope: str
    group: str
    label: str
    points: list[tuple[int, float]] = []
    success: bool = True


def scope_op(key: str, test_type: Any) -> tuple[str, str]:
    """A collective's scope (its ``test_type``, ``""`` if none) and operation, from its key in
    ``nccl.communication_tests`` (``intra_node_all_reduce``)."""
    scope = str(test_type or "")
    op = key[len(scope) + 1:] if scope and key.startswith(scope + "_") else key
    return scope, op


def sweep_points(entry: CollectiveTest) -> list[tuple[int, float]]:
    """(message size, busbw) of a collective's sweep, sorted: the sizes with a finite bandwidth."""
    return sorted((r.size_bytes, busbw) for r in entry.results
                  if (busbw := num(r.busbw_gbps)) is not None and r.size_bytes)


def busbw_curves(report: ClusterReport) -> dict[str, list[Curve]]:
    """Per collective, one curve per process group (a group shared by several nodes appears once).

    Node-local groups give a line per node; the world and one-rank-per-node groups a line
    each, labelled with the scope, so a slow node's fabric stands apart from the network.
    """
    curves: dict[str, dict[tuple[str, str], Curve]] = {}
    typed = report
    names = node_names(typed)
    for i, nccl in enumerate(typed.nodes.blocks("nccl")):
        tests = nccl.communication_tests if nccl is not None else {}
        for key, entry in tests.items():
            scope, op = scope_op(key, entry.test_type)
            group = entry.group or key
            if (scope, group) in curves.get(op, {}):
                continue
            label = f"{names[i]} (node-local)" if scope == "intra_node" else f"{group} ({scope or 'group'})"
            curves.setdefault(op, {})[(scope, group)] = Curve(op, scope, group, label, sweep_points(entry),
                                                              entry.success)
    return {op: list(by_group.values()) for op, by_group in curves.items()}


def node_peak_busbw(report: ClusterReport) -> dict[str, dict[str, float]]:
    """Per collective, each node's peak node-local bus bandwidth (its NVLink/PCIe fabric).

    Read from the entries' JSON objects (:meth:`~..findings.model.NodeSections.collectives`, the
    faster path): the health scores read every node's, on rank 0 at any size."""
    out: dict[str, dict[str, float]] = {}
    typed = report
    names = node_names(typed)
    ops: dict[str, str] = {}  # test key -> collective: a handful of keys over 60,000 entries at 10,000 nodes
    for name, tests in zip(names, typed.nodes.collectives(), strict=False):
        for key, entry in tests.items():
            if entry.get("test_type") != "intra_node" or not entry.get("success"):
                continue
            peak = entry.get("peak_bandwidth_gbps")
            if type(peak) is not float or peak != peak:  # the common case is a plain float; NaN is no reading
                peak = num(peak)
                if peak is None:
                    continue
            op = ops.get(key)
            if op is None:
                op = ops[key] = scope_op(key, entry.get("test_type"))[1]
            per_node = out.get(op)
            if per_node is None:
                per_node = out[op] = {}
            per_node[name] = peak
    return out


class GpuSensors(msgspec.Struct, frozen=True):
    """What NVML said about one GPU when the node was checked, with its own limits."""

    subject: str
    temperature_c: float | None
    slowdown_c: float | None
    power_w: float | None
    power_limit_w: float | None


def _first(*values: Any) -> float | None:
    """The first number among the values (limits: the gpu section's, then older reports' facts)."""
    return next((n for n in map(num, values) if n is not None), None)


def gpu_sensors(report: ClusterReport) -> list[GpuSensors]:
    """Temperature and power per GPU, from the node sections (limits from the ``gpu`` block, or
    from the recorded facts in reports older than those fields)."""
    out = []
    typed = report
    names = node_names(typed)
    for i, (node_facts, gpus) in enumerate(zip(typed.nodes.blocks("facts"), typed.nodes.blocks("gpu"), strict=True)):
        facts = {g.get("index"): g for g in ((node_facts or {}).get("gpu") or {}).get("gpus") or []
                 if isinstance(g, Mapping)}
        for key, gpu in gpus.items():
            index = int(key.rsplit("_", 1)[-1]) if key.rsplit("_", 1)[-1].isdigit() else None
            fact = facts.get(index) or {}
            sensors = GpuSensors(f"{names[i]}/gpu{index if index is not None else key}",
                                 num(gpu.get("temperature_c")),
                                 _first(gpu.get("slowdown_temperature_c"), fact.get("temp_slowdown_c")),
                                 num(gpu.get("power_draw_w")),
                                 _first(gpu.get("power_limit_w"), fact.get("power_limit_w")))
            if sensors.temperature_c is not None or sensors.power_w is not None:
                out.append(sensors)
    return out


def worst_status(statuses: list[str]) -> str:
    """Worst of report status strings (PASS when empty)."""
    return Status.worst(statuses).value
