"""The elastic-training health API: GPUHealthCheck, its helpers, fail-closed behaviour.

Replayed snapshots (edited to inject faults) drive most tests; the live path runs real
pynvml against the stub libnvidia-ml.so.1 in a subprocess, including a hung nvmlInit.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.health import (
    GB200_NIC_LAYOUTS,
    GPUHealthCheck,
    HealthState,
    PynvmlMixin,
    check_pynvml_availability,
    create_gpu_health_check,
    get_gb200_static_mapping,
    is_gb200_platform,
    quick_gpu_health_check,
)
from gpu_preflight.recovery import RECOVERY_ACTIONS, recovery_action

from .nvml_stub.stub import stub_env, write_stub_data

RECOVERY_FIELD = "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION"


def write_dump(path: Path, dump: dict[str, Any]) -> str:
    """Replace the replay file atomically, so a concurrent reader sees old or new, never half."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(dump))
    os.replace(tmp, path)
    return str(path)


def set_action(dump: dict[str, Any], value: int, gpu: int = 0) -> dict[str, Any]:
    dump["devices"][gpu]["field_values"][RECOVERY_FIELD] = {"id": 230, "valueType": 1, "value": value}
    return dump


def add_gpu(dump: dict[str, Any]) -> dict[str, Any]:
    second = copy.deepcopy(dump["devices"][0])
    second["nvmlDeviceGetUUID"] = {"ok": "GPU-00000000-0000-0000-0000-000000000001"}
    second["nvmlDeviceGetIndex"] = {"ok": 1}
    dump["devices"].append(second)
    dump["system"]["nvmlDeviceGetCount"] = {"ok": len(dump["devices"])}
    return dump


def old_driver(dump: dict[str, Any]) -> dict[str, Any]:
    """An r560 driver (new enough for the node checks, older than r570): no recovery-action field."""
    dump["system"]["nvmlSystemGetDriverVersion"] = {"ok": "560.35.03"}
    dump["devices"][0]["field_values"][RECOVERY_FIELD] = {"nvmlReturn": 3}
    return dump


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 60) -> Any:
    """Run ``code`` in a fresh interpreter and return the JSON it prints last."""
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_healthy_snapshot_is_healthy(tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    check = GPUHealthCheck(replay=write_dump(tmp_path / "d.json", h200_dump))
    assert check() is True
    status = check.last_status
    assert status is not None and status.state is HealthState.HEALTHY
    assert [(g.index, g.state, g.recovery_action) for g in status.gpus] == [(0, HealthState.HEALTHY, "NONE")]
    assert check.enabled is True


@pytest.mark.parametrize("value", [*sorted(RECOVERY_ACTIONS), 99])
def test_each_recovery_action_maps_to_the_shared_table(tmp_path: Path, h200_dump: dict[str, Any],
                                                       value: int) -> None:
    action = recovery_action(value)
    check = GPUHealthCheck(replay=write_dump(tmp_path / "d.json", set_action(h200_dump, value)))
    status = check.check()
    assert check() is (value == 0)
    (gpu,) = status.gpus
    assert gpu.recovery_action == action.name
    if value == 0:
        assert status.state is HealthState.HEALTHY and gpu.recommendation is None
    else:
        assert status.state is HealthState.UNHEALTHY
        assert gpu.recommendation == action.recommendation
        assert action.name in status.reason


def test_old_driver_is_unknown_and_never_healthy(tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    path = write_dump(tmp_path / "d.json", old_driver(h200_dump))
    check = GPUHealthCheck(replay=path)
    assert check() is False
    status = check.last_status
    assert status is not None and status.state is HealthState.UNKNOWN
    assert "older than r570" in status.reason
    assert check.enabled is False
    assert GPUHealthCheck(replay=path, healthy_when_unknown=True)() is True


def test_without_pynvml_the_check_fails_closed() -> None:
    out = run_python(
        "import json, sys\n"
        "sys.modules['pynvml'] = None  # import pynvml now raises ImportError\n"
        "from gpu_preflight.health import GPUHealthCheck\n"
        "c = GPUHealthCheck()\n"
        "print(json.dumps([c(), c.last_status.state.value, c.last_status.reason, c.pynvml_available]))\n")
    healthy, state, reason, available = out
    assert healthy is False and state != "healthy" and available is False
    assert "pynvml" in reason


def test_driver_not_loaded_is_unknown(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    write_stub_data(h200_dump, tmp_path / "nvml.txt", init_rc=9)
    out = run_python("import json\nfrom gpu_preflight.health import GPUHealthCheck\nc = GPUHealthCheck()\n"
                     "print(json.dumps([c(), c.last_status.state.value, c.last_status.reason]))",
                     env=stub_env(stub_lib, tmp_path / "nvml.txt"))
    assert out[0] is False and out[1] != "healthy" and "driver not loaded" in out[2]


@pytest.mark.parametrize(("value", "healthy"), [(0, True), (2, False)])
def test_live_nvml_through_real_pynvml(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any], value: int,
                                       healthy: bool) -> None:
    write_stub_data(set_action(h200_dump, value), tmp_path / "nvml.txt")
    out = run_python("import json\nfrom gpu_preflight.health import GPUHealthCheck\nc = GPUHealthCheck()\n"
                     "ok = c()\nprint(json.dumps([ok, [g.recovery_action for g in c.last_status.gpus]]))",
                     env=stub_env(stub_lib, tmp_path / "nvml.txt"))
    assert out == [healthy, [recovery_action(value).name]]


def test_hung_nvml_never_blocks_and_stops_leaking_threads(stub_lib: Path, tmp_path: Path,
                                                         h200_dump: dict[str, Any]) -> None:
    """nvmlInit hangs: each call returns within its deadline; after three reads blocked in
    the driver, reads stop (no new blocked thread per call) and the verdict stays failed."""
    write_stub_data(h200_dump, tmp_path / "nvml.txt")
    code = (
        "import json, os, threading, time\n"
        "from gpu_preflight.health import GPUHealthCheck\n"
        "c = GPUHealthCheck(timeout_s=1)\n"
        "rows = []\n"
        "for _ in range(5):\n"
        "    t = time.monotonic(); ok = c(); took = time.monotonic() - t\n"
        "    rows.append([ok, c.last_status.state.value, c.last_status.reason, took, threading.active_count()])\n"
        "print(json.dumps(rows), flush=True)\n"
        "os._exit(0)  # threads blocked in the stub would otherwise delay interpreter exit\n")
    rows = run_python(code, env=stub_env(stub_lib, tmp_path / "nvml.txt", FAKE_NVML_HANG="sys:nvmlInitWithFlags:60"))
    for ok, state, _, took, _ in rows:
        assert ok is False and state != "healthy" and took < 5.0  # deadline: timeout_s + 2 s
    assert all("did not finish" in reason for _, _, reason, _, _ in rows[:3])
    assert all(state == "unhealthy" and "suspended" in reason for _, state, reason, _, _ in rows[3:])
    assert rows[4][3] < 0.5  # suspended: answered without touching NVML
    assert rows[4][4] == rows[2][4]  # no thread added once suspended


def test_device_index_selects_one_gpu(tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    path = write_dump(tmp_path / "d.json", set_action(add_gpu(h200_dump), 1, gpu=1))
    assert GPUHealthCheck(device_index=0, replay=path)() is True
    assert GPUHealthCheck(replay=path)() is False
    bad = GPUHealthCheck(device_index=1, replay=path)
    assert bad() is False and [g.recovery_action for g in bad.last_status.gpus] == ["GPU_RESET"]
    missing = GPUHealthCheck(device_index=5, replay=path)
    assert missing() is False
    assert missing.last_status is not None and "gpu5 not present" in missing.last_status.reason


def test_lost_gpu_is_unhealthy(tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    dump = add_gpu(h200_dump)
    dump["devices"][1] = {"handle": {"error": "NVMLError_GpuIsLost", "value": 15, "str": "GPU is lost"}}
    check = GPUHealthCheck(replay=write_dump(tmp_path / "d.json", dump))
    assert check() is False
    status = check.last_status
    assert status is not None and status.state is HealthState.UNHEALTHY
    assert [(g.index, g.state) for g in status.gpus] == [(0, HealthState.HEALTHY), (1, HealthState.UNHEALTHY)]


def test_on_failure_fires_once_per_episode_under_concurrency(tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    path = tmp_path / "d.json"
    write_dump(path, set_action(copy.deepcopy(h200_dump), 2))
    calls: list[int] = []
    check = GPUHealthCheck(on_failure=lambda: calls.append(1), replay=str(path))
    barrier = threading.Barrier(16)
    results: list[bool] = []

    def worker() -> None:
        barrier.wait()
        results.append(check())

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == [False] * 16
    assert len(calls) == 1
    assert check() is False and len(calls) == 1  # still the same failure
    write_dump(path, h200_dump)
    assert check() is True and len(calls) == 1
    write_dump(path, set_action(copy.deepcopy(h200_dump), 4))
    assert check() is False and len(calls) == 2  # a new failure episode


def test_monitor_awaits_a_coroutine_callback(tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    path = tmp_path / "d.json"
    write_dump(path, h200_dump)

    async def scenario() -> tuple[int, list[int], bool]:
        fired, sync_fired = asyncio.Event(), asyncio.Event()
        awaited: list[int] = []
        sync_calls: list[int] = []

        async def on_failure() -> None:
            awaited.append(1)
            fired.set()

        def plain_on_failure() -> None:  # the spec's examples pass plain functions
            sync_calls.append(1)
            sync_fired.set()

        check = GPUHealthCheck(interval=0.02, on_failure=on_failure, replay=str(path))
        plain = GPUHealthCheck(interval=0.02, on_failure=plain_on_failure, replay=str(path))
        tasks = [asyncio.create_task(check.monitor()), asyncio.create_task(plain.monitor())]
        await asyncio.to_thread(write_dump, path, set_action(copy.deepcopy(h200_dump), 1))
        await asyncio.wait_for(asyncio.gather(fired.wait(), sync_fired.wait()), 20)
        running = not any(t.done() for t in tasks)
        for t in tasks:
            t.cancel()
        return len(awaited), sync_calls, running

    awaited, sync_calls, running = asyncio.run(scenario())
    assert awaited == 1 and sync_calls == [1] and running


def test_factories(tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    healthy = write_dump(tmp_path / "ok.json", h200_dump)
    bad = write_dump(tmp_path / "bad.json", set_action(copy.deepcopy(h200_dump), 2))
    assert quick_gpu_health_check(replay=healthy) is True
    assert quick_gpu_health_check(replay=bad) is False
    check = create_gpu_health_check(device_index=0, interval=5, replay=healthy)
    assert isinstance(check, GPUHealthCheck) and (check.device_index, check.interval) == (0, 5)


def test_gb200_detection_matches_gb200_only(tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    assert check_pynvml_availability() is True  # nvidia-ml-py is a dependency
    assert is_gb200_platform(write_dump(tmp_path / "h200.json", h200_dump)) is False
    dump = copy.deepcopy(h200_dump)
    dump["devices"][0]["nvmlDeviceGetName"] = {"ok": "NVIDIA GB200"}
    gb200 = write_dump(tmp_path / "gb200.json", dump)
    assert is_gb200_platform(gb200) is True
    dump["devices"][0]["nvmlDeviceGetName"] = {"ok": "NVIDIA B200"}
    assert is_gb200_platform(write_dump(tmp_path / "b200.json", dump)) is False  # HGX B200 is no GB200 tray
    assert GPUHealthCheck(replay=gb200).is_gb200_platform() is True
    mixin = PynvmlMixin()
    assert mixin.check_pynvml_availability() is True and hasattr(mixin.pynvml, "nvmlInit")


def fake_ib(root: Path, devices: dict[str, str]) -> Path:
    for name, pci_id in devices.items():
        (root / name / "device").mkdir(parents=True)
        (root / name / "device" / "device").write_text(pci_id + "\n")
    return root


def test_gb200_nic_mapping(tmp_path: Path) -> None:
    spec = {0: "mlx5_0", 1: "mlx5_1", 2: "mlx5_3", 3: "mlx5_4"}
    assert get_gb200_static_mapping(sysfs=tmp_path / "absent") == spec
    cx7, bf3 = "0x1021", "0xa2dc"
    one_function = fake_ib(tmp_path / "a", {"mlx5_0": cx7, "mlx5_1": cx7, "mlx5_2": bf3, "mlx5_3": cx7,
                                            "mlx5_4": cx7, "mlx5_5": bf3})
    assert get_gb200_static_mapping(sysfs=one_function) == spec
    two_functions = fake_ib(tmp_path / "b", {"mlx5_0": cx7, "mlx5_1": cx7, "mlx5_2": bf3, "mlx5_3": bf3,
                                             "mlx5_4": cx7, "mlx5_5": cx7, "mlx5_6": bf3, "mlx5_7": bf3})
    assert get_gb200_static_mapping(sysfs=two_functions) == {0: "mlx5_0", 1: "mlx5_1", 2: "mlx5_4", 3: "mlx5_5"}
    assert get_gb200_static_mapping(bf3_functions=2, sysfs=one_function) == GB200_NIC_LAYOUTS[2]
    mapping = get_gb200_static_mapping(bf3_functions=1)
    mapping[0] = "changed"
    assert GB200_NIC_LAYOUTS[1][0] == "mlx5_0"  # callers get a copy
    with pytest.raises(ValueError, match="bf3_functions"):
        get_gb200_static_mapping(bf3_functions=3)
