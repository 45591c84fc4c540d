"""Calls that may hang, made with a deadline and never more than one in flight.

A call into NVML on a failing GPU (or a user's callback) can block for minutes and
cannot be cancelled from Python. Running it in a daemon thread lets the caller give up
at a deadline; refusing to start a second call while the first is still stuck keeps a
long-running monitor from piling up one blocked thread per interval.

The thread is kept from call to call: a 1-second monitor made one call a tick, and
starting a thread for each cost it more than handing the next call to a waiting one.
A kept thread that idles ``KEEP_IDLE_S`` ends (a caller that calls rarely holds no
thread meanwhile); one whose call overran is the stuck one, and serves the next call
only once that call has returned.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ..engine import Timeout

T = TypeVar("T")

__all__ = ["KEEP_IDLE_S", "BoundedCall", "Stuck", "Timeout"]

KEEP_IDLE_S = 60.0


class Stuck(Timeout):
    """The previous call has not returned yet, so no new one was started."""


class _Kept:
    """One daemon thread running one call at a time, ending after ``idle_s`` without one."""

    def __init__(self, name: str, idle_s: float) -> None:
        self.idle_s = idle_s
        self.busy_since: float | None = None  # when the call in flight started; None between calls
        self._wake = threading.Condition(threading.Lock())
        self._job: tuple[Callable[[], Any], dict[str, Any], threading.Event] | None = None
        self._alive = True
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, fn: Callable[[], Any]) -> tuple[dict[str, Any], threading.Event] | None:
        """Hand ``fn`` to the thread: its result box and done event, or None if the thread has ended."""
        with self._wake:
            if not self._alive:
                return None
            box: dict[str, Any] = {}
            done = threading.Event()
            self._job, self.busy_since = (fn, box, done), time.monotonic()
            self._wake.notify()
        return box, done

    def _loop(self) -> None:
        while True:
            with self._wake:
                while self._job is None:
                    if not self._wake.wait(self.idle_s) and self._job is None:
                        self._alive = False
                        return
                (fn, box, done), self._job = self._job, None
            try:
                box["value"] = fn()
            except BaseException as exc:  # the caller's to see, whatever it is
                box["error"] = exc
            self.busy_since = None
            done.set()


class BoundedCall:
    """Run callables in a worker thread with a deadline, at most one at a time.

    Callers that may overlap must serialise themselves (a lock); an overlapping call is
    refused with :class:`Stuck` rather than queued, because the only reason a worker is
    still running after its caller left is that it is stuck.
    """

    def __init__(self, name: str, idle_s: float = KEEP_IDLE_S) -> None:
        self.name = name
        self.idle_s = idle_s
        self._guard = threading.Lock()
        self._worker: _Kept | None = None

    def stuck_for(self) -> float | None:
        """Seconds the call in flight (an abandoned one, between calls) has been running, or None."""
        worker = self._worker
        since = worker.busy_since if worker is not None else None
        return None if since is None else time.monotonic() - since

    def __call__(self, fn: Callable[[], T], timeout_s: float) -> T:
        with self._guard:
            age = self.stuck_for()
            if age is not None:
                raise Stuck(f"{self.name}: the previous call has not returned for {age:.1f} s; "
                            "not starting another")
            taken = self._worker.submit(fn) if self._worker is not None else None
            if taken is None:
                worker = self._worker = _Kept(self.name, self.idle_s)
                taken = worker.submit(fn)  # before its thread starts: it cannot have ended
                worker.start()
        if taken is None:
            raise RuntimeError(f"{self.name}: no worker thread took the call")
        box, done = taken
        if not done.wait(timeout_s):
            raise Timeout(f"{self.name} did not finish within {timeout_s:g} s")
        if "error" in box:
            raise box["error"]
        return box["value"]  # type: ignore[no-any-return]
