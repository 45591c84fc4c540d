"""``nvidia-smi`` in all the forms people save it: one record, several readers.

``-q -x`` (XML), ``-q`` (text), ``--query-gpu ... --format=csv`` and the default table all
describe the same GPUs, so they fill the same :class:`NvidiaSmiRecord`; each reader
leaves what its format does not show as ``None``. The ``nvlink``, ``dmon``, ``topo -m``
and ``-L`` listings have records of their own (all in :mod:`gpu_preflight.records.smi`).

Names follow NVML's meaning, not the tool's spelling of the day: the driver-535 rename of
``clocks_throttle_reasons`` to ``clocks_event_reasons`` and of ``power_readings`` to
``gpu_power_readings`` lands on the same fields, and clock event reasons use the names of
:data:`gpu_preflight.checks.gpu_thermal.CLOCK_REASONS` so a record can be judged by the
same checks as a live NVML reading.
"""

from __future__ import annotations

from ...records.smi import CLOCK_REASON_BITS as CLOCK_REASON_BITS
from ...records.smi import NvidiaSmiRecord as NvidiaSmiRecord
from ...records.smi import SmiFailure
from ...records.smi import SmiGpu as SmiGpu
from ...records.smi import SmiProcess as SmiProcess
from ...records.smi import clock_mask as clock_mask
from ..text import is_not_available, to_bool

__all__ = [
    "CLOCK_REASON_BITS", "MEMORY_FLAGS", "NvidiaSmiRecord", "SmiGpu", "SmiProcess", "as_compute_mode", "as_mode",
    "as_string", "clock_mask", "fabric_failure", "recovery_from_reset_status",
]


def as_string(value: str | None, *, keep_none: bool = False) -> str | None:
    """A printed string, or ``None`` where nvidia-smi printed N/A.

    ``keep_none`` keeps a literal ``None`` where it is the value (GPU recovery action).
    """
    if value is None:
        return None
    text = value.strip()
    if keep_none and text == "None":
        return text
    return None if is_not_available(text) else text


def as_mode(value: str | None) -> str | None:
    """``Enabled``/``Disabled`` → ``"enabled"``/``"disabled"``; N/A → ``None``."""
    flag = to_bool(value)
    return None if flag is None else ("enabled" if flag else "disabled")


def as_compute_mode(value: str | None) -> str | None:
    """``Exclusive_Process`` → ``exclusive_process``: NVML's names, as the live checks use them."""
    text = as_string(value)
    return text.lower().replace(" ", "_") if text else None


def recovery_from_reset_status(reset_required: str | None, drain_and_reset: str | None) -> str | None:
    """The recovery action a driver's ``GPU Reset Status`` states (``Reset Required``, ``Drain and Reset
    Recommended``: drivers 525-550, before ``GPU Recovery Action`` replaced them), in that field's words.

    nvidia-smi's own help: "Either of these being 'Yes' indicates that an unrecoverable error has occurred":
    a reset required is NVML's ``GPU_RESET``, a drain-and-reset recommended its ``DRAIN_AND_RESET``; both ``No``
    is ``None`` (nothing to do). ``None`` (no reading) when neither is shown or either is N/A.
    """
    required, drain = to_bool(reset_required), to_bool(drain_and_reset)
    if required:
        return "GPU Reset"
    if drain:
        return "Drain and Reset"
    return "None" if required is False and drain is False else None


# The memory flags under ``ECC Errors`` (SRAM threshold 555+, the others 590+): NVML's
# nvmlEccSramErrorStatus_t.bThresholdExceeded, nvmlRepairStatus_t, nvmlUnrepairableMemoryStatus_v1_t
# (go-nvml nvml.h:414-432, 1441). ``-q`` label path under ``ECC Errors`` -> failure code; ``-q -x`` prints the same
# flags under ``<ecc_errors>`` as the labels in lower case joined by ``_`` (``aggregate/sram_threshold_exceeded``).
MEMORY_FLAGS = ((("Aggregate", "SRAM Threshold Exceeded"), "sram_threshold_exceeded"),
                (("Unrepairable Memory",), "unrepairable_memory"),
                (("Channel Repair Pending",), "repair_pending"), (("TPC Repair Pending",), "repair_pending"))


# NVML's nvmlGpuFabricInfo_t as nvidia-smi prints it (-q ``Fabric``, drivers 525+; its ``Health`` 555+, ``Summary``
# 570+; --query-gpu ``fabric.state``/``fabric.status``): go-nvml pkg/nvml/nvml.h NVML_GPU_FABRIC_STATE_* and
# NVML_GPU_FABRIC_HEALTH_*. A GPU without an NVLink fabric prints N/A (or Not Supported) throughout.
_FABRIC_NOT_READY = ("not started", "in progress")
# nvmlErrorString of the probe's status: any other is the error the probe ended with ("Unknown Error" included)
_FABRIC_STATUS_FINE = ("success", "", "n/a", "not supported", "[n/a]", "[not supported]")
_FABRIC_UNHEALTHY = (("Summary", "unhealthy"), ("Route Unhealthy", "true"))
_FABRIC_DEGRADED = (("Summary", "limited capacity"), ("Bandwidth", "degraded"), ("Route Recovery in progress", "true"),
                    ("Access Timeout Recovery", "true"))


def fabric_failure(state: str | None, status: str | None, health: dict[str, str | None], gpu: str | None,
                   line: int | None) -> SmiFailure | None:
    """The GPU's NVLink fabric state as a failure nvidia-smi shows; ``None`` for a healthy fabric or none.

    Until the fabric manager has registered the GPU (State ``Not Started``/``In Progress``) CUDA refuses it
    (cudaErrorSystemNotReady, 802): ``fabric_not_ready``. The probe's Status "must be checked only if state returns
    complete" (nvml.h): anything but ``Success`` then is ``fabric_probe_failed`` (``Insufficient Resources``).
    ``health`` is the ``Health`` block by label: Summary ``Unhealthy``, ``Route Unhealthy : True`` or an
    ``Incorrect Configuration`` other than ``None`` is ``fabric_unhealthy``; Summary ``Limited Capacity``,
    ``Bandwidth : Degraded`` or a recovery in progress is ``fabric_degraded``.
    """
    state, status = (state or "").strip(), (status or "").strip()
    if state.lower() in _FABRIC_NOT_READY:
        return SmiFailure("fabric_not_ready", f"Fabric State : {state}", gpu, line)
    if state.lower() == "completed" and status.lower() not in _FABRIC_STATUS_FINE:
        return SmiFailure("fabric_probe_failed", f"Fabric State : {state}, Status : {status}", gpu, line)
    shown = {k.lower(): (v or "").strip() for k, v in health.items()}

    def flagged(pairs: tuple[tuple[str, str], ...]) -> list[str]:
        return [f"{label} : {shown[label.lower()]}" for label, value in pairs
                if shown.get(label.lower(), "").lower() == value]

    unhealthy = flagged(_FABRIC_UNHEALTHY)
    wrong = shown.get("incorrect configuration")
    if wrong is not None and not is_not_available(wrong):
        unhealthy.append(f"Incorrect Configuration : {wrong}")
    if unhealthy:
        return SmiFailure("fabric_unhealthy", "Fabric Health " + ", ".join(unhealthy), gpu, line)
    degraded = flagged(_FABRIC_DEGRADED)
    return SmiFailure("fabric_degraded", "Fabric Health " + ", ".join(degraded), gpu, line) if degraded else None
