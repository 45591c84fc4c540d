"""DCGM diagnostics run on this node (``dcgmi diag``), judged by the ``dcgmi-diag`` rules."""

from __future__ import annotations

from collections.abc import Iterator

from ..diagnostics.records import DcgmFacts
from ..diagnostics.verdicts import not_run, unreadable
from ..model import Finding, Status
from ..registry import CheckContext, check
from .evidence import judge_record


@check("dcgm.diag", needs=("dcgm",), tags=("active", "diagnostics"))
def dcgm_diag(ctx: CheckContext) -> Iterator[Finding]:
    """DCGM's own diagnostic passes on every GPU.

    Runs ``dcgmi diag -r 1 -j`` (quick: deployment checks, seconds) or, with ``--full``,
    ``-r 2`` (about 2 min) — ``-r 3`` (about 15 min of stress) only when
    ``diagnostics.dcgm_level_full = 3``. Extra arguments: ``diagnostics.dcgm_args``. One
    finding per failing or warning test and GPU, quoting DCGM's message (FAIL for a failed
    test, WARN for a warning); tests named in ``evidence.dcgm_ignore_tests`` are SKIP. The
    same rules judge a saved run (``gpu-preflight judge dcgm.txt``). SKIP with the reason
    when dcgmi is not installed or disabled; ERROR when it hangs, cannot start, cannot
    reach nv-hostengine or prints nothing readable. The raw output is kept as an artifact.
    """
    facts: DcgmFacts = ctx.fact("dcgm")
    if facts.run is None:
        yield Finding(ctx.check_id, Status.SKIP, ctx.host, "not_run", f"DCGM diagnostic not run: {facts.reason}",
                      details={"level": facts.level})
        return
    if (finding := not_run(ctx.check_id, ctx.host, facts.run)) is not None:
        yield finding
        return
    if facts.record is None:
        yield unreadable(ctx.check_id, ctx.host, facts.run, facts.parse_error)
        return
    for finding in judge_record("dcgmi-diag", facts.record, ctx.config, source=ctx.host):
        finding.details.setdefault("level", facts.level)
        finding.details.setdefault("artifact", facts.run.artifact_file)
        yield finding
