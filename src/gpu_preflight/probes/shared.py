"""What the probes of one run share, and what a monitor keeps for them from run to run.

Probes run concurrently, each under its own deadline, so two probes that need the same
read cannot hand it to each other: :func:`once` lets the first caller of a run do it and
every other caller of that run wait for its result (or its failure). The kernel log is
the case in point: the ``kernel_log`` probe counts its Xid lines and the ``pcie`` probe
takes its ``limited by`` lines, from one read.

The state lives in the run's probe options (a dict every probe of one run shares and no
other run sees, like :mod:`gpu_preflight.diagnostics.phase`). A monitor adds objects that
outlive one run through :attr:`gpu_preflight.engine.RunOptions.state`: a
:class:`~gpu_preflight.backends.kernel_log.KmsgFollower` under :data:`KERNEL_LOG_FOLLOWER`,
a :class:`~gpu_preflight.backends.commands.ToolCache` under :data:`TOOL_CACHE`, a
:class:`~gpu_preflight.backends.process_scan.ProcessScan` under :data:`PROCESS_SCAN` and, at
short intervals, a :class:`~gpu_preflight.backends.nvml.NvmlSession` under :data:`NVML_SESSION`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from ..registry import KERNEL_LOG_FOLLOWER, NVML_SESSION, PROCESS_SCAN, TOOL_CACHE, ProbeState

__all__ = ["KERNEL_LOG_FOLLOWER", "NVML_SESSION", "PROCESS_SCAN", "TOOL_CACHE", "once"]

T = TypeVar("T")
_CREATE = threading.Lock()


class _Once:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None


def once(state: ProbeState, key: str, fn: Callable[[], T]) -> T:
    """``fn()`` the first time ``key`` is asked for in this run; its result (or exception) ever after."""
    slot_key = f"_once_{key}"
    with _CREATE:
        slot = state.kept.get(slot_key)
        if not isinstance(slot, _Once):
            slot = state.kept[slot_key] = _Once()
    with slot.lock:
        if not slot.done:
            try:
                slot.value = fn()
            except Exception as exc:
                slot.error = exc
            slot.done = True
    if slot.error is not None:
        raise slot.error
    return slot.value  # type: ignore[no-any-return]
