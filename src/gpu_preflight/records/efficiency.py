"""Work per watt under GEMM: a GPU's throughput over the power it drew for it.

The power limit says what a GPU may draw; the work per watt says what it does with it. A
degraded board, a part leaking current or a VRM running hot draws full power and computes
less for it, which limit comparisons cannot see. Pure: a GEMM result and the under-load
summary (:func:`gpu_preflight.backends.nvml_sampler.summarize`) in, figures out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cluster import ClusterView

__all__ = ["gathered_work_per_watt", "work_per_watt"]


Measured = tuple[float, float, int]  # (TFLOP/s, median watts of the GEMM phase, samples in the phase)


def work_per_watt(gemm: Sequence[Mapping[str, Any]], load: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per GEMM precision: the rank's TFLOP/s over the median power its GPU drew during that
    precision's GEMM phase (``gemm_<dtype>``), with both figures and the phase's sample count.

    A precision left out was not measured: a wrong or failed GEMM, or a phase without a power
    reading. Each GPU rank puts the result in its load summary (the report's
    ``nodes.<node>.load.<gpu>.work_per_watt``); rank 0 reads the same from what it gathered
    (:func:`gathered_work_per_watt`)."""
    phases = load.get("phases") or {}
    out: dict[str, dict[str, Any]] = {}
    for g in gemm:
        dtype = g.get("dtype")
        if dtype and (m := measured(g.get("tflops"), g.get("correct"), g.get("error"), phases.get(f"gemm_{dtype}"))):
            out[str(dtype)] = as_figures(m)
    return out


def as_figures(m: Measured) -> dict[str, Any]:
    """The report's form of one precision's measurement."""
    tflops, power, samples = m
    return {"tflops": round(tflops, 4), "power_w_median": round(power, 3), "tflops_per_watt": round(tflops / power, 6),
            "samples": samples}


def measured(tflops: Any, correct: Any, error: Any, phase: Any) -> Measured | None:
    """One precision's measurement, or None when it was not measured (rank 0 calls this for
    every GPU and precision of the job: plain dict reads, no ABC checks)."""
    if error or not correct or not tflops or not phase:
        return None
    try:
        power = phase["power_w"]["median"]
        return (float(tflops), float(power), int(phase.get("n", 0))) if tflops > 0 and power and power > 0 else None
    except (KeyError, TypeError, ValueError):  # no power reading in the phase, or not a number
        return None


def gathered_work_per_watt(c: ClusterView) -> dict[int, dict[str, Measured]]:
    """Each sampled GPU rank's measurements from what rank 0 gathered: the GEMM columns the
    node leaders packed and each rank's load summary (the ``load.efficiency`` check and the
    report's ``performance_summary`` read these). One pass over each precision's columns."""
    phases: dict[int, Any] = {}
    for rank, p in c.payloads.items():
        load = p.get("load")
        if type(load) is dict and load.get("phases"):
            phases[rank] = load["phases"]
    out: dict[int, dict[str, Measured]] = {}
    if not phases:  # CPU workers, replays: nothing was sampled
        return out
    for dtype, col in c.columns.gemm.items():
        key = f"gemm_{dtype}"
        for rank, tflops, correct, error in zip(col.rank, col.tflops, col.correct, col.error, strict=True):
            mine = phases.get(rank)
            if mine is not None and (m := measured(tflops, correct, error, mine.get(key))):
                out.setdefault(rank, {})[dtype] = m
    return out
