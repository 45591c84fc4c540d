"""Time budgets of the diagnostic probes, and the DCGM levels a run asks for.

A probe declares its budget with ``@probe(name, budget=fn)`` (see
:func:`gpu_preflight.registry.probe`); the engine grants ``max(run limit, budget)``. Each
budget adds :data:`MARGIN_S` to the tool's time limit, so the tool is killed (an ERROR
naming it) before the engine gives up on the probe.

The DCGM levels and their limits are plain functions of the ``[diagnostics]`` settings and
the suite, because two places must agree on them: the ``dcgm`` probe that runs the levels,
and every rank of a distributed run, which waits that long at most while its node leader
runs them (:mod:`gpu_preflight.distributed.gpu_window`).
"""

from __future__ import annotations

from ..config.diagnostics import DiagnosticsConfig
from ..registry import probe_budget

__all__ = ["MARGIN_S", "dcgm_levels_for", "dcgm_levels_s", "level_timeout_s", "probe_budget"]

MARGIN_S = 10.0


def dcgm_levels_for(cfg: DiagnosticsConfig, suite: str) -> list[int]:
    """The levels a run of ``suite`` asks for, lowest first: ``[1]`` quick; ``[1, 2]`` (or ``[1, 3]``) full."""
    level = cfg.dcgm_level_full if suite == "full" else 1
    return [1, level] if level > 1 and cfg.dcgm_full_runs_basic else [level]


def level_timeout_s(cfg: DiagnosticsConfig, level: int) -> float:
    """The time limit of ``dcgmi diag -r <level>``."""
    return {1: cfg.dcgm_timeout_r1_s, 2: cfg.dcgm_timeout_r2_s}.get(level, cfg.dcgm_timeout_r3_s)


def dcgm_levels_s(cfg: DiagnosticsConfig, suite: str) -> float:
    """The levels' time limits and a margin: r2 needs minutes, far beyond a run's per-probe limit."""
    return sum(level_timeout_s(cfg, level) for level in dcgm_levels_for(cfg, suite)) + MARGIN_S
