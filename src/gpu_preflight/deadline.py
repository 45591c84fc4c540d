"""Run callables, each with a deadline, and abandon the overdue: the one way the program does it.

Why: a call into NVML on a failing GPU, a blocked ``/proc`` read, a user's callback, an
upload whose client retries for minutes or a check with a bug may never return, and Python
cannot cancel a thread. So such a call runs on a daemon thread and its caller waits only
until the deadline; then the call is reported as :class:`Overdue` and the caller goes on.
The abandoned thread runs on until the call returns (perhaps never): being a daemon, it
does not hold up the process's exit, which therefore needs no trick of its own.

Threads are kept (:class:`~gpu_preflight.kept_thread.KeptThread`, each ending after a minute
idle): a 1-second monitor runs its probes and checks every tick, and starting threads for
them cost it more than the probes. A kept thread still running an abandoned call takes no
other job.

:func:`run_all` runs its jobs in order on one thread: probes and checks are mostly Python,
and run side by side they traded the GIL at every ctypes call and every read for no gain
in time. A job still running :data:`HANDOVER_S` after it started (or a tenth of the
shortest limit, if less) hands the jobs behind it to another thread, so a slow or hung job
holds up the others by that much at most. ``side_by_side`` starts every job at once instead
(uploads to several targets, each waiting on the network). Every job's limit counts from
the call, as if all had started at once: the jobs are over by the longest limit.

The one other place that reads under deadlines is the NVML reader
(:mod:`gpu_preflight.backends.nvml`): it reads the GPUs one after another and isolates the
GPU whose call hangs while the others are still read, which needs the call in progress on
each GPU, not a job per GPU.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from .kept_thread import KeptThread

__all__ = ["HANDOVER_S", "Job", "Later", "OneAtATime", "Overdue", "Stuck", "Timeout", "call", "run_all"]

T = TypeVar("T")

HANDOVER_S = 0.25  # a job still running after this long no longer holds up the ones queued behind it


class Timeout(Exception):
    """A call did not finish within its time limit."""


class Overdue(Timeout):
    """A job still running at its deadline, abandoned: its thread runs on and takes no other job.

    ``since``: when the job started (monotonic); ``returned`` is set once it has returned after all.
    """

    def __init__(self, message: str, since: float) -> None:
        super().__init__(message)
        self.since = since
        self.returned = threading.Event()


class Stuck(Timeout):
    """The previous call has not returned yet, so no new one was started."""


class Job(Generic[T]):
    """One callable, its name (in :class:`Overdue`'s message) and its time limit in seconds."""

    __slots__ = ("fn", "limit_s", "name")

    def __init__(self, name: str, fn: Callable[[], T], limit_s: float) -> None:
        self.name, self.fn, self.limit_s = name, fn, limit_s


_KEPT: list[KeptThread] = []
_KEPT_LOCK = threading.Lock()


def _start(lane: Callable[[], None]) -> None:
    """Run ``lane`` on a free kept thread (a new one when every one is busy)."""
    with _KEPT_LOCK:
        for kept in _KEPT:
            if kept.submit(lane) is not None:
                return
        kept = KeptThread(f"gp-deadline-{len(_KEPT)}")
        _KEPT.append(kept)
        kept.submit(lane)


_PENDING: Any = object()


def run_all(jobs: Sequence[Job[T]], *, side_by_side: bool = False,
            handover_s: float = HANDOVER_S) -> list[T | BaseException]:
    """Each job's value, or what it raised, or :class:`Overdue` when it was still running
    ``limit_s`` after this call; in the order given.

    In turn on one thread, a job running ``handover_s`` (or a tenth of the shortest limit)
    passing the rest to another; ``side_by_side``: every job on its own thread at once.
    """
    count = len(jobs)
    if not count:
        return []
    t0 = time.monotonic()
    out: list[Any] = [_PENDING] * count
    started: list[float | None] = [None] * count
    ended = [False] * count
    handed = [side_by_side] * count  # the thread that runs it stops after it: the rest went to another
    cursor = [0]  # the next job to start
    left = [count]  # jobs without an outcome yet
    changed = threading.Condition(threading.Lock())
    handover = min([handover_s] + [job.limit_s / 10 for job in jobs])

    def lane() -> None:
        while True:
            with changed:
                while cursor[0] < count and out[cursor[0]] is not _PENDING:
                    out[cursor[0]].returned.set()  # overdue before it started: it never will
                    cursor[0] += 1
                if cursor[0] >= count:
                    return
                i = cursor[0]
                cursor[0] += 1
                started[i] = time.monotonic()
            try:
                got: Any = jobs[i].fn()
            except BaseException as exc:  # the caller's to see, whatever it is
                got = exc
            with changed:
                ended[i] = True
                if out[i] is _PENDING:
                    out[i] = got
                    left[0] -= 1
                    if not left[0]:
                        changed.notify()
                else:
                    out[i].returned.set()
                if handed[i]:
                    return

    for _ in range(count if side_by_side else 1):
        _start(lane)
    with changed:
        while left[0]:
            now = time.monotonic()
            for i, job in enumerate(jobs):
                if out[i] is _PENDING and now >= t0 + job.limit_s:
                    out[i] = Overdue(f"{job.name} did not finish within {job.limit_s:g} s", started[i] or now)
                    left[0] -= 1
                    handed[i] = True
            if not left[0]:
                break
            wake = min(t0 + job.limit_s for i, job in enumerate(jobs) if out[i] is _PENDING)
            if cursor[0] < count and not side_by_side:  # jobs queued: hand them over once the running one is slow
                last = cursor[0] - 1
                since = started[last] if last >= 0 and not handed[last] and not ended[last] else None
                if since is not None and (now - since >= handover or out[last] is not _PENDING):
                    handed[last] = True
                    _start(lane)
                    since = None
                wake = min(wake, (since if since is not None else now) + handover)
            changed.wait(max(0.0, wake - now))
        return list(out)


def call(fn: Callable[[], T], limit_s: float, name: str) -> T:
    """``fn()`` on a kept thread; :class:`Overdue` (a :class:`Timeout`) when it does not return in time."""
    (got,) = run_all([Job(name, fn, limit_s)])
    if isinstance(got, BaseException):
        raise got
    return got


class OneAtATime:
    """Calls of one kind (an NVML read of the monitor, the user's alive callback) with a
    deadline each, and never a second one while an abandoned one has not returned.

    Why: a long-running monitor that calls a hung driver every interval must not pile up one
    blocked thread per interval. A call made while the previous one is stuck is refused with
    :class:`Stuck`, not queued: the only reason that call is still running is that it is stuck.
    Calls from several threads take turns.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._turn = threading.Lock()
        self._stuck: Overdue | None = None

    def stuck_for(self) -> float | None:
        """Seconds the abandoned call has been running, or None when none is."""
        stuck = self._stuck
        return None if stuck is None or stuck.returned.is_set() else time.monotonic() - stuck.since

    def __call__(self, fn: Callable[[], T], limit_s: float) -> T:
        with self._turn:
            age = self.stuck_for()
            if age is not None:
                raise Stuck(f"{self.name}: the previous call has not returned for {age:.1f} s; not starting another")
            try:
                return call(fn, limit_s, self.name)
            except Overdue as exc:
                self._stuck = exc
                raise


class Later(Generic[T]):
    """A call started now on a kept thread, its result collected later under a deadline that
    counts from the collection: work that overlaps the caller's own (a rank's node checks
    while its workloads run)."""

    def __init__(self, fn: Callable[[], T], name: str) -> None:
        self.name = name
        self._done = threading.Event()
        self._got: Any = _PENDING

        def job() -> None:
            try:
                self._got = fn()
            except BaseException as exc:  # the collector's to see, whatever it is
                self._got = exc
            self._done.set()

        _start(job)

    def running(self) -> bool:
        return not self._done.is_set()

    def result(self, limit_s: float) -> T:
        """The call's value (or what it raised), waiting at most ``limit_s``; :class:`Overdue` after that."""
        since = time.monotonic()
        if not self._done.wait(limit_s):
            raise Overdue(f"{self.name} did not finish within {limit_s:g} s", since)
        if isinstance(self._got, BaseException):
            raise self._got
        return self._got  # type: ignore[no-any-return]
