"""The margin by which a diagnostic probe's time budget exceeds its tool's own limit.

A probe declares its budget with ``@probe(name, budget=fn)`` (see
:func:`gpu_preflight.registry.probe`); the engine grants ``max(run limit, budget)``. Each
budget adds :data:`MARGIN_S` to the tool's time limit, so the tool is killed (an ERROR
naming it) before the engine gives up on the probe.
"""

from __future__ import annotations

from ..registry import probe_budget

__all__ = ["MARGIN_S", "probe_budget"]

MARGIN_S = 10.0
