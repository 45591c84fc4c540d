"""nccl-tests run on this node, judged by the ``nccl-tests`` rules (``gpu-preflight judge``'s)."""

from __future__ import annotations

from collections.abc import Iterator

from ..actions import Action
from ..model import Finding, Status
from ..records.tools import NcclTestsFacts
from ..registry import CheckContext, check
from .evidence import judge_record
from .evidence_nccl import NCCL_LOG_ACTIONS
from .verdicts import not_run, unreadable


def _judged(ctx: CheckContext) -> Iterator[Finding]:
    """This check's findings for every binary that ran; tool problems reported under both checks."""
    facts: NcclTestsFacts = ctx.fact("nccl_tests")
    if not facts.runs:
        yield Finding(ctx.check_id, Status.SKIP, ctx.host, "not_run", f"nccl-tests not run: {facts.reason}",
                      details={"not_found": facts.not_found})
        return
    for entry in facts.runs:
        subject = f"{ctx.host}/{entry.name}"
        if (finding := not_run(ctx.check_id, subject, entry.run)) is not None:
            yield finding
            continue
        if entry.record is None:
            yield unreadable(ctx.check_id, subject, entry.run, entry.parse_error)
            continue
        if entry.run.rc != 0 and not entry.record.errors and ctx.check_id.endswith("correctness"):
            yield Finding(ctx.check_id, Status.ERROR, subject, "tool_exit",
                          f"`{' '.join(entry.run.argv)}` exited with status {entry.run.rc} without reporting why",
                          details={"artifact": entry.run.artifact_file},
                          recommendation="Read the saved output; rerun with NCCL_DEBUG=WARN.")
        for finding in judge_record("nccl-tests", entry.record, ctx.config, source=subject):
            if finding.check_id == ctx.check_id or finding.check_id.startswith("evidence."):
                finding.details.setdefault("gpus", facts.gpus)
                finding.details.setdefault("artifact", entry.run.artifact_file)
                yield finding


CORRECTNESS_ACTIONS = {**NCCL_LOG_ACTIONS,
                       **dict.fromkeys(("wrong_results", "out_of_bounds", "error_too_large"), Action.ISOLATE_NODE)}
"""Wrong data from a collective inside one node is silent corruption in a GPU, NVLink or PCIe path:
DCGM isolates for the same finding (DCGM_FR_BROKEN_P2P_*_DEVICE, DCGM_FR_MEMORY_MISMATCH: ISOLATE).
A failed run's signature keeps the job-log table's action (NCCL_LOG_ACTIONS)."""


@check("nccl_tests.correctness", needs=("nccl_tests",), tags=("active", "diagnostics"),
       group="nccl_communication", component="network_infrastructure", actions=CORRECTNESS_ACTIONS)
def correctness(ctx: CheckContext) -> Iterator[Finding]:
    """nccl-tests on this node completes and finds no wrong values.

    Runs each binary of ``diagnostics.nccl_tests`` (``all_reduce_perf``, ``all_gather_perf``)
    found in ``diagnostics.nccl_tests_dir``/``tool_dirs``/``PATH`` as one process over the
    node's GPUs (``-g``), with ``diagnostics.nccl_tests_args_quick``/``_full``. FAIL when
    ``#wrong`` > 0, out-of-bounds values are found, or the test aborts (NCCL/CUDA failure,
    classified like a job log); ERROR when a binary hangs past
    ``diagnostics.nccl_tests_timeout_s``, exits non-zero without a reason or prints no
    table. SKIP with the reason when nccl-tests is not installed, the node has no GPU, or
    this process is one rank of a launched job (its workers hold the GPUs).
    """
    yield from _judged(ctx)


@check("nccl_tests.bandwidth", needs=("nccl_tests",), tags=("active", "diagnostics"),
       group="nccl_communication", component="network_infrastructure")
def bandwidth(ctx: CheckContext) -> Iterator[Finding]:
    """nccl-tests on this node reaches the bus-bandwidth floor.

    The peak out-of-place bus bandwidth of each binary against
    ``evidence.nccl_busbw_min_gbps`` (FAIL below; SKIP carrying the measured peak and
    average when no floor is set). Same runs, artifacts and SKIP/ERROR rules as
    ``nccl_tests.correctness``.
    """
    yield from _judged(ctx)
