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
from ...records.smi import SmiGpu as SmiGpu
from ...records.smi import SmiProcess as SmiProcess
from ...records.smi import clock_mask as clock_mask
from ..text import is_not_available, to_bool

__all__ = [
    "CLOCK_REASON_BITS", "NvidiaSmiRecord", "SmiGpu", "SmiProcess", "as_compute_mode", "as_mode", "as_string",
    "clock_mask",
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


