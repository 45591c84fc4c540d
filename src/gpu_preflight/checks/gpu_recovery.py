"""GPU recovery action reported by the driver (r570+)."""

from __future__ import annotations

from collections.abc import Iterator

from ..actions import Action
from ..ids import RECOVERY_ACTION_ID
from ..model import Finding, Status
from ..records import GpuFacts, GpuRecord
from ..recovery import MIN_DRIVER, recovery_action
from ..registry import CheckContext, check
from .common import is_number, per_gpu, version_below

RECOVERY_ACTIONS = {
    "gpu_reset": Action.RESET_GPU,
    "drain_and_reset": Action.RESET_GPU,
    "drain_p2p": Action.RESET_GPU,
    "bus_reset": Action.RESET_GPU,
    "node_reboot": Action.REBOOT_NODE,
    "system_reboot": Action.REBOOT_NODE,
    "recover_imex_domain": Action.ISOLATE_NODE,
}
"""The driver's own recovery action, said in our words (A100 memory error management, "Recovery
action flag"; DCGM maps DRAIN_P2P and DRAIN_AND_RESET to its RESET severity too). Recovering an IMEX
domain is done across the NVLink domain, not on this node: it stays out until that is done (DCGM's
DCGM_FR_IMEX_UNHEALTHY is ISOLATE)."""


@check(RECOVERY_ACTION_ID, needs=("gpu",), group="gpu_health", component="hardware_health", core=True,
       actions=RECOVERY_ACTIONS)
@per_gpu
def recovery(ctx: CheckContext, gpu: GpuRecord, subject: str) -> Iterator[Finding]:
    """The driver asks for no recovery action on any GPU.

    Reads NVML's ``GET_GPU_RECOVERY_ACTION`` field: NONE passes; GPU_RESET, NODE_REBOOT,
    DRAIN_AND_RESET (and the newer BUS_RESET, SYSTEM_REBOOT, RECOVER_IMEX_DOMAIN) FAIL;
    DRAIN_P2P WARNs. Each finding carries the driver's recommendation. SKIP with the
    reason on drivers older than r570, which do not expose the field.
    """
    facts: GpuFacts = ctx.fact("gpu")
    old = isinstance(facts.driver_version, str) and version_below(facts.driver_version, MIN_DRIVER)
    value = gpu.recovery_action
    if not is_number(value):
        why = (f"driver {facts.driver_version} is older than r{MIN_DRIVER}" if old
               else f"not exposed ({value})")
        yield ctx.finding(Status.SKIP, subject, "not_available",
                          f"{gpu.label}: recovery action unknown: {why}")
        return
    action = recovery_action(int(value))
    yield ctx.finding(action.status, subject,
                      "ok" if action.status is Status.PASS else action.name.lower(),
                      f"{gpu.label}: recovery action {action.name}", observed=action.name, expected="NONE",
                      recommendation=None if action.status is Status.PASS else action.recommendation)
