"""How a diagnostic probe runs its tool: time limit, raw output kept, run phase marked.

A probe's tool must finish before the engine gives up on the probe, or the engine would
report a bare "probe timed out" while the tool kept running unseen. So the tool's own
limit is the configured one capped just below the probe's (``ctx.timeout_s``: the run's
limit, or the probe's budget from :mod:`.budgets` where the engine grants it); when the
cap bites, the message says so, and how to raise it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING

from ..config.diagnostics import DiagnosticsConfig, diagnostics_config
from ..records.tools import ToolRun
from ..registry import TOOL_CACHE, ProbeContext
from .phase import run_phase

if TYPE_CHECKING:
    from ..backends.commands import ToolResult
    from ..backends.launcher.topology import Launcher

__all__ = ["diag_config", "launched_as_rank", "replay_reason", "run_and_keep", "suite_of", "time_limit"]


def tool_run(result: ToolResult, artifact: str | None = None, artifact_file: str | None = None) -> ToolRun:
    """The report's view of one tool run: what ran, how it ended, why it tells nothing (raw output by artifact name)."""
    return ToolRun(result.tool, list(result.argv), result.rc, round(result.duration_s, 3), result.timed_out,
                   result.missing, result.problem(), result.stderr[-2000:], artifact, artifact_file)


def diag_config(ctx: ProbeContext) -> DiagnosticsConfig:
    return diagnostics_config(ctx.config)


def suite_of(ctx: ProbeContext) -> str:
    """``quick`` or ``full``: the engine passes the run's suite in the probe options."""
    return "full" if ctx.inputs.suite == "full" else "quick"


def replay_reason(ctx: ProbeContext) -> str | None:
    """Why a live tool must not run: a replayed snapshot describes another host."""
    replay = ctx.inputs.replay
    return f"replayed snapshot ({replay}): live tools would describe this host, not the snapshot's" if replay else None


def launched_as_rank(environ: Mapping[str, str] | None = None) -> Launcher | None:
    """The launcher when this process is one rank of a job (its workers hold the GPUs), else ``None``."""
    from ..backends.launcher.topology import TopologyError, detect

    try:
        topo = detect(os.environ if environ is None else environ)
    except TopologyError:
        return None
    return topo.launcher if topo.is_distributed else None


def time_limit(ctx: ProbeContext, wanted_s: float, spent_s: float = 0.0) -> tuple[float, bool]:
    """The tool's limit: ``wanted_s`` capped a little below what is left of the probe's; and whether the cap bit."""
    cap = max(1.0, ctx.timeout_s - min(5.0, max(1.0, 0.05 * ctx.timeout_s)) - spent_s)
    return (wanted_s, False) if wanted_s <= cap else (cap, True)


def run_and_keep(ctx: ProbeContext, argv: Sequence[str], timeout_s: float, *, artifact: str, filename: str,
                 heavy: bool = False, capped: bool = False) -> tuple[ToolResult, ToolRun]:
    """Run ``argv`` and save its raw stdout (and stderr, when any) as artifacts.

    ``heavy`` marks the run in the run phase, so counter reads wait for it. The saved
    stdout is exactly what the tool printed: ``gpu-preflight judge`` reads it back.
    """
    from ..backends.commands import run_tool  # subprocess and friends: not for a replay, which runs no tool

    cfg = diag_config(ctx)
    cache = None if heavy else ctx.state.kept.get(TOOL_CACHE)  # a monitor's: light tools' answers, kept a while
    with run_phase(ctx.state).tool(argv[0]) if heavy else nullcontext():
        result = (cache.run(argv, timeout_s, extra_dirs=cfg.tool_dirs) if cache is not None
                  else run_tool(argv, timeout_s, extra_dirs=cfg.tool_dirs))
    saved = None
    if result.stdout:
        ctx.save_artifact(artifact, filename, result.stdout)
        saved = filename
    if result.stderr.strip():
        stem = filename.rsplit(".", 1)[0]
        ctx.save_artifact(f"{artifact}_stderr", f"{stem}.stderr.txt", result.stderr)
    run = tool_run(result, artifact if saved else None, saved)
    if result.timed_out and capped and run.problem:
        run.problem += (f" (the limit was capped by the run's per-probe time limit of {ctx.timeout_s:g} s: "
                        "raise --timeout-s)")
    return result, run
