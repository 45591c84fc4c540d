"""What a monitor tick reads again and what it keeps: NVML's fixed answers, the process scan.

The NVML tests run real pynvml against the stub ``libnvidia-ml.so.1`` (8 GPUs) in a child
process, counting each NVML function through a pass-through wrapper of the pynvml module:
a kept answer must give the very dump a fresh read gives, every reading that can change
must still be asked at every tick, and a refusal other than NOT_SUPPORTED must never be kept
(NOT_SUPPORTED, application clocks: tests/test_nvml_session_memo.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.backends.process_scan import ProcessScan
from gpu_preflight.config import build_config
from gpu_preflight.model import NA
from gpu_preflight.probes.shared import PROCESS_SCAN
from gpu_preflight.probes.system import system_probe
from gpu_preflight.registry import ProbeContext

from .diag_tools import context_from
from .nvml_stub.gpus import widen
from .nvml_stub.stub import stub_env, write_stub_data

COUNTED = """
import json, sys, pynvml
from gpu_preflight.backends.nvml import NvmlSession, collect


class Counting:
    '''pynvml, counting every nvml* call by name.'''

    def __init__(self):
        self.calls, self.unsupported = {}, {}

    def __getattr__(self, name):
        real = getattr(pynvml, name)
        if not (callable(real) and name.startswith("nvml")):
            return real

        def call(*args):
            self.calls[name] = self.calls.get(name, 0) + 1
            try:
                return real(*args)
            except pynvml.NVMLError as exc:
                if exc.value == pynvml.NVML_ERROR_NOT_SUPPORTED:
                    self.unsupported[name] = self.unsupported.get(name, 0) + 1
                raise
        return call


def plain(dump):
    return {k: v for k, v in dump.items() if k != "init_s"}


fresh = collect(device_timeout_s=30, call_timeout_s=5)
nvml, session = Counting(), NvmlSession()
ticks = []
for _ in range(3):
    nvml.calls, nvml.unsupported = {}, {}
    dump = collect(device_timeout_s=30, nvml=nvml, call_timeout_s=5, session=session)
    ticks.append({"calls": nvml.calls, "unsupported": nvml.unsupported, "same": plain(dump) == plain(fresh),
                  "serial2": dump["devices"][2]["nvmlDeviceGetSerial"]})
kept = {str(k): sorted(v) for k, v in session.static.items()}
session.close()
print(json.dumps({"ticks": ticks, "kept": kept, "after_close": session.static, "inits": session.inits}))
"""

# every reading the node checks judge and that can change from one tick to the next
CHANGING = ("nvmlDeviceGetTemperature", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit",
            "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetCurrentClocksEventReasons",
            "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetMemoryErrorCounter", "nvmlDeviceGetRemappedRows",
            "nvmlDeviceGetRetiredPages", "nvmlDeviceGetRetiredPagesPendingStatus", "nvmlDeviceGetFieldValues",
            "nvmlDeviceGetClockInfo", "nvmlDeviceGetCurrPcieLinkGeneration",
            "nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetPcieReplayCounter", "nvmlDeviceGetPerformanceState",
            "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetPersistenceMode", "nvmlDeviceGetComputeMode",
            "nvmlDeviceGetEccMode", "nvmlDeviceGetMigMode", "nvmlDeviceGetNvLinkState", "nvmlDeviceGetCount")
FIXED = ("nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetVbiosVersion",
         "nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkWidth", "nvmlDeviceGetMaxClockInfo",
         "nvmlSystemGetDriverVersion", "nvmlDeviceGetApplicationsClock")
REFUSED = {"error": "NVMLError_Unknown", "value": 999, "str": "Unknown Error"}


def child(stub_lib: Path, tmp_path: Path, dump: dict[str, Any], script: str, **extra: str) -> Any:
    data = tmp_path / "nvml.txt"
    write_stub_data(dump, data)
    proc = subprocess.run([sys.executable, "-c", script], env=stub_env(stub_lib, data, **extra),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_session_reads_fixed_answers_once_and_everything_else_every_tick(
        stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    dump = widen(h200_dump)
    dump["devices"][2]["nvmlDeviceGetSerial"] = REFUSED  # a refusal is asked again every time, never kept
    out = child(stub_lib, tmp_path, dump, COUNTED)
    first, *later = out["ticks"]
    assert all(t["same"] for t in out["ticks"])  # kept answers give the dump a fresh read gives
    for name in CHANGING:  # all but the NOT_SUPPORTED answers, kept for the session
        asked = first["calls"].get(name, 0) - first["unsupported"].get(name, 0)
        assert first["calls"].get(name, 0) >= 1 and all(t["calls"].get(name, 0) == asked for t in later), name
    for name in FIXED:
        assert first["calls"][name] >= 1 and all(name not in t["calls"] for t in later), name
    assert all(t["calls"]["nvmlDeviceGetSerial"] == 1 for t in later)  # GPU 2's refusal, asked again
    assert all(t["serial2"] == REFUSED for t in out["ticks"])  # and recorded as the error it is
    assert all(t["unsupported"] == {} for t in later)
    thresholds = 8 * 4 - first["unsupported"].get("nvmlDeviceGetTemperatureThreshold", 0)
    assert all(t["calls"].get("nvmlDeviceGetTemperatureThreshold", 0) == thresholds for t in later)  # acoustic/GPS
    assert "nvmlDeviceGetSerial" not in out["kept"]["2"] and "nvmlDeviceGetSerial" in out["kept"]["1"]
    assert out["after_close"] == {"system": {}} and out["inits"] == 1


HUNG = """
import json, time
from gpu_preflight.backends.nvml import NvmlSession, collect
session = NvmlSession()
t0 = time.monotonic()
dump = collect(device_timeout_s=30, call_timeout_s=1, session=session)
print(json.dumps({"elapsed": time.monotonic() - t0, "devices": dump["devices"]}))
"""


def test_session_reads_gpus_in_turn_and_a_hung_one_hands_over_to_the_rest(
        stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    out = child(stub_lib, tmp_path, widen(h200_dump), HUNG,
                FAKE_NVML_HANG="0:nvmlDeviceGetTemperature:600,5:nvmlDeviceGetRemappedRows:600")
    devices = out["devices"]
    assert devices[0]["timed_out"] == {"call": "nvmlDeviceGetTemperature", "after_s": 1}
    assert devices[5]["timed_out"] == {"call": "nvmlDeviceGetRemappedRows", "after_s": 1}
    assert all("timed_out" not in d and "field_values" in d for i, d in enumerate(devices) if i not in (0, 5))
    assert out["elapsed"] < 6  # two call deadlines, not the whole read's 30 s


# --- the process scan ---------------------------------------------------------------------


class Scans:
    def __init__(self, *answers: list[str] | Exception) -> None:
        self.answers = list(answers)
        self.calls = 0

    def __call__(self) -> list[str]:
        self.calls += 1
        answer = self.answers[min(self.calls, len(self.answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_process_scan_is_reused_until_it_is_old() -> None:
    scans = Scans(["a"], ["a", "b"])
    kept = ProcessScan(scans)
    assert kept.names(30) == ["a"] and kept.names(30) == ["a"] and scans.calls == 1
    assert kept.names(0) == ["a", "b"] and scans.calls == 2  # 0: every tick


def test_a_failed_process_scan_is_not_kept() -> None:
    scans = Scans(PermissionError("/proc hidden"), ["nvidia-persistenced"])
    kept = ProcessScan(scans)
    with pytest.raises(PermissionError):
        kept.names(30)
    assert kept.names(30) == ["nvidia-persistenced"] and scans.calls == 2


def probe_ctx(refresh_s: float, scan: ProcessScan | None) -> ProbeContext:
    config, _ = build_config(overrides=[f"system.process_scan_refresh_s={refresh_s}"])
    options: dict[str, Any] = {"replay": None, "report_dir": None}
    if scan is not None:
        options[PROCESS_SCAN] = scan
    return context_from(config, options, 10.0)


@pytest.mark.parametrize(("refresh_s", "scans"), [(30.0, 1), (0.0, 3)])
def test_system_probe_takes_a_monitors_process_scan(refresh_s: float, scans: int) -> None:
    fake = Scans(["nvidia-persistenced", "sshd"])
    ctx = probe_ctx(refresh_s, ProcessScan(fake))
    facts = [system_probe(ctx) for _ in range(3)]
    assert [f.processes for f in facts] == [["nvidia-persistenced", "sshd"]] * 3
    assert fake.calls == scans


def test_system_probe_failure_to_scan_is_na_not_an_empty_list() -> None:
    facts = system_probe(probe_ctx(30.0, ProcessScan(Scans(PermissionError("/proc hidden")))))
    assert isinstance(facts.processes, NA) and "hidden" in facts.processes.reason


def test_one_shot_system_probe_scans_this_host() -> None:
    facts = system_probe(probe_ctx(30.0, None))
    assert isinstance(facts.processes, list) and facts.processes  # this test's own python at least


# --- /metrics: series prefixes rendered once ----------------------------------------------


def test_cached_series_render_escaped_and_alike_every_time() -> None:
    from gpu_preflight.server.metrics import Exposition

    def render() -> str:
        out = Exposition()
        out.add("x_total", "counter", "X.", 3, {"check": 'a"b\\c\nd'})
        out.add_series("x_total", "counter", "X.", 4.5, (("check", "plain"),))
        out.state_set("s", "S.", "warn", ["pass", "warn"], {"check": "c", "status": "ignored"})
        return out.render()

    expected = ('# HELP gpu_preflight_x_total X.\n# TYPE gpu_preflight_x_total counter\n'
                'gpu_preflight_x_total{check="a\\"b\\\\c\\nd"} 3\ngpu_preflight_x_total{check="plain"} 4.5\n'
                '# HELP gpu_preflight_s S.\n# TYPE gpu_preflight_s gauge\n'
                'gpu_preflight_s{check="c",status="pass"} 0\ngpu_preflight_s{check="c",status="warn"} 1\n')
    assert render() == expected and render() == expected


# --- the NVML dump text: kept for a reader, not rendered every tick ------------------------

DUMP_TEXT = """
import json
from msgspec.structs import replace
from gpu_preflight.engine import RunOptions, run_checks
from gpu_preflight.health.reader import left_blocked
from gpu_preflight.server.monitor import Monitor
monitor = Monitor(RunOptions(overrides=["gpu.nvml_call_timeout_s=1"], probe_timeout_s=10), 1.0)
ticks = [monitor.tick() for _ in range(2)]
one_shot = run_checks(replace(monitor.options, state=None))  # the same checks, nothing kept
monitor.stop()
print(json.dumps({"tick_artifacts": [sorted(t.report.raw_artifacts) for t in ticks],
                  "blocked": [left_blocked(t.report) for t in ticks],
                  "lost": [[g["lost"] for g in t.report.facts["gpu"]["gpus"]] for t in ticks],
                  "one_shot_dump": "nvml_dump" in one_shot.raw_artifacts,
                  "same_findings": [sorted((f.check_id, f.status.value, f.code) for f in t.report.findings)
                                    == sorted((f.check_id, f.status.value, f.code) for f in one_shot.findings)
                                    for t in ticks]}))
"""


def test_monitor_tick_renders_the_dump_only_when_a_gpu_hung(
        stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    healthy = child(stub_lib, tmp_path, widen(h200_dump), DUMP_TEXT)
    assert all("nvml_dump" not in names for names in healthy["tick_artifacts"])
    assert healthy["one_shot_dump"] and healthy["blocked"] == [False, False]
    assert all(healthy["same_findings"])  # judged alike without it
    hung = child(stub_lib, tmp_path, widen(h200_dump), DUMP_TEXT, FAKE_NVML_HANG="3:nvmlDeviceGetTemperature:600")
    assert all("nvml_dump" in names for names in hung["tick_artifacts"])  # the reader's evidence of a hang
    assert hung["blocked"] == [True, True]
    assert all("did not return" in (lost[3] or "") for lost in hung["lost"])
