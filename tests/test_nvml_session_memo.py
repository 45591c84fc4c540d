"""What an NVML session keeps besides the board's identity: application clocks and NOT_SUPPORTED.

On a real H100 ``nvmlDeviceGetApplicationsClock`` cost ~1 ms a call and a NOT_SUPPORTED answer
160 us (tests/fixtures/captured/h100-run-2026-11-26c/prof.txt), against 3-10 us for most reads.
These tests run real pynvml against the stub ``libnvidia-ml.so.1`` (8 GPUs) in a child process,
counting each NVML call through a pass-through wrapper: the kept answers must give the dump a
fresh read gives, a changed setting must be seen after the session's next init, every other
refusal must be asked again, and a GPU lost mid-session must be found at the next tick.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from gpu_preflight.probes.gpu import facts_from_dump

from .nvml_stub.gpus import widen
from .nvml_stub.stub import stub_env, write_stub_data

SCRIPT = """
import ctypes, json, sys, pynvml
from gpu_preflight.backends.nvml import NvmlSession, collect

LOSE = int(sys.argv[1])  # GPU lost from the second tick on (-1: none)
REWRITE = sys.argv[2]  # data file to put in place after the first tick ('' : none)


class Counting:
    '''pynvml, counting every nvml* call by name; GPU LOSE answers GPU_IS_LOST from tick 1.'''

    def __init__(self):
        self.calls, self.tick, self.lost_handle = {}, 0, None

    def __getattr__(self, name):
        real = getattr(pynvml, name)
        if not (callable(real) and name.startswith("nvml")):
            return real

        def call(*args):
            self.calls[name] = self.calls.get(name, 0) + 1
            if name.startswith("nvmlDeviceGetHandleByIndex") and args[0] == LOSE:
                handle = real(*args)
                self.lost_handle = ctypes.cast(handle, ctypes.c_void_p).value
                return handle
            if (self.tick >= 1 and args and self.lost_handle is not None and not isinstance(args[0], int)
                    and ctypes.cast(args[0], ctypes.c_void_p).value == self.lost_handle):
                raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
            return real(*args)
        return call


def plain(dump):
    return {k: v for k, v in dump.items() if k != "init_s"}


fresh = plain(collect(device_timeout_s=30, call_timeout_s=5))
nvml, session = Counting(), NvmlSession()
ticks = []
for tick in range(4):
    nvml.calls, nvml.tick = {}, tick
    if tick == 2:
        session.close()  # what max_age_s does every 10 minutes
    dump = plain(collect(device_timeout_s=30, nvml=nvml, call_timeout_s=5, session=session))
    ticks.append({"calls": nvml.calls, "same": dump == fresh, "dump": dump, "open": session.is_open,
                  "inits": session.inits})
    if tick == 0 and REWRITE:
        import os
        os.replace(REWRITE, os.environ["FAKE_NVML_DATA"])
session.close()
print(json.dumps({"ticks": ticks, "fresh": fresh}))
"""

NOT_SUPPORTED = {"error": "NVMLError_NotSupported", "value": 3, "str": "Not Supported"}
ASKED_AGAIN = {  # GPU: a refusal that may pass or that names a failure, asked at every tick
    5: {"error": "NVMLError_Unknown", "value": 999, "str": "Unknown Error"},
    6: {"error": "NVMLError_Timeout", "value": 10, "str": "Timeout"},
    7: {"error": "NVMLError_NoPermission", "value": 4, "str": "Insufficient Permissions"},
}


def run(stub_lib: Path, tmp_path: Path, dump: dict[str, Any], lose: int = -1,
        rewrite: dict[str, Any] | None = None) -> Any:
    data = tmp_path / "nvml.txt"
    write_stub_data(dump, data)
    later = ""
    if rewrite is not None:
        write_stub_data(rewrite, tmp_path / "later.txt")
        later = str(tmp_path / "later.txt")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(lose), later], env=stub_env(stub_lib, data),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_application_clocks_are_read_once_per_session_and_a_change_seen_after_init(
        stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    dump = widen(h200_dump)
    assert all("ok" in d["clocks_app"]["SM"] for d in dump["devices"])  # the H200 answers (VIDEO: NOT_SUPPORTED)
    changed = widen(h200_dump)
    changed["devices"][1]["clocks_app"]["SM"] = {"ok": 1005}  # an admin sets GPU 1's application clock
    out = run(stub_lib, tmp_path, dump, rewrite=changed)
    counts = [t["calls"].get("nvmlDeviceGetApplicationsClock", 0) for t in out["ticks"]]
    assert counts == [8 * 4, 0, 8 * 4, 0]  # once per session: at the first tick and after the init
    sm = [t["dump"]["devices"][1]["clocks_app"]["SM"] for t in out["ticks"]]
    assert sm == [dump["devices"][1]["clocks_app"]["SM"]] * 2 + [{"ok": 1005}] * 2
    assert out["ticks"][0]["same"] and out["ticks"][1]["same"]  # the kept answer is the fresh one
    assert [t["calls"].get("nvmlDeviceGetClockInfo", 0) for t in out["ticks"]] == [8 * 4] * 4  # current: every tick


def test_not_supported_is_asked_once_per_session_other_refusals_every_tick(
        stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    dump = widen(h200_dump)
    dump["devices"][4]["nvmlDeviceGetTemperature"] = NOT_SUPPORTED
    dump["devices"][4]["ecc_total"]["volatile_corrected"] = NOT_SUPPORTED
    for gpu, refusal in ASKED_AGAIN.items():
        dump["devices"][gpu]["nvmlDeviceGetTemperature"] = refusal
    out = run(stub_lib, tmp_path, dump)
    ticks = out["ticks"]
    assert all(t["same"] for t in ticks)  # kept or asked, the dump is what a fresh read gives
    assert [t["calls"]["nvmlDeviceGetTemperature"] for t in ticks] == [8, 7, 8, 7]  # GPU 4's NOT_SUPPORTED kept
    assert [t["calls"]["nvmlDeviceGetTotalEccErrors"] for t in ticks] == [32, 31, 32, 31]
    for t in ticks:
        devices = t["dump"]["devices"]
        assert devices[4]["nvmlDeviceGetTemperature"] == NOT_SUPPORTED
        assert {gpu: devices[gpu]["nvmlDeviceGetTemperature"] for gpu in ASKED_AGAIN} == ASKED_AGAIN
    # what the H200 itself does not support (memory error counters, acoustic thresholds, ...): asked once
    unsupported = sum(1 for d in out["fresh"]["devices"] for e in d["memory_errors"].values()
                      for v in e.values() if v.get("value") == 3)
    assert unsupported > 0
    assert [t["calls"].get("nvmlDeviceGetMemoryErrorCounter", 0) for t in ticks] == [32, 32 - unsupported] * 2


def test_a_gpu_lost_mid_session_is_found_at_the_next_tick(
        stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    dump = widen(h200_dump)
    dump["devices"][3]["nvmlDeviceGetTemperature"] = NOT_SUPPORTED  # kept: must not hide the loss
    out = run(stub_lib, tmp_path, dump, lose=3)
    first, lost, *after = out["ticks"]
    assert first["same"] and first["open"]
    assert facts_from_dump(first["dump"], "live").gpus[3].lost is None
    gpu3 = lost["dump"]["devices"][3]
    assert gpu3["nvmlDeviceGetPowerUsage"]["value"] == 15  # asked again, not kept
    assert gpu3["nvmlDeviceGetTemperature"] == NOT_SUPPORTED  # the kept fact, as a fresh read gave it
    assert "GPU is lost" in (facts_from_dump(lost["dump"], "live").gpus[3].lost or "")
    assert not lost["open"]  # the session closed: the next tick starts afresh
    assert [t["inits"] for t in out["ticks"]] == [1, 1, 2, 3]
    for t in after:
        assert t["dump"]["devices"][3]["nvmlDeviceGetTemperature"]["value"] == 15
        assert "GPU is lost" in (facts_from_dump(t["dump"], "live").gpus[3].lost or "")
    assert all(lost["dump"]["devices"][i] == out["fresh"]["devices"][i] for i in range(8) if i != 3)
