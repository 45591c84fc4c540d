#!/usr/bin/env python3
"""GPU health check for PyTorch elastic training: the document's examples, runnable.

The same steps as ``torch/distributed/elastic/examples/example_gpu_health_check.py`` of the
PyTorch elastic GPU health-check document, with ``gpu_preflight`` as the import:

1. a synchronous check of every GPU (``create_gpu_health_check`` then ``gpu_check()``);
2. a quick check without keeping an instance (``quick_gpu_health_check()``);
3. asynchronous monitoring: ``gpu_check.async_check()`` returns None and checks in the
   background every ``interval`` seconds until ``gpu_check.stop()``;
4. the ``PynvmlMixin`` platform questions (pynvml available, GB200 tray, GPU -> NIC map);
5. the health-check server: ``start()``, ``get_gpu_health_status()``,
   ``get_health_summary()``, its ``/healthz`` and ``/readyz`` endpoints, ``stop()``.

Unlike the document's version, a GPU that could not be looked at (no pynvml, no driver, a
driver older than r570) is reported unhealthy, never healthy (docs/monitoring.md).

    python examples/example_gpu_health_check.py                 # live GPUs, server on :8080
    python examples/example_gpu_health_check.py --port 0 --interval 1 --json
    python examples/example_gpu_health_check.py --replay snapshot.json   # a recorded node

Exit status: 0 when every GPU is healthy, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from gpu_preflight import (
    GPUHealthCheckServer,
    PynvmlMixin,
    create_gpu_health_check,
    create_gpu_healthcheck_server,
    quick_gpu_health_check,
)


def basic_usage(device_index: int | None, interval: float, replay: str | None) -> bool:
    """1. Create a GPU health check for all GPUs and check synchronously."""
    gpu_check = create_gpu_health_check(
        device_index=device_index,  # None: check all GPUs
        interval=interval,  # seconds between the background checks of async_check()
        on_failure=lambda: print("GPU health check failed!"),
        replay=replay,
    )
    is_healthy = gpu_check()
    print(f"GPU health status: {'Healthy' if is_healthy else 'Unhealthy'}")
    status = gpu_check.last_status
    if status is not None:
        print(f"  state={status.state.value}: {status.reason}")
        for gpu in status.gpus:
            print(f"  gpu{gpu.index}: {gpu.state.value}, recovery action {gpu.recovery_action}"
                  + (f" ({gpu.recommendation})" if gpu.recommendation else ""))
    return is_healthy


def quick_check(device_index: int | None, replay: str | None) -> bool:
    """2. Perform a quick health check without creating a persistent instance."""
    is_healthy = quick_gpu_health_check(device_index, replay=replay)
    print(f"Quick health check: {'Healthy' if is_healthy else 'Unhealthy'}")
    return is_healthy


def background_monitoring(device_index: int | None, interval: float, replay: str | None) -> dict[str, Any]:
    """3. Start asynchronous monitoring with ``async_check()``, let it check, then stop it."""
    failures: list[float] = []
    gpu_check = create_gpu_health_check(device_index=device_index, interval=interval,
                                        on_failure=lambda: failures.append(time.time()), replay=replay)
    returned = gpu_check.async_check()  # returns None: the monitor runs in the background
    seen: list[object] = []  # each background check leaves a new status object
    deadline = time.monotonic() + max(3 * interval, 30.0)
    while len(seen) < 2 and time.monotonic() < deadline:
        status = gpu_check.last_status
        if status is not None and (not seen or status is not seen[-1]):
            seen.append(status)
        time.sleep(0.02)
    gpu_check.stop()
    status = gpu_check.last_status
    print(f"Background monitoring: {len(seen)} check(s), last status {status.state.value if status else 'none'}, "
          f"on_failure called {len(failures)} time(s)")
    return {"async_check_returned": returned, "background_checks": len(seen), "on_failure_calls": len(failures)}


def platform_questions(replay: str | None) -> dict[str, Any]:
    """4. The ``PynvmlMixin`` methods (``GPUHealthCheck`` has them too)."""

    class Platform(PynvmlMixin):
        pass

    platform = Platform()
    platform.replay = replay
    available = platform.check_pynvml_availability()
    gb200 = platform.is_gb200_platform()
    print(f"PyNVML available: {available}; GB200 platform: {gb200}")
    if gb200:
        print(f"GB200 GPU -> NIC mapping: {platform.get_gb200_static_mapping()}")
    return {"pynvml_available": available, "gb200": gb200}


def _http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 (our own server on loopback)
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def health_server(device_index: int | None, interval: float, port: int, replay: str | None) -> dict[str, Any]:
    """5. A GPU health-check server: start, read the GPU status and the summary, stop."""
    last_progress = time.time()

    def process_alive_callback() -> float:  # the elastic agent's "last progress" time
        return last_progress

    options = None
    if replay:
        from gpu_preflight.engine import RunOptions

        options = RunOptions(replay=replay)
    server: GPUHealthCheckServer = create_gpu_healthcheck_server(
        alive_callback=process_alive_callback,
        port=port,
        timeout=30,
        gpu_device_index=device_index,  # None: monitor all GPUs
        gpu_check_interval=interval,
        enable_gpu_monitoring=True,
        options=options,
    )
    server.start()
    try:
        server.wait_for_tick(timeout_s=max(3 * interval, 60.0))
        gpu_status = server.get_gpu_health_status()
        print(f"GPU health: {gpu_status['status']} (is_healthy={gpu_status['is_healthy']})")
        summary = server.get_health_summary()
        print(f"Health summary: overall_healthy={summary['overall_healthy']}, "
              f"node ready={summary['node']['ready']} {summary['node']['reasons']}")
        codes = {path: _http_status(f"{server.url}/{path}") for path in ("healthz", "readyz")}
        print(f"Endpoints at {server.url}: /healthz {codes['healthz']}, /readyz {codes['readyz']}")
    finally:
        server.stop()
    return {"gpu_health": gpu_status, "summary_overall_healthy": summary["overall_healthy"],
            "node_ready": summary["node"]["ready"], **codes}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device-index", type=int, default=None, help="one GPU (default: all)")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between background checks")
    parser.add_argument("--port", type=int, default=8080, help="health server port (0: any free port)")
    parser.add_argument("--replay", help="judge a 'gpu-preflight snapshot' file instead of the live GPUs")
    parser.add_argument("--debug", action="store_true", help="debug logging of the health check")
    parser.add_argument("--json", action="store_true", help="end with one line of JSON: every result")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.debug:  # the document's debug switch, under our module's name
        logging.getLogger("gpu_preflight.health").setLevel(logging.DEBUG)

    result: dict[str, Any] = {"sync": basic_usage(args.device_index, args.interval, args.replay),
                              "quick": quick_check(args.device_index, args.replay)}
    result.update(background_monitoring(args.device_index, args.interval, args.replay))
    result.update(platform_questions(args.replay))
    result["server"] = health_server(args.device_index, args.interval, args.port, args.replay)
    result["threads_left"] = sorted(t.name for t in threading.enumerate() if t.name.startswith("gpu-health"))
    if args.json:
        print(json.dumps(result, default=str))
    return 0 if result["sync"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
