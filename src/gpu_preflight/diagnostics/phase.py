"""The tool-run phase of one node run, so that counter reads can bracket it.

Port error counters mean something only as *increases while the fabric was used*. The
node run's heavy tools (DCGM, nccl-tests) start at the same time as the InfiniBand
probe, since probes run concurrently; the probe reads the counters at once, then waits
until every tool registered here has finished (or its own time is up) and reads them
again. The phase lives in the run's probe options, which every probe of one run shares
and no other run sees.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..registry import ProbeState

__all__ = ["RunPhase", "run_phase"]

_CREATE = threading.Lock()


class RunPhase:
    """Counts the tools running now; :meth:`wait_idle` returns when none is."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active: dict[str, int] = {}

    @contextmanager
    def tool(self, name: str) -> Iterator[None]:
        """Mark ``name`` as running for the duration of the block."""
        with self._cond:
            self._active[name] = self._active.get(name, 0) + 1
        try:
            yield
        finally:
            with self._cond:
                self._active[name] -= 1
                if not self._active[name]:
                    del self._active[name]
                self._cond.notify_all()

    def active(self) -> list[str]:
        with self._cond:
            return sorted(self._active)

    def wait_idle(self, min_s: float, max_s: float) -> float:
        """Wait at least ``min_s`` and until no tool runs, at most ``max_s``; return the seconds waited.

        The minimum also gives tools that start at the same moment time to register.
        """
        start = time.monotonic()
        time.sleep(max(0.0, min(min_s, max_s)))
        with self._cond:
            self._cond.wait_for(lambda: not self._active, timeout=max(0.0, max_s - (time.monotonic() - start)))
        return time.monotonic() - start


def run_phase(state: ProbeState) -> RunPhase:
    """The phase of the run this probe state belongs to (created on first use)."""
    with _CREATE:
        phase = state.phase
        if not isinstance(phase, RunPhase):
            phase = state.phase = RunPhase()
        return phase
