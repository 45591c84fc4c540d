"""A monitor's NVML session (backends/nvml_session.py): same dump, settings every N ticks, faults every tick.

Real pynvml against the stub ``libnvidia-ml.so.1`` (the recorded H200 widened to 8 GPUs) in a
child process, each NVML call counted through a pass-through wrapper. ``seq`` records make
answers change from one call to the next inside one session (an ECC mode switched off, a
temperature climbing to 91 °C, a recovery action raised), as on a live GPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.backends.nvml_session import PLAN, SETTING_CALLS, MonitorSession
from gpu_preflight.probes.gpu import facts_from_dump

from .nvml_stub.gpus import widen
from .nvml_stub.stub import stub_env, write_stub_data

SCRIPT = """
import json, sys, pynvml
from gpu_preflight.backends.nvml import NvmlSession, collect
from gpu_preflight.backends.nvml_session import MonitorSession

EVERY, TICKS, FRESH = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"


class Counting:
    def __init__(self):
        self.calls = {}

    def __getattr__(self, name):
        real = getattr(pynvml, name)
        if not (callable(real) and name.startswith("nvml")):
            return real

        def call(*args):
            self.calls[name] = self.calls.get(name, 0) + 1
            return real(*args)
        return call


def plain(dump):
    return {k: v for k, v in dump.items() if k != "init_s"}


fresh = plain(collect(device_timeout_s=30, call_timeout_s=5)) if FRESH else None
nvml, session = Counting(), MonitorSession(settings_every=EVERY)
ticks = []
for tick in range(TICKS):
    nvml.calls = {}
    dump = plain(collect(device_timeout_s=30, nvml=nvml, call_timeout_s=5, session=session))
    ticks.append({"calls": nvml.calls, "dump": dump})
session.close()
print(json.dumps({"ticks": ticks, "fresh": fresh}))
"""


def run(stub_lib: Path, tmp_path: Path, dump: dict[str, Any], every: int, ticks: int, fresh: bool = False,
        series: dict[tuple[int, str], list[Any]] | None = None) -> Any:
    data = tmp_path / "nvml.txt"
    write_stub_data(dump, data, series=series)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(every), str(ticks), "1" if fresh else "0"],
                          env=stub_env(stub_lib, data), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_every_tick_gives_the_dump_a_fresh_read_gives(stub_lib: Path, tmp_path: Path,
                                                       h200_dump: dict[str, Any]) -> None:
    out = run(stub_lib, tmp_path, widen(h200_dump), every=3, ticks=4, fresh=True)
    for tick in out["ticks"]:
        assert tick["dump"] == out["fresh"]
        for got, want in zip(tick["dump"]["devices"], out["fresh"]["devices"], strict=True):
            assert list(got) == list(want)  # same keys in the same order: a saved dump reads alike


def test_settings_are_read_every_n_ticks_and_a_change_seen_at_the_next_read(
        stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    series: dict[tuple[int, str], list[Any]] = {(0, "nvmlDeviceGetEccMode"): [(1, 1), (0, 0)]}
    out = run(stub_lib, tmp_path, widen(h200_dump), every=3, ticks=5, series=series)
    ticks = out["ticks"]
    for call in SETTING_CALLS:
        assert [t["calls"].get(call, 0) for t in ticks] == [8, 0, 0, 8, 0], call
    assert [t["calls"]["nvmlDeviceGetTemperature"] for t in ticks] == [8] * 5
    assert [t["calls"]["nvmlDeviceGetRemappedRows"] for t in ticks] == [8] * 5
    modes = [t["dump"]["devices"][0]["nvmlDeviceGetEccMode"]["ok"] for t in ticks]
    assert modes == [[1, 1]] * 3 + [[0, 0]] * 2  # reused until the third tick's read
    assert all(t["dump"]["devices"][1]["nvmlDeviceGetEccMode"]["ok"] == [1, 1] for t in ticks)


def test_faults_are_seen_at_the_tick_they_appear(stub_lib: Path, tmp_path: Path,
                                                 h200_dump: dict[str, Any]) -> None:
    series: dict[tuple[int, str], list[Any]] = {
        (1, "nvmlDeviceGetTemperature/0"): [40, 91],
        (2, "field/230"): [(1, 0), (1, 1)],  # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: GPU_RESET
        (3, "nvmlDeviceGetRemappedRows"): [(0, 0, 0, 0), (0, 1, 1, 0)],
        (4, "nvmlDeviceGetCurrPcieLinkWidth"): [16, 8],
    }
    out = run(stub_lib, tmp_path, widen(h200_dump), every=10, ticks=2, series=series)
    before, after = (facts_from_dump(t["dump"], "live").gpus for t in out["ticks"])
    assert (before[1].temperature_c, after[1].temperature_c) == (40, 91)
    assert (before[2].recovery_action, after[2].recovery_action) == (0, 1)
    assert (before[3].remap_pending, after[3].remap_pending) == (False, True)
    assert (before[4].pcie_width_current, after[4].pcie_width_current) == (16, 8)


def test_the_plan_reads_every_setting() -> None:
    assert SETTING_CALLS.issubset({key for group, _, key, _, _ in PLAN if group is None})
    with pytest.raises(ValueError, match="at least 1"):
        MonitorSession(settings_every=0)
