"""The ``dcgm`` fact: ``dcgmi diag -r <level> -j``, parsed by the ``dcgmi-diag`` parser.

Quick runs use level 1 (deployment checks, seconds), ``--full`` runs level 1 and then
level 2 (about two minutes) or, when ``diagnostics.dcgm_level_full = 3``, level 3 (about
fifteen minutes of stress): the report keeps both, as ``basic`` and ``extended``.
In a distributed run the node leader's probe runs them in the node's GPU window, before any
rank of the node touches CUDA (:mod:`gpu_preflight.diagnostics.window`).
``-j`` is asked for, but whatever DCGM prints is parsed: the parser reads both the JSON
of every version and the text table.
"""

from __future__ import annotations

from ..diagnostics.budgets import dcgm_levels_for, dcgm_levels_s, level_timeout_s
from ..diagnostics.running import diag_config, launched_as_rank, replay_reason, run_and_keep, suite_of, time_limit
from ..diagnostics.window import GPU_WINDOW, GpuWindow
from ..records.tools import DcgmFacts
from ..registry import ProbeContext, probe


def dcgm_levels(ctx: ProbeContext) -> list[int]:
    """The levels this run asks for, lowest first: ``[1]`` quick; ``[1, 2]`` (or ``[1, 3]``) full."""
    return dcgm_levels_for(diag_config(ctx), suite_of(ctx))


def dcgm_budget(ctx: ProbeContext) -> float:
    """The levels' time limits and a margin: r2 needs minutes, far beyond a run's per-probe limit."""
    return dcgm_levels_s(diag_config(ctx), suite_of(ctx))


def _run_level(ctx: ProbeContext, level: int, spent_s: float) -> DcgmFacts:
    """One ``dcgmi diag -r <level> -j``, its raw output kept as an artifact and parsed."""
    from ..parsers.dcgmi import parse
    from ..parsers.errors import ParseError

    cfg = diag_config(ctx)
    limit, capped = time_limit(ctx, level_timeout_s(cfg, level), spent_s)
    argv = ["dcgmi", "diag", "-r", str(level), "-j", *cfg.dcgm_args]
    result, run = run_and_keep(ctx, argv, limit, artifact=f"dcgm_diag_r{level}",
                               filename=f"dcgmi_diag_r{level}.txt", heavy=True, capped=capped)
    facts = DcgmFacts(True, level, run=run, inline_max_bytes=cfg.dcgm_raw_output_inline_max_bytes)
    if run.problem is None:
        try:
            facts.record = parse(result.stdout if result.stdout.strip() else result.output)
        except ParseError as exc:
            facts.parse_error = str(exc)
    return facts


def _why_not_further(basic: DcgmFacts) -> str | None:
    """Why the extended level is not worth starting after this level-1 run (DCGM itself could not run)."""
    run = basic.run
    if run is None:
        return None
    if run.problem is not None:
        return f"`dcgmi diag -r 1` did not complete ({run.problem})"
    if basic.record is None:
        return "`dcgmi diag -r 1` gave no readable result"
    if basic.record.overall == "error":
        return "`dcgmi diag -r 1` reported that DCGM could not run the diagnostic"
    return None


@probe("dcgm", budget=dcgm_budget)
def dcgm_probe(ctx: ProbeContext) -> DcgmFacts:
    """Run the DCGM diagnostic of this run's level(s) and parse each result.

    A full run starts with level 1 (seconds), then runs its own level; level 2 or 3 is
    not started when level 1 shows that DCGM cannot run at all (it would only wait out
    its time limit), nor inside a launcher job whose workers are using the GPUs. A node
    leader that holds its node's GPU window runs them before the workers touch the GPUs,
    and closes the window when done, whatever the outcome.
    """
    window = ctx.state.kept.get(GPU_WINDOW)
    try:
        return _levels(ctx, window if isinstance(window, GpuWindow) else None)
    finally:
        if isinstance(window, GpuWindow):
            window.close()


def _levels(ctx: ProbeContext, window: GpuWindow | None) -> DcgmFacts:
    cfg = diag_config(ctx)
    levels = dcgm_levels(ctx)
    level = levels[-1]
    inline = cfg.dcgm_raw_output_inline_max_bytes
    if reason := replay_reason(ctx):  # before any lookup: this host's PATH says nothing of the snapshot's
        return DcgmFacts(False, level, reason)
    from ..backends.commands import find_tool  # a replay never loads the tool runner (subprocess and all)

    installed = find_tool("dcgmi", cfg.tool_dirs) is not None
    if not installed:
        return DcgmFacts(False, level, f"dcgmi not found (looked in {', '.join([*cfg.tool_dirs, 'PATH'])})")
    if not cfg.dcgm_enabled:
        return DcgmFacts(True, level, "disabled (diagnostics.dcgm_enabled = false)")
    basic = _run_level(ctx, 1, 0.0) if len(levels) > 1 else None
    launcher = launched_as_rank()
    if level > 1 and launcher and window is None:
        return DcgmFacts(True, level, f"level {level} stresses the GPUs, which this {launcher} job's workers are "
                                      "using: run `gpu-preflight run --node-only --full` before the job",
                         basic=basic, inline_max_bytes=inline)
    if basic is not None and (why := _why_not_further(basic)):
        return DcgmFacts(True, level, f"level {level} not started: {why}", basic=basic, inline_max_bytes=inline)
    facts = _run_level(ctx, level, basic.run.duration_s if basic is not None and basic.run else 0.0)
    facts.basic = basic
    return facts
