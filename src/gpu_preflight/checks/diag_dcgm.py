"""DCGM diagnostics run on this node (``dcgmi diag``), judged by the ``dcgmi-diag`` rules."""

from __future__ import annotations

from collections.abc import Iterator

from ..model import Finding, Status
from ..records.tools import DcgmFacts
from ..registry import CheckContext, check
from .evidence import judge_record
from .verdicts import not_run, unreadable


@check("dcgm.diag", needs=("dcgm",), tags=("active", "diagnostics"),
       group=("dcgm_diagnostics", "dcgm_basic@r1", "dcgm_extended@r2", "dcgm_extended@r3"), component="hardware_health",
       core=True)
def dcgm_diag(ctx: CheckContext) -> Iterator[Finding]:
    """DCGM's own diagnostic passes on every GPU.

    Runs ``dcgmi diag -r 1 -j`` (quick: deployment checks, seconds) or, with ``--full``,
    ``-r 1`` and then ``-r 2`` (about 2 min) — ``-r 3`` (about 15 min of stress) only when
    ``diagnostics.dcgm_level_full = 3``; each finding names its level (``details.level``),
    which the report's ``dcgm_basic`` and ``dcgm_extended`` results follow. Extra
    arguments: ``diagnostics.dcgm_args``. One finding per failing or warning test and GPU,
    quoting DCGM's message (FAIL for a failed test, WARN for a warning); tests named in
    ``evidence.dcgm_ignore_tests`` are SKIP. The same rules judge a saved run
    (``gpu-preflight judge dcgm.txt``). SKIP with the reason when dcgmi is not installed or
    disabled; ERROR when it hangs, cannot start, cannot reach nv-hostengine or prints
    nothing readable. The raw output is kept as an artifact.
    """
    facts: DcgmFacts = ctx.fact("dcgm")
    levels = facts.levels()
    for run in levels:
        said = f"level {run.level}: " if len(levels) > 1 else ""
        if run.run is None:
            yield ctx.finding(Status.SKIP, ctx.host, "not_run", f"DCGM diagnostic {said}not run: "
                              f"{run.reason}", details={"level": run.level})
            continue
        finding = not_run(ctx.check_id, ctx.host, run.run)
        if finding is None and run.record is None:
            finding = unreadable(ctx.check_id, ctx.host, run.run, run.parse_error)
        judged = [finding] if finding is not None else judge_record("dcgmi-diag", run.record, ctx.config,
                                                                     source=ctx.host)
        for f in judged:
            f.details.setdefault("level", run.level)
            f.details.setdefault("artifact", run.run.artifact_file)
            if said:
                f.summary = said + f.summary
            yield f
