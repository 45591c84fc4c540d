"""How long a diagnostic probe may take, which can be far beyond a run's per-probe limit.

A node run gives every probe the same limit (``--timeout-s``, 30 s by default), right for
reading NVML and /proc but not for ``dcgmi diag -r 2`` (about 2 min) or nccl-tests. A
probe that needs more registers a budget function here; the engine grants
``max(run limit, budget)``. Each budget exceeds the tool's own time limit by a margin, so
the tool is killed (an ERROR naming it) before the engine gives up on the probe.
"""

from __future__ import annotations

from collections.abc import Callable

from ..registries import Registry
from ..registry import ProbeContext

__all__ = ["BUDGETS", "budget", "probe_budget"]

BudgetFn = Callable[[ProbeContext], float]
MARGIN_S = 10.0
BUDGETS: Registry[BudgetFn] = Registry("probe budget")  # registered beside their probes, imported with them


def budget(name: str) -> Callable[[BudgetFn], BudgetFn]:
    """Register the time budget of probe ``name`` (seconds, from the run's config and options)."""
    return BUDGETS.decorator(name)


def probe_budget(name: str, ctx: ProbeContext) -> float:
    """Seconds probe ``name`` may run (0 when it has no budget of its own); never raises."""
    fn = BUDGETS.find(name)
    if fn is None:
        return 0.0
    try:
        return max(0.0, float(fn(ctx)))
    except Exception:  # a budget bug must not stop the run; the run's limit then applies
        return 0.0
