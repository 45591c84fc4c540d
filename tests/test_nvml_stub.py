"""The collector driven through the REAL pynvml by a gcc-built fake ``libnvidia-ml.so.1``.

Why: ``collect()`` is the only code that talks to NVML, and its failure modes (wrong
symbol versions, struct conversions, NVMLError classes, lost or hanging GPUs) cannot be
reached with a mocked pynvml. Each test writes a data file for the stub, runs
``collect()`` in a fresh interpreter (pynvml loads the library once, from
``LD_LIBRARY_PATH``) and compares the dump it prints with what the stub was given.
"""

from __future__ import annotations

import copy
import importlib
import json
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from .nvml_stub.stub import (
    CLOCK_TYPES,
    ECC_COUNTERS,
    MEMORY_LOCATIONS,
    RETIRED_PAGE_CAUSES,
    StubBuildError,
    build_stub,
    stub_env,
    write_stub_data,
)

SRC = Path(__file__).resolve().parents[1] / "src"

NOT_SUPPORTED = {"error": "NVMLError_NotSupported", "value": 3, "str": "Not Supported"}
# pynvml builds the class name with string.capwords: NVML_ERROR_GPU_IS_LOST -> NVMLError_GpuIsLost.
GPU_IS_LOST = {"error": "NVMLError_GpuIsLost", "value": 15, "str": "GPU is lost"}
FIELD_NOT_SUPPORTED = {"nvmlReturn": 3}

COLLECT_SCRIPT = """
import json, sys
from gpu_preflight.backends.nvml import NvmlUnavailable, collect
try:
    out = collect(device_timeout_s=float(sys.argv[1]))
except NvmlUnavailable as exc:
    out = {"unavailable": {"type": type(exc).__name__, "name": exc.name, "value": exc.value,
                           "message": exc.message}}
print(json.dumps(out))
"""


def run_python(lib: Path, data: Path, script: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter that loads the stub with ``data``."""
    environment = stub_env(lib, data, PYTHONPATH=str(SRC), **env)
    proc = subprocess.run([sys.executable, "-c", script, *args], env=environment, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, f"rc {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def run_collect(lib: Path, tmp_path: Path, dump: Mapping[str, Any], *, timeout_s: float = 10.0,
                init_rc: int = 0, lost_devices: Iterable[int] = (), lost_at_handle: bool = True,
                **env: str) -> dict[str, Any]:
    """``collect()`` against ``dump`` replayed by the stub; returns the dump it produced."""
    data = tmp_path / "nvml.txt"
    write_stub_data(dump, data, init_rc=init_rc, lost_devices=lost_devices, lost_at_handle=lost_at_handle)
    proc = run_python(lib, data, COLLECT_SCRIPT, str(timeout_s), **env)
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def call_leaves(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    """Every recorded call in a device dump: (path, {"ok"|"error"|"exc"...} or field value)."""
    if not isinstance(node, dict):
        return
    if any(k in node for k in ("ok", "error", "exc", "nvmlReturn", "valueType")):
        yield path, node
        return
    for key, value in node.items():
        yield from call_leaves(value, (*path, key))


def compare_device(expected_dump: Mapping[str, Any], collected: Mapping[str, Any]) -> tuple[list[str], int]:
    """Check every call the collector made against the dump the stub replayed.

    A call the dump never recorded (or recorded as a Python exception of the capture
    script) must come back NOT_SUPPORTED, the stub's answer for unknown calls. Returns
    the mismatches and how many successful readings matched.
    """
    want = dict(call_leaves(expected_dump))
    mismatches: list[str] = []
    matched_ok = 0
    for path, got in call_leaves(collected):
        expected = want.get(path)
        if expected is None or "exc" in expected:
            expected = FIELD_NOT_SUPPORTED if path[0] == "field_values" else NOT_SUPPORTED
        if got != expected:
            mismatches.append(f"{'/'.join(path)}: collected {got}, expected {expected}")
        elif "ok" in expected or "valueType" in expected:
            matched_ok += 1
    return mismatches, matched_ok


def add_second_gpu(dump: dict[str, Any]) -> dict[str, Any]:
    """Append a copy of GPU 0 with its own identity; returns the new device dump.

    The module id stays equal to GPU 0's: with different ids these tests would flake on
    the collector's module-id race, which test_module_id_is_read_per_gpu pins down.
    """
    gpu: dict[str, Any] = copy.deepcopy(dump["devices"][0])
    gpu["nvmlDeviceGetUUID"] = {"ok": "GPU-00000000-1111-2222-3333-444444444444"}
    gpu["nvmlDeviceGetIndex"] = {"ok": 1}
    gpu["nvmlDeviceGetMinorNumber"] = {"ok": 1}
    dump["devices"].append(gpu)
    return gpu


def test_h200_dump_round_trips(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    out = run_collect(stub_lib, tmp_path, h200_dump)

    assert out["system"] == {
        "nvmlSystemGetDriverVersion": {"ok": "580.159.04"},
        "nvmlSystemGetNVMLVersion": {"ok": "13.580.159.04"},
        "nvmlSystemGetCudaDriverVersion": {"ok": 13000},
        "nvmlDeviceGetCount": {"ok": 1},
    }
    assert len(out["devices"]) == 1
    device = out["devices"][0]
    mismatches, matched_ok = compare_device(h200_dump["devices"][0], device)
    assert mismatches == []
    # The H200 dump holds 77 successful readings the collector asks for; far fewer
    # would mean whole groups silently fell back to NOT_SUPPORTED on both sides.
    assert matched_ok >= 70, matched_ok
    # Spot checks of each conversion path (strings, structs, u64, signed, double).
    assert device["nvmlDeviceGetName"] == {"ok": "NVIDIA H200"}
    assert device["nvmlDeviceGetPciInfo_v3"]["ok"]["busId"] == "00000000:00:06.0"
    assert device["nvmlDeviceGetMemoryInfo"]["ok"]["total"] == 150754820096
    assert device["nvmlDeviceGetRetiredPagesPendingStatus"] == NOT_SUPPORTED
    fields = device["field_values"]
    assert fields["NVML_FI_DEV_GET_GPU_RECOVERY_ACTION"] == {"id": 230, "valueType": 1, "value": 0}
    assert fields["NVML_FI_DEV_PCIE_COUNT_CORRECTABLE_ERRORS"] == {"id": 173, "valueType": 1, "value": 0}
    assert fields["NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT"] == {"id": 193, "valueType": 5, "value": -8}
    assert fields["NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT"] == {"id": 147, "valueType": 0, "value": 0.0}
    assert fields["NVML_FI_DEV_RETIRED_SBE"] == FIELD_NOT_SUPPORTED
    # Absent from the capture: the stub answers NOT_SUPPORTED.
    assert device["memory_errors"]["dram"]["aggregate_uncorrected"] == NOT_SUPPORTED
    assert device["nvlink"] == {"0": NOT_SUPPORTED}


def test_two_gpus_give_two_devices(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    second = add_second_gpu(h200_dump)
    out = run_collect(stub_lib, tmp_path, h200_dump)

    assert out["system"]["nvmlDeviceGetCount"] == {"ok": 2}
    assert [d["nvmlDeviceGetUUID"]["ok"] for d in out["devices"]] == [
        "GPU-86f25c50-ec49-958f-cd74-c318937a339c", "GPU-00000000-1111-2222-3333-444444444444"]
    assert [d["nvmlDeviceGetIndex"]["ok"] for d in out["devices"]] == [0, 1]
    for expected, device in zip((h200_dump["devices"][0], second), out["devices"], strict=True):
        assert compare_device(expected, device)[0] == []


def test_injected_faults_come_back(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    dev = h200_dump["devices"][0]
    dev["nvmlDeviceGetName"] = {"ok": "NVIDIA H200 #1 100% (test)"}  # blanks, '#', '%' survive encoding
    dev["nvmlDeviceGetTemperature"] = {"ok": 95}
    dev["nvmlDeviceGetRemappedRows"] = {"ok": [0, 2, 1, 0]}
    dev["nvmlDeviceGetMigMode"] = {"ok": [1, 0]}
    dev["nvmlDeviceGetNumaNodeId"] = {"ok": 1}
    dev["nvmlDeviceGetCurrentClocksEventReasons"] = {"ok": 0x40 | 0x8 | (1 << 40)}  # needs all 64 bits
    dev["nvmlDeviceGetPowerUsage"] = {"error": "NVMLError_Unknown", "value": 999, "str": "Unknown Error"}
    dev["nvmlDeviceGetComputeRunningProcesses"] = {"ok": [
        {"pid": 4242, "usedGpuMemory": 8 << 30, "gpuInstanceId": 2**32 - 1, "computeInstanceId": 2**32 - 1},
        {"pid": 7, "usedGpuMemory": None, "gpuInstanceId": 1, "computeInstanceId": 0},
    ]}
    dev["clocks_current"]["SM"] = {"ok": 1980}
    dev["temp_thresholds"]["0"] = {"ok": 90}
    dev["ecc_total"]["aggregate_uncorrected"] = {"ok": 3}
    dev["memory_errors"] = {
        "dram": {"aggregate_corrected": {"ok": 12}, "aggregate_uncorrected": {"ok": 3}},
        "sram": {"aggregate_corrected": {"ok": 1}, "aggregate_uncorrected": NOT_SUPPORTED},
    }
    dev["retired_pages"] = {"sbe": {"ok": []}, "dbe": {"ok": [0x1000, 0x7FFF_0000_2000]}}
    remote = {"busIdLegacy": "0000:07:00.0", "domain": 0, "bus": 7, "device": 0,
              "pciDeviceId": 0x22A310DE, "pciSubSystemId": 0, "busId": "00000000:07:00.0"}
    dev["nvlink"] = {
        "0": {"state": {"ok": 1}, "version": {"ok": 4}, "remote_pci": {"ok": remote},
              "errors": {"0": {"ok": 0}, "1": {"ok": 5}, "2": {"ok": 2**33}, "3": {"ok": 0}, "4": NOT_SUPPORTED}},
        "1": {"state": {"ok": 0}, "version": {"ok": 4}, "remote_pci": NOT_SUPPORTED,
              "errors": {str(c): {"ok": c} for c in range(5)}},
        "2": NOT_SUPPORTED,
    }
    fields = dev["field_values"]
    fields["NVML_FI_DEV_GET_GPU_RECOVERY_ACTION"]["value"] = 1
    fields["NVML_FI_DEV_PCIE_COUNT_FATAL_ERROR"]["value"] = 2
    fields["NVML_FI_DEV_ECC_DBE_VOL_TOTAL"]["value"] = 2**40 + 7
    fields["NVML_FI_DEV_NVLINK_LINK_COUNT"] = {"nvmlReturn": 2}  # entry without an id

    out = run_collect(stub_lib, tmp_path, h200_dump)
    device = out["devices"][0]

    assert compare_device(dev, device)[0] == []
    assert device["nvmlDeviceGetName"] == {"ok": "NVIDIA H200 #1 100% (test)"}
    assert device["nvmlDeviceGetTemperature"] == {"ok": 95}
    assert device["nvmlDeviceGetRemappedRows"] == {"ok": [0, 2, 1, 0]}
    assert device["nvmlDeviceGetPowerUsage"] == {"error": "NVMLError_Unknown", "value": 999, "str": "Unknown Error"}
    assert device["nvmlDeviceGetComputeRunningProcesses"]["ok"][1]["usedGpuMemory"] is None
    assert device["retired_pages"]["dbe"] == {"ok": [0x1000, 0x7FFF_0000_2000]}
    assert device["nvlink"]["0"]["remote_pci"] == {"ok": remote}
    assert list(device["nvlink"]) == ["0", "1", "2"]  # reading stops at the first unknown link
    assert device["field_values"]["NVML_FI_DEV_GET_GPU_RECOVERY_ACTION"] == {"id": 230, "valueType": 1, "value": 1}
    assert device["field_values"]["NVML_FI_DEV_ECC_DBE_VOL_TOTAL"]["value"] == 2**40 + 7
    assert device["field_values"]["NVML_FI_DEV_NVLINK_LINK_COUNT"] == {"nvmlReturn": 2}


def test_driver_not_loaded_raises_nvml_unavailable(stub_lib: Path, tmp_path: Path,
                                                   h200_dump: dict[str, Any]) -> None:
    out = run_collect(stub_lib, tmp_path, h200_dump, init_rc=9)

    assert out == {"unavailable": {"type": "NvmlUnavailable", "name": "NVMLError_DriverNotLoaded", "value": 9,
                                   "message": "Driver Not Loaded"}}


def test_gpu_lost_at_handle(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    second = add_second_gpu(h200_dump)
    out = run_collect(stub_lib, tmp_path, h200_dump, lost_devices=[0])

    assert out["devices"][0] == {"handle": GPU_IS_LOST}
    assert compare_device(second, out["devices"][1])[0] == []
    assert out["devices"][1]["nvmlDeviceGetUUID"] == second["nvmlDeviceGetUUID"]


def test_gpu_lost_after_handle(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    second = add_second_gpu(h200_dump)
    out = run_collect(stub_lib, tmp_path, h200_dump, lost_devices=[0], lost_at_handle=False)

    lost = dict(call_leaves(out["devices"][0]))
    assert len(lost) > 50, sorted(lost)  # every call of the device, not a few
    assert {json.dumps(v, sort_keys=True) for v in lost.values()} == {json.dumps(GPU_IS_LOST, sort_keys=True)}
    assert out["devices"][0]["nvlink"] == {"0": GPU_IS_LOST}
    assert compare_device(second, out["devices"][1])[0] == []


@pytest.mark.parametrize(("hang", "call"), [
    ("nvmlDeviceGetTemperature", "nvmlDeviceGetTemperature"),
    ("nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByIndex"),  # matches the _v2 symbol
])
def test_hung_gpu_times_out_and_others_are_read(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any],
                                                hang: str, call: str) -> None:
    second = add_second_gpu(h200_dump)
    start = time.monotonic()
    out = run_collect(stub_lib, tmp_path, h200_dump, timeout_s=2, FAKE_NVML_HANG=f"0:{hang}")
    elapsed = time.monotonic() - start

    assert elapsed < 15, elapsed  # the stub sleeps 600 s: collect() must not wait for it
    hung = out["devices"][0]
    assert hung["timed_out"] == {"call": call, "after_s": 2.0}
    assert "field_values" not in hung
    if call == "nvmlDeviceGetTemperature":  # what was read before the hang is kept
        assert hung["nvmlDeviceGetName"] == {"ok": "NVIDIA H200"}
        assert "nvmlDeviceGetPowerUsage" not in hung
    else:
        assert set(hung) == {"timed_out"}
    assert "timed_out" not in out["devices"][1]
    assert compare_device(second, out["devices"][1])[0] == []


def test_module_id_is_read_per_gpu(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    """GPUs are read in parallel threads, so no output buffer may be shared between them.

    GPU 0 writes its id (8) into the buffer and returns 2 s later; meanwhile GPU 1,
    held back 0.5 s, writes 7. A shared buffer makes GPU 0 report 7.
    """
    second = add_second_gpu(h200_dump)
    second["nvmlDeviceGetModuleId"] = {"ok": 7}
    out = run_collect(stub_lib, tmp_path, h200_dump, FAKE_NVML_SLOW="0:nvmlDeviceGetModuleId:2",
                      FAKE_NVML_HANG="1:nvmlDeviceGetModuleId:0.5")

    assert [d["nvmlDeviceGetModuleId"] for d in out["devices"]] == [{"ok": 8}, {"ok": 7}]


ERROR_STRING_SCRIPT = """
import json, sys, pynvml
pynvml.nvmlInit()
print(json.dumps({c: pynvml.nvmlErrorString(c) for c in map(int, sys.argv[1:])}))
"""


def test_error_strings_match_nvml(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    """pynvml's table mirrors libnvidia-ml's strings; NVMLError.__str__ falls back to the library."""
    pynvml = importlib.import_module("pynvml")  # a dependency: its absence must fail, not skip
    table: dict[int, str] = dict(pynvml.NVMLError._errcode_to_string)
    data = tmp_path / "nvml.txt"
    write_stub_data(h200_dump, data)
    proc = run_python(stub_lib, data, ERROR_STRING_SCRIPT, *map(str, sorted(table)))

    got = {int(k): v for k, v in json.loads(proc.stdout).items()}
    assert got == table
    assert got[3] == "Not Supported" and got[15] == "GPU is lost" and got[9] == "Driver Not Loaded"


FORMAT_SCRIPT = """
import json, pynvml
def call(fn, *args):
    try:
        return fn(*args)
    except pynvml.NVMLError as exc:
        return type(exc).__name__
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
print(json.dumps({
    "name": call(pynvml.nvmlDeviceGetName, h),
    "temperature": call(pynvml.nvmlDeviceGetTemperature, h, 0),
    "power": call(pynvml.nvmlDeviceGetPowerUsage, h),
    "handle1": call(pynvml.nvmlDeviceGetHandleByIndex, 1),
    "fields": call(pynvml.nvmlDeviceGetFieldValues, h, [230]),
}))
"""


def test_data_format_rules(stub_lib: Path, tmp_path: Path) -> None:
    """Hand-written data: the last record wins, bad records are reported, not fatal."""
    data = tmp_path / "nvml.txt"
    data.write_text(
        "init 0   # comment\n"
        "sys nvmlDeviceGetCount_v2 0 1\n"
        "this is not a record\n"
        "dev 0 nvmlDeviceGetName 0 First\n"
        "dev 0 nvmlDeviceGetName 0 Second%20GPU\n"
        "dev 0 nvmlDeviceGetTemperature/0 0\n"  # a value is missing
    )
    proc = run_python(stub_lib, data, FORMAT_SCRIPT)

    assert json.loads(proc.stdout) == {
        "name": "Second GPU",
        "temperature": "NVMLError_Unknown",
        "power": "NVMLError_NotSupported",  # no record
        "handle1": "NVMLError_InvalidArgument",  # beyond the device count
        "fields": "NVMLError_NotSupported",  # no field records for the device
    }
    assert "malformed record on line 3" in proc.stderr


def test_stub_enums_match_pynvml() -> None:
    """The writer's enum tables are independent of the collector, so check them against pynvml."""
    pynvml = importlib.import_module("pynvml")  # a dependency: its absence must fail, not skip
    assert CLOCK_TYPES == {"GRAPHICS": pynvml.NVML_CLOCK_GRAPHICS, "SM": pynvml.NVML_CLOCK_SM,
                           "MEM": pynvml.NVML_CLOCK_MEM, "VIDEO": pynvml.NVML_CLOCK_VIDEO}
    corrected, uncorrected = pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    assert {
        "volatile_corrected": (corrected, pynvml.NVML_VOLATILE_ECC),
        "volatile_uncorrected": (uncorrected, pynvml.NVML_VOLATILE_ECC),
        "aggregate_corrected": (corrected, pynvml.NVML_AGGREGATE_ECC),
        "aggregate_uncorrected": (uncorrected, pynvml.NVML_AGGREGATE_ECC),
    } == ECC_COUNTERS
    assert MEMORY_LOCATIONS == {"dram": pynvml.NVML_MEMORY_LOCATION_DRAM, "sram": pynvml.NVML_MEMORY_LOCATION_SRAM}
    assert RETIRED_PAGE_CAUSES == {"sbe": pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
                                   "dbe": pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR}


def test_unknown_group_key_is_rejected(tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    """A misspelt injection must fail loudly instead of silently replaying the original."""
    h200_dump["devices"][0]["clocks_current"]["SHADER"] = {"ok": 1}
    with pytest.raises(ValueError, match="SHADER"):
        write_stub_data(h200_dump, tmp_path / "nvml.txt")


def test_build_error_is_reported(tmp_path: Path) -> None:
    bad = tmp_path / "bad.c"
    bad.write_text("int f(void) { return undeclared; }\n")
    with pytest.raises(StubBuildError, match="undeclared"):
        build_stub(tmp_path / "out", source=bad)


def test_wedged_shutdown_does_not_hang_collect(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    """nvmlShutdown runs under a deadline: a driver stuck there must not hold the run."""
    t0 = time.monotonic()
    out = run_collect(stub_lib, tmp_path, h200_dump, timeout_s=2, FAKE_NVML_HANG="sys:nvmlShutdown:60")
    assert time.monotonic() - t0 < 15
    assert out["devices"][0]["nvmlDeviceGetName"] == {"ok": "NVIDIA H200"}
