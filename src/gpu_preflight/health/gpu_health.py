"""The elastic-training GPU health check: ``GPUHealthCheck`` and its helpers.

API-compatible with the health check described for PyTorch elastic (after NVIDIA's
resiliency extension), with one deliberate difference: **it fails closed**. When it
cannot look — no pynvml, no driver, a driver older than r570 without the recovery-action
field, an NVML call that hangs — the status is ``unknown`` with the reason and
``__call__`` returns False. The spec's version returns True ("healthy") when disabled;
pass ``healthy_when_unknown=True`` to get that behaviour knowingly.

One check is one bounded run of the node checks ``gpu.nvml`` and ``gpu.recovery_action``
(live NVML or a replayed snapshot), judged by :func:`.status.judge`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
import time
from collections.abc import Callable

from ..deadline import Timeout
from ..engine import RunOptions
from ..findings.health import CHECK_IDS, HealthState, HealthStatus, judge, unknown
from ..model import NodeReport
from .nvml_helper import PynvmlMixin
from .reader import NvmlReader, NvmlSuspended

log = logging.getLogger(__name__)

__all__ = ["GPUHealthCheck", "create_gpu_health_check", "quick_gpu_health_check"]

DEFAULT_TIMEOUT_S = 10.0
MONITOR_THREAD = "gpu-health-monitor"  # the thread async_check() starts without an event loop
_pending_callbacks: set[asyncio.Task[object]] = set()


class GPUHealthCheck(PynvmlMixin):
    """Checks the GPUs' recovery actions; callable, thread-safe, fail-closed.

    ``on_failure`` is called once each time the GPUs go from healthy (or not yet
    checked) to not healthy, by whichever check sees it first — a synchronous call, the
    background monitor of :meth:`async_check` (or its awaitable form :meth:`monitor`) or the
    health server's monitor loop — and not again until a check has seen them healthy. It may
    be a plain function or a coroutine function.
    """

    def __init__(self, device_index: int | None = None, interval: float = 60,
                 on_failure: Callable[[], object] | None = None, *, replay: str | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, healthy_when_unknown: bool = False) -> None:
        self.device_index = device_index
        self.interval = interval
        self.on_failure = on_failure
        self.replay = replay
        self.timeout_s = timeout_s
        self.healthy_when_unknown = healthy_when_unknown
        self.pynvml_available = self.check_pynvml_availability()
        self._reader = NvmlReader("gpu-health-read")
        self._state_lock = threading.Lock()
        self._last: HealthStatus | None = None
        self._failure_notified = False
        self._monitor_lock = threading.Lock()
        self._monitor_task: asyncio.Task[None] | None = None
        self._monitor_thread: threading.Thread | None = None
        self._stop_event = threading.Event()

    @property
    def last_status(self) -> HealthStatus | None:
        """The verdict of the most recent check, or None before the first."""
        return self._last

    @property
    def enabled(self) -> bool:
        """Whether the recovery action could be read (spec attribute); checks once if needed."""
        status = self._last or self.check()
        return status.state is not HealthState.UNKNOWN

    def __call__(self) -> bool:
        """Check now; True only when every monitored GPU is healthy (see ``healthy_when_unknown``)."""
        return self.check().ok(self.healthy_when_unknown)

    def check(self) -> HealthStatus:
        """Check now and return the full verdict; fires ``on_failure`` on a new failure."""
        status, fire = self._check_and_claim()
        if fire:
            self._fire()
        return status

    def async_check(self) -> None:
        """Start monitoring in the background and return None at once (the spec's signature).

        Called as the spec's example calls it (``gpu_check.async_check()``, not awaited), it
        checks every ``interval`` seconds until :meth:`stop`. Inside a running event loop the
        monitor is a task of that loop (a coroutine ``on_failure`` is awaited there, NVML is
        read in a worker thread); without one it is a daemon thread named
        ``gpu-health-monitor``. A second call while a monitor runs starts no other.
        """
        with self._monitor_lock:
            if self.monitoring:
                return
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self._stop_event = threading.Event()
                self._monitor_thread = threading.Thread(target=self._monitor_in_thread, args=(self._stop_event,),
                                                        name=MONITOR_THREAD, daemon=True)
                self._monitor_thread.start()
            else:
                self._monitor_task = loop.create_task(self.monitor())

    @property
    def monitoring(self) -> bool:
        """Whether a background monitor started by :meth:`async_check` is running."""
        task, thread = self._monitor_task, self._monitor_thread
        return (task is not None and not task.done()) or (thread is not None and thread.is_alive())

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop the background monitor of :meth:`async_check`; safe to call when none runs.

        The thread form finishes the check in progress (bounded by ``timeout_s`` of the check)
        and is waited for up to ``timeout_s`` (default: the check's own bound plus 1 s).
        """
        with self._monitor_lock:
            task, self._monitor_task = self._monitor_task, None
            thread, self._monitor_thread = self._monitor_thread, None
            self._stop_event.set()
        if task is not None:
            _cancel(task)
        if thread is not None and thread is not threading.current_thread():
            thread.join(self.timeout_s + 1 if timeout_s is None else timeout_s)

    async def monitor(self) -> None:
        """The awaitable form: check every ``interval`` seconds until cancelled, awaiting
        ``on_failure`` on failure (``await check.monitor()`` or ``asyncio.create_task(...)``).

        Checks first, then sleeps (the spec sleeps first): a bad GPU at start-up is seen at
        once. NVML is read in a worker thread, so the event loop never blocks on it.
        """
        while True:
            _, fire = await asyncio.to_thread(self._check_and_claim)
            if fire and self.on_failure is not None:
                try:
                    result = self.on_failure()
                    if inspect.isawaitable(result):
                        await result
                except Exception:
                    log.exception("GPU health on_failure callback raised")
            await asyncio.sleep(self.interval)

    def _monitor_in_thread(self, stop: threading.Event) -> None:
        """The thread form of :meth:`monitor`: check, fire, wait ``interval`` or until stopped."""
        while not stop.is_set():
            _, fire = self._check_and_claim()
            if fire and not stop.is_set():
                self._fire()
            stop.wait(self.interval)

    def observe(self, report: NodeReport | None, error: BaseException | str | None = None,
                duration_s: float = 0.0) -> HealthStatus:
        """Judge a node report produced elsewhere (the server's monitor loop reads NVML once
        for all node checks); ``error`` says why there is no report. Fires ``on_failure``."""
        status = self._judge(report, error, duration_s)
        fire = self._record(status)
        if fire:
            self._fire()
        return status

    def _check_and_claim(self) -> tuple[HealthStatus, bool]:
        started = time.perf_counter()
        options = RunOptions(include=list(CHECK_IDS), replay=self.replay, probe_timeout_s=self.timeout_s)
        report: NodeReport | None = None
        error: BaseException | str | None = None
        try:
            report = self._reader.run(options)
        except Timeout as exc:
            error = exc
        except Exception as exc:  # a config error or a bug must still give a (failed) verdict
            error = f"health check failed: {type(exc).__name__}: {exc}"
        status = self._judge(report, error, time.perf_counter() - started)
        return status, self._record(status)

    def _judge(self, report: NodeReport | None, error: BaseException | str | None,
               duration_s: float) -> HealthStatus:
        """Verdict of a run; without a report, unknown — unless NVML was suspended because
        reads kept hanging in the driver, which is a GPU fault, not a blind spot."""
        if report is not None:
            return judge(report, self.device_index, duration_s)
        if isinstance(error, NvmlSuspended):
            return HealthStatus(HealthState.UNHEALTHY, str(error), device_index=self.device_index,
                                duration_s=duration_s)
        return unknown(str(error or "no node report"), self.device_index, duration_s)

    def _record(self, status: HealthStatus) -> bool:
        """Store the verdict; True when it starts a failure episode (``on_failure`` is due)."""
        with self._state_lock:
            previous, self._last = self._last, status
            if previous is None or previous.state is not status.state:
                log.log(logging.INFO if status.state is HealthState.HEALTHY else logging.WARNING,
                        "GPU health %s: %s", status.state.value, status.reason)
            if status.ok(self.healthy_when_unknown):
                self._failure_notified = False
                return False
            if self._failure_notified:
                return False
            self._failure_notified = True
            return self.on_failure is not None

    def _fire(self) -> None:
        """Call ``on_failure``; a coroutine result runs to completion (or on the running loop)."""
        assert self.on_failure is not None
        try:
            result = self.on_failure()
            if inspect.iscoroutine(result):
                try:
                    loop = asyncio.get_running_loop()
                except RuntimeError:
                    asyncio.run(result)
                else:
                    task = loop.create_task(result)
                    _pending_callbacks.add(task)  # keep a reference until it finishes
                    task.add_done_callback(_pending_callbacks.discard)
        except Exception:
            log.exception("GPU health on_failure callback raised")


def _cancel(task: asyncio.Task[None]) -> None:
    """Cancel ``task`` from any thread (``Task.cancel`` belongs to its loop's thread)."""
    loop = task.get_loop()
    try:
        same = asyncio.get_running_loop() is loop
    except RuntimeError:
        same = False
    if same:
        task.cancel()
        return
    with contextlib.suppress(RuntimeError):  # a closed loop runs its tasks no more
        loop.call_soon_threadsafe(task.cancel)


def create_gpu_health_check(device_index: int | None = None, interval: float = 60,
                            on_failure: Callable[[], object] | None = None, *, replay: str | None = None,
                            timeout_s: float = DEFAULT_TIMEOUT_S,
                            healthy_when_unknown: bool = False) -> GPUHealthCheck:
    """Create a :class:`GPUHealthCheck` (the spec's factory)."""
    return GPUHealthCheck(device_index, interval, on_failure, replay=replay, timeout_s=timeout_s,
                          healthy_when_unknown=healthy_when_unknown)


def quick_gpu_health_check(device_index: int | None = None, *, replay: str | None = None,
                           timeout_s: float = DEFAULT_TIMEOUT_S, healthy_when_unknown: bool = False) -> bool:
    """One synchronous check without keeping an instance; False when it cannot look."""
    return create_gpu_health_check(device_index, replay=replay, timeout_s=timeout_s,
                                   healthy_when_unknown=healthy_when_unknown)()
