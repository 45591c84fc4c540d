"""The monitor loop (quick node checks every interval) and the agent's alive sampler.

Both run in their own daemon threads and call anything that can hang (NVML, the user's
alive callback) through a bounded call, so neither thread ever blocks past its deadline
and request threads never call either.

A tick costs what the probes cost, every interval, for days: so a live monitor starts no
process per tick. The kernel log is followed through ``/dev/kmsg`` (only what is new is
read), and the light tools (``fi_info``, ``lspci``, ``ibstat``) are run again only once
their last answer is ``tool_refresh_s`` old. The host's process list is re-read once it is
``system.process_scan_refresh_s`` old (:class:`~gpu_preflight.backends.process_scan.ProcessScan`).
Below ``NVML_KEEP_OPEN_BELOW_S`` NVML also stays initialised between ticks
(:class:`~gpu_preflight.backends.nvml_session.MonitorSession`): the reads after an init cost a
real GPU three times the CPU of later ones, and the session keeps each GPU's fixed answers
(identity, link capability, VBIOS limits), reads the GPUs in one thread, and re-reads their
settings (persistence, compute, MIG and ECC mode, power limits) only every
``gpu.nvml_settings_refresh_ticks`` ticks.

The probes and checks run on kept threads (:mod:`gpu_preflight.deadline`), under the
deadlines of a one-shot run: a thread started per probe every tick cost a 1-second monitor
more CPU than the probes themselves.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

from msgspec.structs import replace

from ..backends.commands import ToolCache
from ..backends.fabric import FABRIC_CACHE, FabricCache
from ..backends.kernel_log import KmsgFollower
from ..backends.nvml_session import SETTINGS_EVERY, MonitorSession
from ..backends.process_scan import ProcessScan
from ..backends.system import HOST_SAMPLER, HostSampler
from ..config import ConfigError, build_config, find_profile
from ..deadline import OneAtATime, Timeout
from ..engine import CONFIG_CACHE, ConfigCache, RunOptions
from ..health.gpu_health import GPUHealthCheck
from ..health.reader import NvmlReader, deadline_for
from ..model import NodeReport
from ..registry import KERNEL_LOG_FOLLOWER, NVML_DUMP_ON_DEMAND, NVML_SESSION, PROCESS_SCAN, TOOL_CACHE
from .state import AliveSample, Snapshot, progress_at

log = logging.getLogger(__name__)
TOOL_REFRESH_S = 300.0  # how long a monitor reuses a light tool's answer (and a fallback kernel-log read)
NVML_KEEP_OPEN_BELOW_S = 10.0  # intervals below which NVML stays initialised between ticks


class Monitor:
    """Runs the quick node checks every ``interval_s`` and keeps the last :class:`Snapshot`.

    Only the ``quick`` suite ever runs here: no stress test, no multi-node work. When a
    :class:`GPUHealthCheck` is given it judges the same report, so NVML is read once per
    tick for the node checks and the GPU health alike.
    """

    def __init__(self, options: RunOptions, interval_s: float, gpu: GPUHealthCheck | None = None,
                 tool_refresh_s: float = TOOL_REFRESH_S) -> None:
        if not (math.isfinite(interval_s) and interval_s > 0):  # nan/inf/0 would spin or never tick again
            raise ValueError(f"monitor interval must be a finite number of seconds above 0, got {interval_s!r}")
        # no GPU-loading diagnostics (DCGM, nccl-tests: tag "active") under a running job, every tick
        self.options = replace(options, suite="quick", include=[], report_dir=None,
                               exclude=[*options.exclude, "active"],
                               state=None if options.replay else _tick_state(tool_refresh_s, interval_s,
                                                                             _settings_every(options)))
        self.interval_s = interval_s
        self.deadline_s = deadline_for(self.options.probe_limit_s)
        self.gpu = gpu
        self._reader = NvmlReader("monitor-read")
        self._stop = threading.Event()
        self._changed = threading.Condition()
        self._snapshot: Snapshot | None = None
        self._busy_since: float | None = None
        self._thread: threading.Thread | None = None
        self._runs = 0
        self._failures = 0

    @property
    def snapshot(self) -> Snapshot | None:
        return self._snapshot

    def busy_for(self, now_mono: float) -> float | None:
        """How long the tick in progress has run, or None between ticks."""
        since = self._busy_since
        return None if since is None else now_mono - since

    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("monitor already started")
        self._thread = threading.Thread(target=self._loop, name="gpu-preflight-monitor", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop after the tick in progress (which is bounded by its own deadline), then let go of NVML and /dev/kmsg."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self._thread is None or not self._thread.is_alive():
            for kept in (self.options.state or {}).values():
                close = getattr(kept, "close", None)
                if callable(close):
                    close()

    def wait_for_tick(self, after: int = 0, timeout_s: float | None = None) -> Snapshot | None:
        """Block until a tick numbered above ``after`` has finished; None on timeout."""
        with self._changed:
            self._changed.wait_for(lambda: self._snapshot is not None and self._snapshot.tick > after, timeout_s)
            snap = self._snapshot
        return snap if snap is not None and snap.tick > after else None

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # a rendering bug: keep looping; the verdict goes stale and /readyz says so
                log.exception("monitor tick failed")
                self._busy_since = None
            self._stop.wait(self.interval_s)

    def tick(self) -> Snapshot:
        """Run the node checks once, judge GPU health and publish a new snapshot."""
        started_mono = time.monotonic()
        self._busy_since = started_mono
        report: NodeReport | None = None
        failure: BaseException | None = None
        error: str | None = None
        try:
            report = self._reader.run(self.options)
        except Timeout as exc:
            failure, error = exc, f"node checks did not finish: {exc}"
        except Exception as exc:  # a bad config file edited under a running server, or a bug
            log.exception("node checks crashed")
            failure, error = exc, f"node checks failed: {type(exc).__name__}: {exc}"
        duration = time.monotonic() - started_mono
        self._runs += 1
        self._failures += error is not None
        health = self.gpu.observe(report, failure or error, duration) if self.gpu is not None else None
        finished = time.time()
        snap = Snapshot(
            tick=self._runs, finished_at=finished, finished_mono=time.monotonic(), duration_s=duration,
            report=report, error=error, gpu=health, runs_total=self._runs, run_failures_total=self._failures)
        with self._changed:
            self._snapshot = snap
            self._busy_since = None
            self._changed.notify_all()
        return snap


def _settings_every(options: RunOptions) -> int:
    """``gpu.nvml_settings_refresh_ticks`` of the site file, environment, ``--set`` and an explicit
    profile, read once at start; a config that does not load leaves the default (each tick then
    reports the config error itself)."""
    try:
        profile = find_profile(options.profile) if options.profile and options.profile != "auto" else None
        config, _ = build_config(profile=profile, config_file=options.config_file,
                                 overrides=list(options.overrides), environ=options.environ)
    except (ConfigError, OSError, ValueError):
        return SETTINGS_EVERY
    return config.gpu.nvml_settings_refresh_ticks


def _tick_state(refresh_s: float, interval_s: float, settings_every: int = 10) -> dict[str, object]:
    """What the monitor's runs keep from tick to tick (see :class:`gpu_preflight.registry.ProbeState`)."""
    state: dict[str, object] = {KERNEL_LOG_FOLLOWER: KmsgFollower(refresh_s), TOOL_CACHE: ToolCache(refresh_s),
                                PROCESS_SCAN: ProcessScan(), NVML_DUMP_ON_DEMAND: True, CONFIG_CACHE: ConfigCache(),
                                FABRIC_CACHE: FabricCache(refresh_s), HOST_SAMPLER: HostSampler(refresh_s)}
    if interval_s < NVML_KEEP_OPEN_BELOW_S:
        state[NVML_SESSION] = MonitorSession(settings_every=settings_every)
    return state


class AliveSampler:
    """Samples the agent's ``alive_callback`` (its last progress time) every ``period_s``.

    ``clock`` (wall) and ``monotonic`` are the clocks it reads: a test steps them instead of sleeping.
    """

    def __init__(self, callback: Callable[[], float], period_s: float, *, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.callback = callback
        self.period_s = period_s
        self.clock, self.monotonic = clock, monotonic
        self._call = OneAtATime("alive-callback")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sample = AliveSample(None, monotonic(), "the alive callback has not been sampled yet")

    @property
    def sample(self) -> AliveSample:
        return self._sample

    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        self.sample_once()
        self._thread = threading.Thread(target=self._loop, name="gpu-preflight-alive", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self.sample_once()

    def sample_once(self) -> AliveSample:
        """Call the callback within ``period_s``; a hang, an exception or a non-number is an error."""
        error: str | None = None
        progress: float | None = None
        previous = self._sample
        try:
            value = self._call(self.callback, self.period_s)
        except Timeout as exc:
            error = f"alive callback did not answer: {exc}"
        except Exception as exc:
            error = f"alive callback raised {type(exc).__name__}: {exc}"
        else:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                progress = float(value)
            else:
                error = f"alive callback returned {value!r}, not a Unix time"
        now_mono = self.monotonic()
        made = previous.progress_mono if progress is None else progress_at(progress, previous, wall=self.clock(),
                                                                           now_mono=now_mono)
        self._sample = AliveSample(progress, now_mono, error, made)
        return self._sample
