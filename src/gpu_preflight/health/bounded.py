"""Calls that may hang, made with a deadline and never more than one in flight.

A call into NVML on a failing GPU (or a user's callback) can block for minutes and
cannot be cancelled from Python. Running it in a daemon thread lets the caller give up
at a deadline; refusing to start a second call while the first is still stuck keeps a
long-running monitor from piling up one blocked thread per interval.

The thread is kept from call to call (:class:`~gpu_preflight.kept_thread.KeptThread`:
ended after ``KEEP_IDLE_S`` idle); one whose call overran is the stuck one, and serves the
next call only once that call has returned.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ..engine import Timeout
from ..kept_thread import KEEP_IDLE_S, KeptThread

T = TypeVar("T")

__all__ = ["KEEP_IDLE_S", "BoundedCall", "Stuck", "Timeout"]


class Stuck(Timeout):
    """The previous call has not returned yet, so no new one was started."""


class BoundedCall:
    """Run callables in a worker thread with a deadline, at most one at a time.

    Callers that may overlap must serialise themselves (a lock); an overlapping call is
    refused with :class:`Stuck` rather than queued, because the only reason a worker is
    still running after its caller left is that it is stuck.
    """

    def __init__(self, name: str, idle_s: float = KEEP_IDLE_S) -> None:
        self.name = name
        self._guard = threading.Lock()
        self._thread = KeptThread(name, idle_s)

    def stuck_for(self) -> float | None:
        """Seconds the call in flight (an abandoned one, between calls) has been running, or None."""
        since = self._thread.busy_since
        return None if since is None else time.monotonic() - since

    def __call__(self, fn: Callable[[], T], timeout_s: float) -> T:
        box: dict[str, Any] = {}

        def call() -> None:
            try:
                box["value"] = fn()
            except BaseException as exc:  # the caller's to see, whatever it is
                box["error"] = exc

        with self._guard:
            age = self.stuck_for()
            if age is not None:
                raise Stuck(f"{self.name}: the previous call has not returned for {age:.1f} s; "
                            "not starting another")
            done = self._thread.submit(call)
        if done is None:
            raise RuntimeError(f"{self.name}: no worker thread took the call")
        if not done.wait(timeout_s):
            raise Timeout(f"{self.name} did not finish within {timeout_s:g} s")
        if "error" in box:
            raise box["error"]
        return box["value"]  # type: ignore[no-any-return]
