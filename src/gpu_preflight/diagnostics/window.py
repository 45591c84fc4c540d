"""The node's GPU window: DCGM's stress levels run while no rank of the node has touched CUDA.

``dcgmi diag -r 2`` and ``-r 3`` load every GPU of the node (PCIe bandwidth, memory, targeted
power and stress). Beside a distributed run's workers, which hold the same GPUs, they would
measure the workers' load and slow the workers' measurements, so a launched rank used to
refuse them and only ``run --node-only --full`` ran them. A ``--full`` distributed run now
opens a window instead: the node leader's ``dcgm`` probe runs its levels first, and every
rank waits before it touches CUDA until each node's leader has closed its window
(:mod:`gpu_preflight.distributed.gpu_window`). The report then has both
``dcgm.diagnostics.basic`` and ``extended`` however the run was launched.

:class:`GpuWindow` is the in-process half: the node leader's run hands it to its node checks
through the run's kept state (:data:`GPU_WINDOW`); the ``dcgm`` probe closes it when it is
done with the GPUs (or has decided not to use them), and the leader's main thread waits for that.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["GPU_WINDOW", "GpuWindow"]

GPU_WINDOW = "gpu_window"  # RunOptions.state / ProbeState.kept key of the node leader's window


class GpuWindow:
    """Open until :meth:`close`; :meth:`wait` returns when it is closed (or gives up)."""

    def __init__(self) -> None:
        self._closed = threading.Event()
        self.opened_at = time.monotonic()
        self.closed_after_s: float | None = None

    def close(self) -> None:
        """The GPUs are free again (idempotent: the first call dates the end)."""
        if not self._closed.is_set():
            self.closed_after_s = round(time.monotonic() - self.opened_at, 3)
            self._closed.set()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def wait(self, timeout_s: float, alive: Callable[[], bool] | None = None, poll_s: float = 0.2) -> bool:
        """Wait until closed: True; False at ``timeout_s`` or as soon as ``alive()`` says the
        holder is gone (node checks that ended, or never started, without closing it)."""
        deadline = time.monotonic() + timeout_s
        while not self._closed.wait(max(0.0, min(poll_s, deadline - time.monotonic()))):
            if time.monotonic() >= deadline or (alive is not None and not alive()):
                return self._closed.is_set()
        return True
