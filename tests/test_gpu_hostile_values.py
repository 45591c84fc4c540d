"""Hostile values from NVML (issue 28, items 3 and 5): nothing NVML cannot vouch for passes.

A GPU that answers none of its core readings is an ERROR of ``gpu.nvml``, and the health
verdict ``serve`` gives reads that same finding (one rule, :func:`checks.common.unreadable_core`).
Impossible readings (a temperature or threshold outside the sanity range, 0 bytes of memory,
0 W power limits, two GPUs with one PCI bus id or serial) are ERRORs naming the reading, and
a hot GPU FAILs at the absolute limit whatever NVML's thresholds say. Boundary tables in the
style of ``test_gpu_checks.test_thermal_boundary``; end to end through the real pynvml and
the stub libnvidia-ml.so.1.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from gpu_preflight.config import Config, build_config, find_profile
from gpu_preflight.config.profiles import shipped_profiles
from gpu_preflight.findings.health import HealthState
from gpu_preflight.findings.health import judge as judge_health
from gpu_preflight.model import NA, CheckResult, NodeReport, Status

from .nvml_stub.stub import stub_env, write_stub_data
from .test_gpu_checks import ERROR, FAIL, PASS, SKIP, WARN, edited, facts, judge, outcome

__all__ = ["facts"]  # the GPU record fixture of the H200 dump, shared with test_gpu_checks

GIB = 2**30
NOT_SUPPORTED = {"error": "NVMLError_NotSupported", "value": 3, "str": "Not Supported"}
H200 = build_config(profile=find_profile("h200"))[0]


def with_gpu(**changes: Any) -> Config:
    return Config(gpu=replace(Config().gpu, **changes))


# --------------------------------------------------------------------------- item 3: core readings


def test_a_gpu_without_core_readings_is_an_error(facts: Any) -> None:
    gone = {attr: NA("not supported") for attr in ("name", "uuid", "memory_total_bytes", "temperature_c")}
    findings = judge("gpu.nvml", edited(facts, **gone))
    assert outcome(findings) == [(ERROR, "gpu_unreadable")]
    assert findings[0].subject == "n1/gpu0" and "name, UUID, memory total, temperature" in findings[0].summary
    assert findings[0].recommendation


@pytest.mark.parametrize("kept", ["name", "uuid", "memory_total_bytes", "temperature_c"])
def test_one_core_reading_is_enough_to_judge_the_gpu(facts: Any, kept: str) -> None:
    gone = {a: NA("not supported") for a in ("name", "uuid", "memory_total_bytes", "temperature_c") if a != kept}
    assert outcome(judge("gpu.nvml", edited(facts, **gone))) == [(PASS, "ok")]


def test_serve_reads_the_same_finding_as_unknown_health(facts: Any) -> None:
    """The health verdict takes gpu.nvml's ERROR as it stands: one rule for run and serve."""
    gone = {a: NA("not supported") for a in ("name", "uuid", "memory_total_bytes", "temperature_c")}
    ctx_findings = judge("gpu.nvml", edited(facts, **gone))
    recovery_ok = judge("gpu.recovery_action", facts)
    assert [f.status for f in recovery_ok] == [PASS]  # the recovery action alone would say healthy
    report = NodeReport("n1", "2026-01-01T00:00:00Z", [CheckResult("gpu.nvml", "", ctx_findings, 0.0),
                                                         CheckResult("gpu.recovery_action", "", recovery_ok, 0.0)])
    health = judge_health(report)
    assert health.state is HealthState.UNKNOWN and "none of its core readings" in health.reason
    assert not health.ok()


# --------------------------------------------------------------------------- item 5: temperatures
# The H200 record reports slowdown 89 C, GPU max operating 87 C; the defaults' absolute limit is 105 C,
# the h200 profile's 95 C (its recorded shutdown temperature); sanity range 50-150 C.


@pytest.mark.parametrize(("temp", "slowdown", "config", "expected"), [
    (94, NA("not supported"), H200, [(WARN, "temp_high")]),           # GPU max operating (87) still WARNs
    (95, NA("not supported"), H200, [(FAIL, "temp_limit")]),          # the profile's absolute limit
    (120, NA("not supported"), H200, [(FAIL, "temp_limit")]),
    (104, NA("not supported"), Config(), [(PASS, "ok")]),             # no threshold of NVML's to WARN at
    (105, NA("not supported"), Config(), [(FAIL, "temp_limit")]),     # the defaults' absolute limit
    (120, 1000, H200, [(ERROR, "impossible_reading"), (FAIL, "temp_limit")]),  # absurd threshold
    (120, 0, H200, [(ERROR, "impossible_reading"), (FAIL, "temp_limit")]),
    (80, 49, Config(), [(ERROR, "impossible_reading"), (PASS, "ok")]),  # below the sanity range
    (80, 50, Config(), [(FAIL, "temp_slowdown")]),                    # inside: judged against
    (149, 150, Config(), [(FAIL, "temp_limit")]),
    (80, 151, Config(), [(ERROR, "impossible_reading"), (PASS, "ok")]),
    (150, 89, Config(), [(FAIL, "temp_slowdown")]),                   # the highest possible reading
    (151, 89, Config(), [(ERROR, "impossible_reading")]),             # above it: a broken sensor
    (96, 100, H200, [(FAIL, "temp_limit")]),                          # absolute even below NVML's slowdown
])
def test_absolute_and_sanity_limits_of_temperature(facts: Any, temp: int, slowdown: Any, config: Config,
                                                    expected: list[tuple[Status, str]]) -> None:
    findings = judge("gpu.thermal", edited(facts, temperature_c=temp, temp_slowdown_c=slowdown,
                                           temp_gpu_max_c=87 if temp < 96 else NA("not supported")), config)
    assert outcome(findings) == expected
    assert all(f.recommendation for f in findings if f.status is not PASS)
    errors = [f for f in findings if f.status is ERROR]
    assert all(("threshold" in f.summary or "temperature" in f.summary) and "impossible" in f.summary
               for f in errors)


@pytest.mark.parametrize(("mem", "mem_max", "extra"), [
    (150, 95, [(FAIL, "memory_temp_limit")]),
    (151, 95, [(ERROR, "impossible_reading")]),
    (60, 151, [(ERROR, "impossible_reading")]),
    (60, 49, [(ERROR, "impossible_reading")]),
    (60, 95, []),
])
def test_hbm_temperature_sanity(facts: Any, mem: int, mem_max: int, extra: list[tuple[Status, str]]) -> None:
    findings = judge("gpu.thermal", edited(facts, memory_temperature_c=mem, temp_memory_max_c=mem_max))
    assert outcome(findings) == [(PASS, "ok"), *extra]


# --------------------------------------------------------------------------- item 5: memory, power


@pytest.mark.parametrize(("total", "config", "expected"), [
    (0, Config(), ERROR),
    (GIB // 4 - 1, Config(), ERROR),
    (GIB // 4, Config(), PASS),
    (1024 * GIB, Config(), PASS),
    (1024 * GIB + 1, Config(), ERROR),
    (130 * GIB - 1, H200, ERROR),
    (130 * GIB, H200, PASS),
    (150 * GIB, H200, PASS),
    (150 * GIB + 1, H200, ERROR),
])
def test_memory_total_sanity(facts: Any, total: int, config: Config, expected: Status) -> None:
    findings = judge("gpu.inventory.identity", edited(facts, memory_total_bytes=total), config)
    assert [f.status for f in findings] == [expected]
    if expected is ERROR:
        assert findings[0].code == "impossible_reading" and "memory total" in findings[0].summary


@pytest.mark.parametrize(("limit", "default", "config", "expected"), [
    (0.0, 0.0, Config(), [(ERROR, "impossible_reading"), (ERROR, "impossible_reading")]),
    (0.0, 700.0, Config(), [(ERROR, "impossible_reading")]),
    (4.99, 4.99, Config(), [(ERROR, "impossible_reading"), (ERROR, "impossible_reading")]),
    (5.0, 5.0, Config(), [(PASS, "ok")]),
    (3000.0, 3000.0, Config(), [(PASS, "ok")]),
    (700.0, 3000.5, Config(), [(ERROR, "impossible_reading")]),
    (99.0, 700.0, H200, [(ERROR, "impossible_reading")]),
    (100.0, 700.0, H200, [(WARN, "power_capped")]),
    (700.0, 1000.0, H200, [(WARN, "power_capped")]),
    (700.0, 1001.0, H200, [(ERROR, "impossible_reading")]),
    (0.0, NA("not supported"), Config(), [(ERROR, "impossible_reading")]),  # impossible beats unread
    (700.0, NA("not supported"), Config(), [(SKIP, "not_available")]),
])
def test_power_limit_sanity(facts: Any, limit: float, default: Any, config: Config,
                            expected: list[tuple[Status, str]]) -> None:
    findings = judge("gpu.power", edited(facts, power_limit_w=limit, power_default_limit_w=default), config)
    assert outcome(findings) == expected
    assert all("power limit" in f.summary for f in findings if f.status is ERROR)


# --------------------------------------------------------------------------- item 5: duplicated identity


def pair(facts: Any, **second: Any) -> Any:
    base = {"index": 1, "uuid": "GPU-2", "serial": "2", "pci_bus_id": "00000000:00:07.0"}
    second_gpu = replace(facts.gpus[0], **{**base, **second})
    return replace(facts, gpus=[facts.gpus[0], second_gpu])


@pytest.mark.parametrize(("second", "expected", "what"), [
    ({}, [PASS, PASS], None),
    ({"pci_bus_id": "00000000:00:06.0"}, [ERROR, ERROR], "PCI bus id"),
    ({"pci_bus_id": "00000000:00:06.0".lower()}, [ERROR, ERROR], "PCI bus id"),
    ({"serial": "1654024074435"}, [ERROR, ERROR], "serial"),
])
def test_duplicate_identifiers_are_errors(facts: Any, second: dict[str, Any], expected: list[Status],
                                          what: str | None) -> None:
    findings = judge("gpu.inventory.identity", pair(facts, **second))
    assert [f.status for f in findings] == expected
    if what:
        assert [f.subject for f in findings] == ["n1/gpu0", "n1/gpu1"]
        assert all(what in f.summary and f.code == "impossible_reading" for f in findings)
        assert "gpu1" in findings[0].summary and "gpu0" in findings[1].summary


def test_placeholder_serials_are_not_duplicates(facts: Any) -> None:
    twins = replace(facts, gpus=[replace(facts.gpus[0], serial="0000000000000"),
                                 replace(facts.gpus[0], index=1, uuid="GPU-2", serial="0000000000000",
                                         pci_bus_id="00000000:00:07.0")])
    assert [f.status for f in judge("gpu.inventory.identity", twins)] == [PASS, PASS]


# --------------------------------------------------------------------------- profiles


def test_every_profile_has_sanity_limits_that_its_recording_passes() -> None:
    for profile in shipped_profiles():
        gpu = build_config(profile=profile)[0].gpu
        assert 0 < gpu.temp_limit_c <= gpu.temp_sane_max_c, profile.name
        assert gpu.temp_sane_min_c < gpu.temp_sane_max_c, profile.name
        assert 0 < gpu.memory_total_min_gib < gpu.memory_total_max_gib, profile.name
        assert 0 < gpu.power_limit_min_w < gpu.power_limit_max_w, profile.name
    h200 = H200.gpu
    assert (h200.temp_limit_c, h200.memory_total_min_gib, h200.power_limit_min_w) == (95, 130, 100)


# --------------------------------------------------------------------------- end to end: pynvml + the stub


def stub_run(lib: Path, tmp_path: Path, dump: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    data = tmp_path / "nvml.txt"
    write_stub_data(dump, data)
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_")}
    history = ("--no-history",) if args[0] == "run" else ()
    return subprocess.run([sys.executable, "-m", "gpu_preflight", *args, *history],
                          env=stub_env(lib, data, **base), capture_output=True, text=True, timeout=120)


def eight_silent_gpus(dump: dict[str, Any], keep: tuple[str, ...] = ()) -> dict[str, Any]:
    """Eight GPUs that answer NOT_SUPPORTED to every reading (but ``keep``), the driver version too."""
    silent = copy.deepcopy(dump)
    device = dump["devices"][0]
    silent["devices"] = [{"nvmlDeviceGetIndex": {"ok": i}, **{k: device[k] for k in keep}} for i in range(8)]
    silent["system"] = {k: NOT_SUPPORTED for k in ("nvmlSystemGetDriverVersion", "nvmlSystemGetNVMLVersion",
                                                   "nvmlSystemGetCudaDriverVersion")}
    return silent


def statuses(report: dict[str, Any], check_id: str) -> list[tuple[str, str]]:
    return [(f["status"], f["code"]) for f in report["findings"] if f["check_id"] == check_id]


def test_every_reading_not_supported_is_not_a_pass(stub_lib: Path, tmp_path: Path,
                                                   h200_dump: dict[str, Any]) -> None:
    out = stub_run(stub_lib, tmp_path, eight_silent_gpus(h200_dump), "run", "--check", "gpu.*", "--skip",
                   "gpu.xid", "--expect-gpus", "8", "--profile", "h200", "--format", "json")
    assert out.returncode == 3, out.stderr
    assert statuses(json.loads(out.stdout), "gpu.nvml") == [("ERROR", "gpu_unreadable")] * 8
    assert "Traceback" not in out.stderr


def test_serve_says_not_ready_for_the_same_gpus_even_with_a_recovery_action(
        stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    """The recovery action (a field value) answers NONE; before, serve's GPU health then said healthy."""
    dump = eight_silent_gpus(h200_dump, keep=("field_values",))
    out = stub_run(stub_lib, tmp_path, dump, "serve", "--once", "--profile", "h200", "--set",
                   "gpu.expected_count=8")
    assert out.returncode == 2, out.stderr
    status = json.loads(out.stdout)
    assert status["gpu_health"]["status"] == "unknown"
    assert all("none of its core readings" in g["reason"] for g in status["gpu_health"]["gpus"])


def test_hostile_values_through_pynvml(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    dump = copy.deepcopy(h200_dump)
    hot = dump["devices"][0]
    hot["nvmlDeviceGetTemperature"] = {"ok": 120}
    hot["temp_thresholds"] = {k: NOT_SUPPORTED for k in hot["temp_thresholds"]}
    hot["nvmlDeviceGetMemoryInfo"] = {"ok": {"total": 0, "free": 0, "used": 0}}
    for key in ("nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementLimit",
                "nvmlDeviceGetPowerManagementDefaultLimit"):
        hot[key] = {"ok": 0}
    twin = copy.deepcopy(hot)  # another GPU on the same bus id with the same serial
    twin["nvmlDeviceGetIndex"] = {"ok": 1}
    twin["nvmlDeviceGetUUID"] = {"ok": "GPU-00000000-0000-0000-0000-000000000001"}
    dump["devices"].append(twin)
    out = stub_run(stub_lib, tmp_path, dump, "run", "--check", "gpu.*", "--skip", "gpu.xid", "--profile", "h200",
                   "--format", "json")
    report = json.loads(out.stdout)
    gpu0 = {(f["check_id"], f["status"], f["code"]) for f in report["findings"] if f["subject"].endswith("/gpu0")}
    assert ("gpu.thermal", "FAIL", "temp_limit") in gpu0
    assert ("gpu.power", "ERROR", "impossible_reading") in gpu0
    identity = [f["summary"] for f in report["findings"]
                if f["check_id"] == "gpu.inventory.identity" and f["subject"].endswith("/gpu0")]
    assert any("memory total 0 GiB" in s for s in identity)
    assert any("PCI bus id 00000000:00:06.0" in s for s in identity)
    assert any("serial 1654024074435" in s for s in identity)
    assert not any(f["status"] == "PASS" for f in report["findings"]
                   if f["check_id"] in ("gpu.thermal", "gpu.power", "gpu.inventory.identity"))
    assert out.returncode == 2  # FAIL (the hot GPU) and ERRORs: the FAIL decides the exit code
