"""The ``infiniband`` fact: RDMA ports from sysfs, their error counters across the run, ibstat.

Counters are read when the probe starts and again once the run's heavy tools (DCGM,
nccl-tests; see :mod:`gpu_preflight.diagnostics.phase`) have finished, but at least
``diagnostics.ib_counter_min_window_s`` later: an increase is what happened on the link
while this run used it, which a lifetime total cannot say. ``ibstat``/``ibv_devinfo``
run when installed; their output is kept and parsed by the existing parsers.
"""

from __future__ import annotations

import time

from ..diagnostics.budgets import MARGIN_S
from ..diagnostics.phase import run_phase
from ..diagnostics.running import diag_config, replay_reason, run_and_keep, time_limit
from ..records.tools import IbToolRun, InfinibandFacts, ToolRun
from ..registry import ProbeContext, probe, probe_budget

_KINDS = {"ibstat": "ibstat", "ibv_devinfo": "ibv-devinfo", "ibstatus": "ibstatus"}


def infiniband_budget(ctx: ProbeContext) -> float:
    """Long enough to wait for the heavy tools its counter window must span."""
    return max(probe_budget("dcgm", ctx), probe_budget("nccl_tests", ctx)) + MARGIN_S


@probe("infiniband", budget=infiniband_budget)
def infiniband_probe(ctx: ProbeContext) -> InfinibandFacts:
    """Read RDMA ports and counters from sysfs (start and end of the run) and run ibstat/ibv_devinfo."""
    cfg = diag_config(ctx)
    if reason := replay_reason(ctx):
        return InfinibandFacts(cfg.infiniband_sysfs, readable=False, reason=reason)
    from ..backends.commands import find_tool
    from ..backends.infiniband import read_counters, read_tree

    started = time.monotonic()
    tree = read_tree(cfg.infiniband_sysfs)
    facts = InfinibandFacts(tree.root, tree.readable, tree.reason, tree.devices, tree.ports)
    if not tree.devices:
        return facts
    facts.counters_start = read_counters(tree.root)
    for name in cfg.ib_tools:
        if find_tool(name, cfg.tool_dirs) is None:
            continue
        limit, capped = time_limit(ctx, cfg.tool_timeout_s, spent_s=time.monotonic() - started)
        result, run = run_and_keep(ctx, [name], limit, artifact=name, filename=f"{name}.txt", capped=capped)
        facts.tools.append(_parsed(name, result.output, run))
    budget, _ = time_limit(ctx, float("inf"), spent_s=time.monotonic() - started)
    run_phase(ctx.state).wait_idle(cfg.ib_counter_min_window_s, max(0.0, budget - 0.5))
    facts.counters_end = read_counters(tree.root)
    facts.window_s = round(time.monotonic() - started, 3)
    return facts


def _parsed(name: str, output: str, run: ToolRun) -> IbToolRun:
    from ..parsers.detect import parse_text
    from ..parsers.errors import ParseError

    entry = IbToolRun(name, run)
    if run.problem is None and name in _KINDS:
        try:
            entry.record = parse_text(output, _KINDS[name])[1]
        except ParseError as exc:
            entry.parse_error = str(exc)
    return entry
