"""``GPUHealthCheckServer``: the elastic agent's health-check server, with GPU monitoring.

The spec's server is a no-op; this one serves HTTP (127.0.0.1 by default):

* ``/healthz`` — alive: the monitor loop runs and is not stuck, and the agent's
  ``alive_callback`` reported progress within ``timeout`` seconds;
* ``/readyz`` — the last verdict says the node is fit for work (fresh, node checks not
  gating, GPUs healthy);
* ``/status`` — JSON: both rules with their reasons, GPU health, the last canonical
  report of the quick node checks;
* ``/metrics`` — Prometheus exposition (see :mod:`.metrics`).

Every answer comes from memory (the monitor's last snapshot), so it is instant and
never blocks on NVML: this is what Slurm's HealthCheckProgram and Kubernetes probes need.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from msgspec.structs import replace

from ..engine import RunOptions
from ..health.gpu_health import GPUHealthCheck
from . import metrics
from .http import DEFAULT_MAX_CONNECTIONS, HealthHTTPServer, Route
from .monitor import AliveSampler, Monitor
from .state import liveness, readiness

log = logging.getLogger(__name__)

__all__ = ["GPUHealthCheckServer", "create_gpu_healthcheck_server"]

JSON = "application/json"
TEXT = "text/plain; charset=utf-8"
DEFAULT_CHECK_TIMEOUT_S = 10.0


class GPUHealthCheckServer:
    """Health-check HTTP server with a monitor loop running the quick node checks.

    ``alive_callback`` returns the agent's last progress time (Unix seconds); ``timeout``
    is how old that may be before ``/healthz`` says dead. ``gpu_check_interval`` is the
    monitor's interval: node checks and GPU health share one NVML read per tick.
    Keyword-only extras: ``host``, ``options`` (replay, profile, config file, overrides,
    fail_on of the node checks), ``on_gpu_failure`` (called once per failure episode),
    ``healthy_when_unknown`` (let unknown GPU health count as ready: not recommended),
    ``check_timeout_s`` (bound of each probe) and ``max_connections``.
    """

    def __init__(self, alive_callback: Callable[[], float], port: int, timeout: float,
                 gpu_device_index: int | None = None, gpu_check_interval: float = 60,
                 enable_gpu_monitoring: bool = True, *, host: str = "127.0.0.1", options: RunOptions | None = None,
                 on_gpu_failure: Callable[[], object] | None = None, healthy_when_unknown: bool = False,
                 check_timeout_s: float = DEFAULT_CHECK_TIMEOUT_S,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS) -> None:
        self._alive_callback = alive_callback
        self._host, self._port, self._timeout = host, port, timeout
        self._gpu_device_index = gpu_device_index
        self._gpu_check_interval = gpu_check_interval
        self._gpu_monitoring_enabled = enable_gpu_monitoring
        self._healthy_when_unknown = healthy_when_unknown
        self._max_connections = max_connections
        run_options = replace(options or RunOptions(), probe_timeout_s=check_timeout_s)
        self._fail_on = run_options.fail_on
        self._gpu_health_check = GPUHealthCheck(
            gpu_device_index, gpu_check_interval, on_gpu_failure, replay=run_options.replay,
            timeout_s=check_timeout_s, healthy_when_unknown=healthy_when_unknown) if enable_gpu_monitoring else None
        self.monitor = Monitor(run_options, gpu_check_interval, self._gpu_health_check)
        self._sampler = AliveSampler(alive_callback, min(1.0, max(timeout / 4, 0.05)))
        self._httpd: HealthHTTPServer | None = None
        self._http_thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def port(self) -> int:
        """The bound port (useful with ``port=0``); the requested one before :meth:`start`."""
        return int(self._httpd.server_address[1]) if self._httpd else self._port

    @property
    def url(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"

    def start(self) -> None:
        """Bind, then start the alive sampler, the monitor loop and the HTTP thread."""
        with self._lock:
            if self._httpd is not None:
                raise RuntimeError("server already started")
            self._httpd = HealthHTTPServer((self._host, self._port), self._routes(), self._max_connections)
            self._sampler.start()
            self.monitor.start()
            self._http_thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                                 name="gpu-preflight-http", daemon=True)
            self._http_thread.start()
        log.info("health server listening on %s", self.url)

    def stop(self) -> None:
        """Stop serving, then stop the loops; safe to call twice."""
        with self._lock:
            httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        self.monitor.stop()
        self._sampler.stop()

    def wait_for_tick(self, after: int = 0, timeout_s: float | None = None) -> bool:
        """Block until a monitor tick numbered above ``after`` finished (for callers and tests)."""
        return self.monitor.wait_for_tick(after, timeout_s) is not None

    def alive(self) -> tuple[bool, list[str]]:
        now_mono = time.monotonic()
        return liveness(self._sampler.sample, now_mono=now_mono, timeout_s=self._timeout,
                        sampler_alive=self._sampler.is_running(), loop_alive=self.monitor.is_running(),
                        loop_busy_for=self.monitor.busy_for(now_mono), tick_deadline_s=self.monitor.deadline_s)

    def ready(self) -> tuple[bool, list[str]]:
        stale_after = 2 * self._gpu_check_interval + self.monitor.deadline_s
        return readiness(self.monitor.snapshot, now_mono=time.monotonic(), stale_after_s=stale_after,
                         fail_on=self._fail_on, healthy_when_unknown=self._healthy_when_unknown)

    def get_gpu_health_status(self) -> dict[str, Any]:
        """GPU health of the last tick (spec keys ``enabled``, ``is_healthy``, ... plus the verdict)."""
        check = self._gpu_health_check
        base = {"enabled": check is not None, "device_index": self._gpu_device_index, "timestamp": time.time(),
                "pynvml_available": check.pynvml_available if check else None}
        if check is None:
            return {**base, "status": "disabled", "is_healthy": None,
                    "reason": "GPU monitoring disabled; readiness uses the node checks alone"}
        status = check.last_status
        if status is None:
            return {**base, "status": "unknown", "is_healthy": False, "reason": "not checked yet", "gpus": []}
        return {**base, **status.to_dict(), "is_healthy": status.ok(self._healthy_when_unknown)}

    def get_health_summary(self) -> dict[str, Any]:
        """Agent liveness, node readiness and GPU health; ``overall_healthy`` fails closed."""
        alive, alive_reasons = self.alive()
        ready, ready_reasons = self.ready()
        sample = self._sampler.sample
        snap = self.monitor.snapshot
        return {
            "process_health": {"alive": alive, "last_progress_time": sample.progress, "reasons": alive_reasons},
            "node": {"ready": ready, "reasons": ready_reasons,
                     "status": snap.report.status.value if snap and snap.report else None},
            "gpu_health": self.get_gpu_health_status(),
            "monitor": self._monitor_status(),
            "overall_healthy": alive and ready,
            "timestamp": time.time(),
        }

    def _monitor_status(self) -> dict[str, Any]:
        snap = self.monitor.snapshot
        return {"interval_s": self._gpu_check_interval, "check_timeout_s": self.monitor.options.probe_limit_s,
                "ticks": snap.tick if snap else 0, "last_tick_at": snap.finished_at if snap else None,
                "last_tick_duration_s": round(snap.duration_s, 6) if snap else None,
                "error": snap.error if snap else None,
                "run_failures_total": snap.run_failures_total if snap else 0,
                "threads": threading.active_count()}

    def _routes(self) -> dict[str, Route]:
        return {"/healthz": self._healthz, "/readyz": self._readyz, "/status": self._status,
                "/metrics": self._metrics, "/": self._index}

    def _healthz(self) -> tuple[int, str, bytes]:
        alive, reasons = self.alive()
        return 200 if alive else 503, JSON, _json({"alive": alive, "reasons": reasons})

    def _readyz(self) -> tuple[int, str, bytes]:
        ready, reasons = self.ready()
        return 200 if ready else 503, JSON, _json({"ready": ready, "reasons": reasons})

    def _status(self) -> tuple[int, str, bytes]:
        summary = json.dumps(self.get_health_summary())
        snap = self.monitor.snapshot
        report = snap.report_json if snap else "null"  # serialised once per tick, not per request
        return 200, JSON, f'{summary[:-1]}, "report": {report}}}'.encode()

    def _metrics(self) -> tuple[int, str, bytes]:
        started = time.perf_counter()
        alive, _ = self.alive()
        ready, _ = self.ready()
        snap = self.monitor.snapshot
        made = self._sampler.sample.progress_mono
        now_mono = time.monotonic()
        parts = [snap.metrics if snap else "",
                 metrics.live_metrics(alive, ready, now_mono - snap.finished_mono if snap else None,
                                      now_mono - made if made is not None else None)]
        parts.append(metrics.scrape_duration(time.perf_counter() - started))
        return 200, metrics.CONTENT_TYPE, "".join(parts).encode()

    def _index(self) -> tuple[int, str, bytes]:
        return 200, TEXT, b"gpu-preflight health server: /healthz /readyz /status /metrics\n"


def _json(data: Any) -> bytes:
    return (json.dumps(data) + "\n").encode()


def create_gpu_healthcheck_server(alive_callback: Callable[[], float], port: int, timeout: float,
                                  gpu_device_index: int | None = None, gpu_check_interval: float = 60,
                                  enable_gpu_monitoring: bool = True, **kwargs: Any) -> GPUHealthCheckServer:
    """Create a :class:`GPUHealthCheckServer` (the spec's factory; extras as keywords)."""
    return GPUHealthCheckServer(alive_callback, port, timeout, gpu_device_index, gpu_check_interval,
                                enable_gpu_monitoring, **kwargs)
