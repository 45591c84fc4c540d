"""Calls that may hang, made with a deadline and never more than one in flight.

A call into NVML on a failing GPU (or a user's callback) can block for minutes and
cannot be cancelled from Python. Running it in a daemon thread lets the caller give up
at a deadline; refusing to start a second call while the first is still stuck keeps a
long-running monitor from piling up one blocked thread per interval.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from ..engine import Timeout, await_call, spawn

T = TypeVar("T")

__all__ = ["BoundedCall", "Stuck", "Timeout"]


class Stuck(Timeout):
    """The previous call has not returned yet, so no new one was started."""


class BoundedCall:
    """Run callables in a worker thread with a deadline, at most one at a time.

    Callers that may overlap must serialise themselves (a lock); an overlapping call is
    refused with :class:`Stuck` rather than queued, because the only reason a worker is
    still running after its caller left is that it is stuck.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._guard = threading.Lock()
        self._worker: threading.Thread | None = None
        self._started = 0.0

    def stuck_for(self) -> float | None:
        """Seconds the abandoned call has been running, or None when none is."""
        worker = self._worker
        if worker is None or not worker.is_alive():
            return None
        return time.monotonic() - self._started

    def __call__(self, fn: Callable[[], T], timeout_s: float) -> T:
        with self._guard:
            age = self.stuck_for()
            if age is not None:
                raise Stuck(f"{self.name}: the previous call has not returned for {age:.1f} s; "
                            "not starting another")
            worker, box = spawn(fn, self.name)
            self._worker, self._started = worker, time.monotonic()
        return await_call(worker, box, timeout_s, self.name)  # type: ignore[no-any-return]
