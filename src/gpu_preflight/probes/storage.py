"""The ``storage`` fact: each configured directory's write/read throughput and fsync latency.

Only a ``--full`` run (or ``--check system.io``) asks for it: it writes and reads a file of
``system.io_size_mib`` in every directory of ``system.io_paths``. A replay judges the recorded
node, whose disks are not here to measure, so it measures nothing and says so.
"""

from __future__ import annotations

from ..diagnostics.budgets import MARGIN_S
from ..records.storage import IoResult, StorageFacts
from ..registry import ProbeContext, probe


def storage_budget(ctx: ProbeContext) -> float:
    """Each directory's time limit, one after the other, and a margin (beyond a run's per-probe limit)."""
    cfg = ctx.config.system
    return len(cfg.io_paths) * cfg.io_timeout_s + MARGIN_S


@probe("storage", budget=storage_budget)
def storage_probe(ctx: ProbeContext) -> StorageFacts:
    """Measure every directory in turn (never two at once: they may share a device)."""
    if ctx.inputs.replay:
        return StorageFacts(skipped="a replay judges the recorded node; its disks are measured only live")
    from ..backends.storage import measure_io

    cfg = ctx.config.system
    results = []
    for path in cfg.io_paths:
        try:
            results.append(IoResult(path, measure_io(path, cfg.io_size_mib << 20, cfg.io_timeout_s)))
        except (OSError, ValueError) as exc:
            results.append(IoResult(path, error=str(exc) or type(exc).__name__))
    return StorageFacts(results)
