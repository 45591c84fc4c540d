"""What the endpoints answer from: immutable snapshots and the alive/ready rules.

The monitor loop replaces one :class:`Snapshot` per tick; request threads only read the
current reference, so no request ever waits for a check and no lock is held while
answering. Both rules fail closed: no verdict yet, a stale verdict, a crashed loop or a
silent agent all answer "no".
"""

from __future__ import annotations

import json
from functools import cached_property

import msgspec

from ..findings.health import HealthStatus
from ..model import NodeReport, gating_statuses
from ..report import build_report
from . import metrics as exposition  # the module, looked up per call: tests count its renders


class Snapshot(msgspec.Struct, frozen=True, dict=True):
    """The result of one monitor tick, with its renderings prepared once."""

    tick: int
    finished_at: float
    finished_mono: float
    duration_s: float
    report: NodeReport | None
    error: str | None
    gpu: HealthStatus | None  # None when GPU monitoring is disabled
    runs_total: int
    run_failures_total: int

    @cached_property
    def metrics(self) -> str:
        """The per-tick part of ``/metrics``, rendered at the first scrape after the tick: a
        1-second monitor scraped every 15 s would otherwise render 14 expositions nobody reads."""
        return exposition.tick_metrics(self.report, self.gpu, self.runs_total, self.run_failures_total,
                                       self.duration_s, self.finished_at)

    @cached_property
    def report_json(self) -> str:
        """The canonical report as JSON ("null" without a report), built on first use: most
        ticks are never looked at through /status, and building it is most of a tick's cost."""
        return json.dumps(build_report([self.report])) if self.report is not None else "null"


class AliveSample(msgspec.Struct, frozen=True):
    """The agent's last reported progress (Unix time), as sampled from its callback.

    ``progress_mono`` is when, on this process's monotonic clock, that progress was made:
    liveness is judged on it, so a wall clock stepped forward (NTP, a VM resumed) cannot make
    a live agent look silent, nor one stepped back make a silent agent look live.
    """

    progress: float | None
    sampled_mono: float
    error: str | None = None
    progress_mono: float | None = None


def readiness(snap: Snapshot | None, *, now_mono: float, stale_after_s: float, fail_on: str,
              healthy_when_unknown: bool) -> tuple[bool, list[str]]:
    """Fit for work: a fresh verdict whose node checks do not gate and whose GPUs are healthy."""
    if snap is None:
        return False, ["no verdict yet: the first node checks have not finished"]
    age = now_mono - snap.finished_mono
    if age > stale_after_s:
        return False, [f"last verdict is {age:.1f} s old (limit {stale_after_s:g} s): the monitor loop is stuck"]
    reasons: list[str] = []
    if snap.error is not None or snap.report is None:
        reasons.append(snap.error or "no node report")
    elif snap.report.status in gating_statuses(fail_on):
        failed = [r.check_id for r in snap.report.results if r.status in gating_statuses(fail_on)]
        reasons.append(f"node checks {snap.report.status.value}: {', '.join(failed)}")
    if snap.gpu is not None and not snap.gpu.ok(healthy_when_unknown):
        reasons.append(f"GPU health {snap.gpu.state.value}: {snap.gpu.reason}")
    if reasons:
        return False, reasons
    verdict = snap.report.status.value if snap.report else "?"
    gpus = "GPU monitoring disabled" if snap.gpu is None else f"GPU health {snap.gpu.state.value}"
    return True, [f"node checks {verdict}; {gpus}"]


def progress_at(progress: float, previous: AliveSample, *, wall: float, now_mono: float) -> float | None:
    """When the agent's ``progress`` (its Unix time) happened, on the monotonic clock.

    The same value as at the last sample is no new progress: its time is kept. A larger
    value was made since the last sample; how long ago is read from the wall clock (``wall -
    progress``), but only within the time since that sample, so a wall clock that jumped
    forward moves the answer by one sampling period at most. The first value, or one that
    went back (a clock stepped back, an agent that reports an older time), has no sample
    to bound it and is taken at its word.
    """
    if previous.progress is not None and progress == previous.progress:
        return previous.progress_mono
    advanced = previous.progress is not None and progress > previous.progress
    earliest = previous.sampled_mono if advanced else float("-inf")
    return max(earliest, now_mono - max(0.0, wall - progress))


def liveness(sample: AliveSample, *, now_mono: float, timeout_s: float, sampler_alive: bool,
             loop_alive: bool, loop_busy_for: float | None, tick_deadline_s: float) -> tuple[bool, list[str]]:
    """Alive: the monitor loop runs and is not stuck, and the agent reported progress within ``timeout_s``,
    all measured on the monotonic clock (see :class:`AliveSample`)."""
    reasons: list[str] = []
    if not loop_alive:
        reasons.append("the monitor loop is not running")
    elif loop_busy_for is not None and loop_busy_for > tick_deadline_s + 1.0:
        reasons.append(f"the monitor loop has been in one tick for {loop_busy_for:.1f} s")
    if not sampler_alive or now_mono - sample.sampled_mono > timeout_s:
        reasons.append("the alive callback is no longer sampled")
    elif sample.error is not None:
        reasons.append(sample.error)
    elif sample.progress_mono is not None and now_mono - sample.progress_mono > timeout_s:
        reasons.append(f"no progress for {now_mono - sample.progress_mono:.1f} s (timeout {timeout_s:g} s)")
    return not reasons, reasons or ["monitor loop running; agent progress within timeout"]
