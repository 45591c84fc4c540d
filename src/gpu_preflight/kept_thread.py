"""One daemon thread kept between jobs, running one job at a time.

A 1-second monitor made one NVML read and one bounded call a tick, and starting a thread
for each cost it more than handing the job to a thread already waiting. The thread ends
after ``idle_s`` without a job (a caller that calls rarely holds no thread meanwhile) and
the next job starts another. While a job runs (perhaps stuck in a driver call that cannot
be cancelled) the thread takes no other: :meth:`KeptThread.submit` says so, and the
caller decides (start a thread of its own, or refuse the call).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["KEEP_IDLE_S", "KeptThread"]

KEEP_IDLE_S = 60.0


class KeptThread:
    """One daemon thread that runs one job at a time and ends after ``idle_s`` without one."""

    def __init__(self, name: str, idle_s: float = KEEP_IDLE_S) -> None:
        self.name, self.idle_s = name, idle_s
        self.busy_since: float | None = None  # when the job in flight was handed over; None between jobs
        self._wake = threading.Condition(threading.Lock())
        self._job: tuple[Callable[[], None], threading.Event] | None = None
        self._alive = False

    def submit(self, job: Callable[[], None]) -> threading.Event | None:
        """Run ``job`` on the thread; the event is set once it has returned and the thread is free
        again. None (not taken) while the thread is busy with another job."""
        done = threading.Event()
        with self._wake:
            if self.busy_since is not None:
                return None
            self._job, self.busy_since = (job, done), time.monotonic()
            if self._alive:
                self._wake.notify()
                return done
            self._alive = True
        threading.Thread(target=self._loop, name=self.name, daemon=True).start()
        return done

    def _loop(self) -> None:
        while True:
            with self._wake:
                while self._job is None:
                    if not self._wake.wait(self.idle_s) and self._job is None:
                        self._alive = False
                        return
                (job, done), self._job = self._job, None
            try:
                job()
            except BaseException:
                with self._wake:  # the thread ends as a thread per job would; the next job starts another
                    self.busy_since, self._alive = None, False
                done.set()
                raise
            with self._wake:
                self.busy_since = None
            done.set()
