"""The ``dcgm`` fact: ``dcgmi diag -r <level> -j``, parsed by the ``dcgmi-diag`` parser.

Quick runs use level 1 (deployment checks, seconds), ``--full`` runs level 2 (about two
minutes) or, when ``diagnostics.dcgm_level_full = 3``, level 3 (about fifteen minutes of
stress). ``-j`` is asked for, but whatever DCGM prints is parsed: the parser reads both
the JSON of every version and the text table.
"""

from __future__ import annotations

from ..diagnostics.budgets import MARGIN_S, budget
from ..diagnostics.records import DcgmFacts
from ..diagnostics.running import diag_config, launched_as_rank, replay_reason, run_and_keep, suite_of, time_limit
from ..registry import ProbeContext, probe


def dcgm_level(ctx: ProbeContext) -> int:
    return diag_config(ctx).dcgm_level_full if suite_of(ctx) == "full" else 1


def level_timeout(ctx: ProbeContext, level: int) -> float:
    cfg = diag_config(ctx)
    return {1: cfg.dcgm_timeout_r1_s, 2: cfg.dcgm_timeout_r2_s}.get(level, cfg.dcgm_timeout_r3_s)


@budget("dcgm")
def dcgm_budget(ctx: ProbeContext) -> float:
    """The level's time limit and a margin: r2 needs minutes, far beyond a run's per-probe limit."""
    return level_timeout(ctx, dcgm_level(ctx)) + MARGIN_S


@probe("dcgm")
def dcgm_probe(ctx: ProbeContext) -> DcgmFacts:
    """Run the DCGM diagnostic of this run's level and parse its result."""
    from ..backends.commands import find_tool

    cfg = diag_config(ctx)
    level = dcgm_level(ctx)
    installed = find_tool("dcgmi", cfg.tool_dirs) is not None
    if not installed:
        return DcgmFacts(False, level, f"dcgmi not found (looked in {', '.join([*cfg.tool_dirs, 'PATH'])})")
    if not cfg.dcgm_enabled:
        return DcgmFacts(True, level, "disabled (diagnostics.dcgm_enabled = false)")
    if reason := replay_reason(ctx):
        return DcgmFacts(True, level, reason)
    from ..parsers.dcgmi import parse
    from ..parsers.errors import ParseError
    launcher = launched_as_rank()
    if level > 1 and launcher:
        return DcgmFacts(True, level, f"level {level} stresses the GPUs, which this {launcher} job's workers are "
                                      "using: run `gpu-preflight run --node-only --full` before the job")
    limit, capped = time_limit(ctx, level_timeout(ctx, level))
    argv = ["dcgmi", "diag", "-r", str(level), "-j", *cfg.dcgm_args]
    result, run = run_and_keep(ctx, argv, limit, artifact=f"dcgm_diag_r{level}",
                               filename=f"dcgmi_diag_r{level}.txt", heavy=True, capped=capped)
    facts = DcgmFacts(True, level, run=run)
    if run.problem is None:
        try:
            facts.record = parse(result.stdout if result.stdout.strip() else result.output)
        except ParseError as exc:
            facts.parse_error = str(exc)
    return facts
