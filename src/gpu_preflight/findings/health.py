"""GPU health verdicts, derived from the findings of the node checks.

The health API and the health server do not read NVML or map recovery actions on their
own: they judge the findings of ``gpu.nvml`` (is each GPU answering) and
``gpu.recovery_action`` (what the driver asks for, mapped by
:mod:`gpu_preflight.recovery`). A GPU is *healthy* only when NVML answered and its
recovery action is NONE; *unhealthy* when it is lost, missing or needs an action;
*unknown* when it could not be looked at (no pynvml, no driver, driver older than r570,
a hung read). Unknown is never healthy unless the caller asks for it explicitly.
"""

from __future__ import annotations

import enum
import re
import time
from typing import Any

import msgspec

from ..ids import NVML_ID, NVML_UNREADABLE_CODE, RECOVERY_ACTION_ID
from ..model import Finding, NodeReport, Status

CHECK_IDS = (NVML_ID, RECOVERY_ACTION_ID)
_GPU_SUBJECT = re.compile(r"/gpu(\d+)$")


class HealthState(enum.StrEnum):
    """Worst first when ranked: unhealthy outranks unknown, which outranks healthy."""

    HEALTHY = "healthy"
    UNKNOWN = "unknown"
    UNHEALTHY = "unhealthy"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {HealthState.HEALTHY: 0, HealthState.UNKNOWN: 1, HealthState.UNHEALTHY: 2}


class GpuHealth(msgspec.Struct, frozen=True):
    """One GPU's verdict; ``recovery_action`` is the NVML action name when it was read."""

    index: int
    state: HealthState
    reason: str
    recovery_action: str | None = None
    recommendation: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "status": self.state.value, "reason": self.reason,
                "recovery_action": self.recovery_action, "recommendation": self.recommendation}


class HealthStatus(msgspec.Struct, frozen=True):
    """The verdict of one health check for the monitored GPUs."""

    state: HealthState
    reason: str
    gpus: tuple[GpuHealth, ...] = ()
    device_index: int | None = None
    checked_at: float = msgspec.field(default_factory=time.time)
    duration_s: float = 0.0

    def ok(self, healthy_when_unknown: bool = False) -> bool:
        """Fit for work: healthy, or unknown when the caller chose to accept that."""
        return self.state is HealthState.HEALTHY or (healthy_when_unknown and self.state is HealthState.UNKNOWN)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.state.value, "reason": self.reason, "device_index": self.device_index,
                "gpus": [g.to_dict() for g in self.gpus], "checked_at": self.checked_at,
                "duration_s": round(self.duration_s, 6)}


def unknown(reason: str, device_index: int | None = None, duration_s: float = 0.0) -> HealthStatus:
    return HealthStatus(HealthState.UNKNOWN, reason, device_index=device_index, duration_s=duration_s)


def _gpu_index(subject: str) -> int | None:
    match = _GPU_SUBJECT.search(subject)
    return int(match.group(1)) if match else None


def _judge_finding(f: Finding) -> tuple[HealthState, str, str | None, str | None] | None:
    """A finding's bearing on health: (state, reason, action name, recommendation), or None."""
    if f.check_id == NVML_ID:
        if f.status is Status.FAIL:
            return HealthState.UNHEALTHY, f.summary, None, f.recommendation
        if f.status in (Status.SKIP, Status.ERROR) and _gpu_index(f.subject) is None:
            return HealthState.UNKNOWN, f.summary, None, None
        if f.status is Status.ERROR and f.code == NVML_UNREADABLE_CODE:  # run's rule: nothing could be judged
            return HealthState.UNKNOWN, f.summary, None, None
        return None  # PASS, or NVML refusing unrelated readings of one GPU
    if f.status is Status.PASS:
        return HealthState.HEALTHY, f.summary, str(f.observed), None
    if f.status in (Status.WARN, Status.FAIL):
        return HealthState.UNHEALTHY, f.summary, str(f.observed), f.recommendation
    return HealthState.UNKNOWN, f.summary, None, None


def judge(report: NodeReport, device_index: int | None = None, duration_s: float = 0.0) -> HealthStatus:
    """GPU health from a node report that ran ``gpu.nvml`` and ``gpu.recovery_action``."""
    host: list[tuple[HealthState, str]] = []
    per_gpu: dict[int, list[tuple[HealthState, str, str | None, str | None]]] = {}
    for f in report.findings:
        if f.check_id not in CHECK_IDS:
            continue
        verdict = _judge_finding(f)
        if verdict is None:
            continue
        index = _gpu_index(f.subject)
        if index is None:
            host.append(verdict[:2])
        else:
            per_gpu.setdefault(index, []).append(verdict)
    gpus = tuple(_gpu_health(i, v) for i, v in sorted(per_gpu.items())
                 if device_index is None or i == device_index)
    if device_index is not None and not gpus and not host:
        known = ", ".join(f"gpu{i}" for i in sorted(per_gpu)) or "none"
        gpus = (GpuHealth(device_index, HealthState.UNHEALTHY,
                          f"gpu{device_index} not present (NVML lists: {known})"),)
    return _overall(host, gpus, device_index, duration_s)


def _gpu_health(index: int, verdicts: list[tuple[HealthState, str, str | None, str | None]]) -> GpuHealth:
    worst = max(verdicts, key=lambda v: v[0].rank)
    action = next((v[2] for v in verdicts if v[2] is not None), None)
    return GpuHealth(index, worst[0], worst[1], action, worst[3])


def _overall(host: list[tuple[HealthState, str]], gpus: tuple[GpuHealth, ...], device_index: int | None,
             duration_s: float) -> HealthStatus:
    states = [s for s, _ in host] + [g.state for g in gpus]
    if not states:
        return unknown("the node checks judged no GPU (gpu.nvml / gpu.recovery_action did not run)",
                       device_index, duration_s)
    worst = max(states, key=lambda s: s.rank)
    if worst is HealthState.HEALTHY:
        reason = f"{len(gpus)} GPU(s): NVML answers and no recovery action is needed"
    else:
        reasons = [r for s, r in host if s is worst] + [g.reason for g in gpus if g.state is worst]
        reason = "; ".join(dict.fromkeys(reasons))
    return HealthStatus(worst, reason, gpus, device_index, duration_s=duration_s)
