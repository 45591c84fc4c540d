"""Helpers shared by check modules: which GPUs to judge, subjects, N/A handling.

Checks stay pure: they receive facts and thresholds through the context and return
findings. These helpers only encode the conventions every GPU check follows — no GPU to
judge is a SKIP with the reason, a lost GPU is left to ``gpu.nvml``, an unreadable value
is a SKIP naming what could not be read, an impossible one is an ERROR naming the reading.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from typing import Any, TypeGuard

from ..model import NA, Finding, Status
from ..records import GpuFacts, GpuRecord
from ..registry import CheckContext


def gpu_subject(ctx: CheckContext, gpu: GpuRecord) -> str:
    return f"{ctx.host}/{gpu.label}"


def gpu_targets(ctx: CheckContext, check_id: str) -> tuple[list[GpuRecord], list[Finding]]:
    """GPUs this check can judge, plus SKIP findings for those it cannot."""
    facts: GpuFacts = ctx.fact("gpu")
    if not facts.available:
        return [], [Finding(check_id, Status.SKIP, ctx.host, "no_nvml", f"no GPU to check: {facts.reason}")]
    if not facts.gpus:
        return [], [Finding(check_id, Status.SKIP, ctx.host, "no_gpus", "no GPU to check: NVML reports 0 GPUs")]
    usable, skipped = [], []
    for gpu in facts.gpus:
        if gpu.lost:
            skipped.append(Finding(check_id, Status.SKIP, gpu_subject(ctx, gpu), "gpu_lost",
                                   f"not checked: {gpu.lost} (see gpu.nvml)"))
        else:
            usable.append(gpu)
    return usable, skipped


def per_gpu(judge: Callable[[CheckContext, GpuRecord, str], Iterator[Finding]]) -> Callable[[CheckContext],
                                                                                          Iterator[Finding]]:
    """Turn a judgement of one GPU into a check of every GPU on the node.

    The wrapper applies the common rules (no GPU → SKIP with the reason, lost GPU → left
    to ``gpu.nvml``) so each check states only what it judges.
    """

    @functools.wraps(judge)
    def check_all(ctx: CheckContext) -> Iterator[Finding]:
        gpus, skipped = gpu_targets(ctx, ctx.check_id)
        yield from skipped
        for gpu in gpus:
            yield from judge(ctx, gpu, gpu_subject(ctx, gpu))

    return check_all


def not_read(ctx: CheckContext, subject: str, what: str, value: Any) -> Finding:
    """SKIP for a reading NVML did not give (never a PASS)."""
    reason = value.reason if isinstance(value, NA) else "not available"
    return ctx.finding(Status.SKIP, subject, "not_available", f"{what}: {reason}")


def impossible(ctx: CheckContext, subject: str, what: str, value: float, low: float, high: float,
               unit: str) -> Finding | None:
    """ERROR for a reading no working GPU gives (outside ``[low, high]``), else None.

    Judged as if it were true, an impossible answer passes: a 0 W limit is not "below the
    default" when the default reads 0 too, and a 1000 C slowdown threshold is never reached.
    The bounds are the config's sanity limits, so a GPU model's profile can narrow them.
    """
    if low <= value <= high:
        return None
    return ctx.finding(Status.ERROR, subject, "impossible_reading",
                       f"{what} {value:g} {unit} is impossible (a working GPU reads {low:g} to {high:g} {unit}); "
                       "it was not judged", observed=value, expected=f"{low:g} to {high:g}", unit=unit,
                       recommendation="NVML gave an answer no working GPU gives: check the driver and the GPU "
                                      "(nvidia-smi -q); reset the GPU or drain the node if it persists.")


# What to do about a GPU count that is not the expected one, wherever the count was read (NVML,
# a topology matrix): one wording, so the same fault reads the same in every report.
GPUS_MISSING_ADVICE = ("Check nvidia-smi and dmesg for GPUs that fell off the bus (Xid 79); drain the node until "
                       "every GPU is back.")
GPUS_EXTRA_ADVICE = "Check the node type or the configured expected_count."


# The readings every working GPU answers (attribute, name in findings). A GPU that answers
# none of them is not a GPU we can say anything about, whatever its other checks SKIP.
CORE_READINGS = (("name", "name"), ("uuid", "UUID"), ("memory_total_bytes", "memory total"),
                 ("temperature_c", "temperature"))


def unreadable_core(gpu: GpuRecord) -> dict[str, str] | None:
    """Each core reading and why NVML did not give it, when it gave none of them; else None.

    The one rule for "this GPU answered nothing we can vouch for": ``gpu.nvml`` reports such
    a GPU as ERROR, and the GPU health verdict (``serve``, the health API) reads that finding
    as unknown health, so ``run`` and ``serve`` cannot disagree about it.
    """
    values = {label: getattr(gpu, attr) for attr, label in CORE_READINGS}
    if not all(isinstance(v, NA) for v in values.values()):
        return None
    return {label: v.reason for label, v in values.items()}


def version_tuple(text: str) -> tuple[int, ...]:
    """``"580.159.04"`` → ``(580, 159, 4)``; non-numeric parts are ignored."""
    return tuple(int(p) for p in re.findall(r"\d+", text))


@functools.lru_cache(maxsize=1024)  # 10,000 nodes ask about the same few versions
def version_below(actual: str, minimum: str) -> bool:
    a, m = version_tuple(actual), version_tuple(minimum)
    width = max(len(a), len(m))
    return a + (0,) * (width - len(a)) < m + (0,) * (width - len(m))


def is_number(value: object) -> TypeGuard[int | float]:
    """A real reading (not NA, not a bool); narrows the type for the checks."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
