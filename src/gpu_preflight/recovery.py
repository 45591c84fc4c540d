"""NVML GPU recovery actions (field ``NVML_FI_DEV_GET_GPU_RECOVERY_ACTION``, driver r570+).

The driver tells what a GPU needs to become usable again. This table maps each action
to our status and an operator's next step; the node checks and the health monitor
share it so both say the same thing about the same GPU.
"""

from __future__ import annotations

import msgspec

from .model import Status

MIN_DRIVER = "570"


class RecoveryAction(msgspec.Struct, frozen=True):
    """What NVML's recovery-action value means: its name, the status it gives a GPU and what to do."""

    value: int
    name: str
    status: Status
    recommendation: str


RECOVERY_ACTIONS: dict[int, RecoveryAction] = {a.value: a for a in (
    RecoveryAction(0, "NONE", Status.PASS, "No action needed."),
    RecoveryAction(1, "GPU_RESET", Status.FAIL,
                   "Drain the node, stop all processes on the GPU and reset it (nvidia-smi -r -i N)."),
    RecoveryAction(2, "NODE_REBOOT", Status.FAIL, "Drain the node and reboot it."),
    RecoveryAction(3, "DRAIN_P2P", Status.WARN,
                   "Stop peer-to-peer traffic to this GPU (finish or migrate multi-GPU jobs), then reset it."),
    RecoveryAction(4, "DRAIN_AND_RESET", Status.FAIL,
                   "The GPU runs at reduced capacity: drain the node, then reset the GPU."),
    RecoveryAction(5, "RECOVER_IMEX_DOMAIN", Status.FAIL,
                   "Recover the IMEX domain (restart the IMEX daemons of the NVLink domain)."),
    RecoveryAction(6, "BUS_RESET", Status.FAIL, "Drain the node and perform a PCIe bus reset of the GPU."),
    RecoveryAction(7, "SYSTEM_REBOOT", Status.FAIL, "Drain the node and reboot the whole system."),
)}


def recovery_action(value: int) -> RecoveryAction:
    """The action for an NVML value; an unknown value is a WARN that asks for a look."""
    return RECOVERY_ACTIONS.get(value) or RecoveryAction(
        value, f"UNKNOWN({value})", Status.WARN,
        "Unknown recovery action: check nvidia-smi -q and the driver release notes.")
