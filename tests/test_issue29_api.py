"""Issue 29, items 10 and 11: the spec-003 health API as the document calls it.

``gpu_check.async_check()`` (not awaited, as the document writes it) returns None and the
monitoring runs in the background; ``PynvmlMixin`` imports from the package root; the
shipped ``examples/example_gpu_health_check.py`` runs to the end against the stub
``libnvidia-ml.so.1`` (real pynvml, a fresh process).
"""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import gpu_preflight
from gpu_preflight.health import GPUHealthCheck, nvml_helper

from .conftest import REPO
from .nvml_stub.stub import stub_env, write_stub_data
from .test_health_api import set_action, write_dump

EXAMPLE = REPO / "examples" / "example_gpu_health_check.py"


def _wait(predicate: Any, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_async_check_called_as_the_document_does_returns_none_and_monitors(tmp_path: Path,
                                                                             h200_dump: dict[str, Any]) -> None:
    """No event loop, no await: the call returns None at once and a background monitor checks
    every ``interval``, calling ``on_failure`` when a GPU goes bad."""
    path = tmp_path / "d.json"
    write_dump(path, h200_dump)
    fired = threading.Event()
    check = GPUHealthCheck(interval=0.05, on_failure=fired.set, replay=str(path))
    try:
        assert check.async_check() is None
        assert check.monitoring is True
        assert _wait(lambda: check.last_status is not None), "the background monitor never checked"
        assert check.last_status is not None and check.last_status.ok()
        write_dump(path, set_action(copy.deepcopy(h200_dump), 2))  # NODE_REBOOT
        assert fired.wait(20), "on_failure was not called by the background monitor"
        assert check.async_check() is None  # a second call starts no second monitor
        assert sum(t.name == "gpu-health-monitor" for t in threading.enumerate()) == 1
    finally:
        check.stop()
    assert check.monitoring is False
    assert not any(t.name == "gpu-health-monitor" for t in threading.enumerate())


def test_async_check_inside_a_running_loop_monitors_on_that_loop(tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    """Called from a coroutine (still not awaited), the monitor is a task of the running loop, so
    a coroutine ``on_failure`` is awaited on the caller's loop."""
    path = tmp_path / "d.json"
    write_dump(path, h200_dump)

    async def scenario() -> tuple[object, list[int], bool]:
        fired = asyncio.Event()
        calls: list[int] = []

        async def on_failure() -> None:
            calls.append(1)
            fired.set()  # an asyncio.Event of this loop: only works if awaited here

        check = GPUHealthCheck(interval=0.02, on_failure=on_failure, replay=str(path))
        returned = check.async_check()
        await asyncio.to_thread(write_dump, path, set_action(copy.deepcopy(h200_dump), 1))
        await asyncio.wait_for(fired.wait(), 20)
        running = check.monitoring
        check.stop()
        await asyncio.sleep(0)
        return returned, calls, running and not check.monitoring

    returned, calls, stopped = asyncio.run(scenario())
    assert returned is None and calls == [1] and stopped


def test_the_awaitable_form_stays_under_its_own_name(tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    check = GPUHealthCheck(interval=0.01, replay=write_dump(tmp_path / "d.json", h200_dump))

    async def scenario() -> bool:
        task = asyncio.create_task(check.monitor())
        await asyncio.sleep(0.2)
        task.cancel()
        return check.last_status is not None and check.last_status.ok()

    assert asyncio.run(scenario())


def test_pynvml_mixin_is_at_the_package_root() -> None:
    assert "PynvmlMixin" in gpu_preflight.__all__
    assert gpu_preflight.PynvmlMixin is nvml_helper.PynvmlMixin


@pytest.mark.parametrize(("action", "healthy"), [(0, True), (2, False)])
def test_the_shipped_example_runs_against_the_nvml_stub(stub_lib: Path, tmp_path: Path,
                                                        h200_dump: dict[str, Any], action: int,
                                                        healthy: bool) -> None:
    """The document's example file, run as a user would, through the real pynvml and the stub."""
    write_stub_data(set_action(h200_dump, action), tmp_path / "nvml.txt")
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--port", "0", "--interval", "0.2", "--json"],
                          env=stub_env(stub_lib, tmp_path / "nvml.txt"), capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == (0 if healthy else 1), proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert f"GPU health status: {'Healthy' if healthy else 'Unhealthy'}" in lines
    assert f"Quick health check: {'Healthy' if healthy else 'Unhealthy'}" in lines
    result = json.loads(lines[-1])
    assert result["sync"] is healthy and result["quick"] is healthy
    assert result["gb200"] is False and result["pynvml_available"] is True
    assert result["async_check_returned"] is None and result["background_checks"] >= 1
    assert result["on_failure_calls"] == (0 if healthy else 1)
    server = result["server"]
    assert server["gpu_health"]["is_healthy"] is healthy
    assert server["gpu_health"]["gpus"][0]["recovery_action"] == ("NONE" if healthy else "NODE_REBOOT")
    assert server["summary_overall_healthy"] is healthy
    assert server["healthz"] == 200 and server["readyz"] == (200 if healthy else 503)
