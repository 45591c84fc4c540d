"""The live NVML path end to end: the real CLI and real pynvml against the stub library.

What a user runs on a GPU node, minus the GPU: ``gpu-preflight run`` and ``snapshot``
load libnvidia-ml.so.1 through pynvml; the stub answers from a recorded dump.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .conftest import H200_DUMP
from .nvml_stub.stub import stub_env, write_stub_data


def cli(lib: Path, tmp_path: Path, dump: dict[str, Any], *args: str, init_rc: int = 0,
        lost: tuple[int, ...] = (), **env: str) -> subprocess.CompletedProcess[str]:
    data = tmp_path / "nvml.txt"
    write_stub_data(dump, data, init_rc=init_rc, lost_devices=lost)
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_")}
    environment = stub_env(lib, data, **{**base, **env})
    if args and args[0] == "run":  # every test's GPU has the same UUID: no history across tests
        args = (*args, "--no-history")
    return subprocess.run([sys.executable, "-m", "gpu_preflight", *args], env=environment, capture_output=True,
                          text=True, timeout=120)


def outcomes(report: dict[str, Any]) -> set[tuple[str, str, str, str]]:
    """(check, GPU or "host", status, code): a replay names its node after the recorded host, a live run after
    this one, so node-level findings are compared by kind, not by host name."""
    return {(f["check_id"], f["subject"].split("/")[-1] if "/" in f["subject"] else "host", f["status"], f["code"])
            for f in report["findings"]}


def test_live_run_matches_replay_of_the_same_dump(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    live = cli(stub_lib, tmp_path, h200_dump, "run", "--check", "gpu.*", "--skip", "gpu.xid", "--format", "json")
    assert live.returncode == 0, live.stderr
    replay = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--replay", str(H200_DUMP), "--check",
                             "gpu.*", "--skip", "gpu.xid", "--format", "json"], capture_output=True, text=True)
    live_report, replay_report = json.loads(live.stdout), json.loads(replay.stdout)
    assert outcomes(live_report) == outcomes(replay_report)
    assert live_report["nodes"]["node_0"]["facts"]["gpu"]["source"] == "live"
    assert live_report["nodes"]["node_0"]["node_info"]["profile"] == "h200"


def test_live_fault_and_lost_gpu(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    dump = copy.deepcopy(h200_dump)
    dump["devices"][0]["nvmlDeviceGetRemappedRows"] = {"ok": [0, 2, 1, 0]}
    second = copy.deepcopy(h200_dump["devices"][0])
    second["nvmlDeviceGetUUID"] = {"ok": "GPU-00000000-0000-0000-0000-000000000001"}
    second["nvmlDeviceGetIndex"] = {"ok": 1}
    dump["devices"].append(second)
    dump["system"]["nvmlDeviceGetCount"] = {"ok": 2}
    out = cli(stub_lib, tmp_path, dump, "run", "--check", "gpu.*", "--skip", "gpu.xid", "--format", "json",
              "--expect-gpus", "2", lost=(1,))
    report = json.loads(out.stdout)
    got = outcomes(report)
    assert ("gpu.memory.remap", "gpu0", "WARN", "remap_pending") in got
    assert ("gpu.nvml", "gpu1", "FAIL", "gpu_lost") in got
    assert [(s, c) for check, _, s, c in got if check == "gpu.inventory.count"] == [("FAIL", "gpus_missing")]
    assert out.returncode == 2


def test_driver_not_loaded_is_skip_with_reason(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    out = cli(stub_lib, tmp_path, h200_dump, "run", "--check", "gpu.*", "--format", "json", init_rc=9)
    report = json.loads(out.stdout)
    statuses = {f["check_id"]: (f["status"], f["summary"]) for f in report["findings"]}
    assert statuses["gpu.ecc.errors"] == ("SKIP", "no GPU to check: driver not loaded")
    assert statuses["gpu.inventory.count"][0] == "WARN" and "driver not loaded" in statuses["gpu.inventory.count"][1]
    assert out.returncode == 1
    expected = cli(stub_lib, tmp_path, h200_dump, "run", "--check", "gpu.*", "--expect-gpus", "8", init_rc=9)
    assert expected.returncode == 2 and "0 usable GPU(s), expected 8 (driver not loaded)" in expected.stderr


def test_hung_gpu_is_reported_and_run_finishes(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    out = cli(stub_lib, tmp_path, h200_dump, "run", "--check", "gpu.nvml", "--timeout-s", "3", "--format", "json",
              FAKE_NVML_HANG="0:nvmlDeviceGetTemperature:60")
    (finding,) = json.loads(out.stdout)["findings"]
    assert finding["status"] == "FAIL" and "nvmlDeviceGetTemperature did not return" in finding["summary"]


def test_snapshot_replays_to_the_same_verdicts(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    snap = cli(stub_lib, tmp_path, h200_dump, "snapshot")
    assert snap.returncode == 0, snap.stderr
    path = tmp_path / "snap.json"
    path.write_text(snap.stdout)
    dump = json.loads(snap.stdout)
    assert dump["source"] == "live" and dump["devices"][0]["nvmlDeviceGetName"] == {"ok": "NVIDIA H200"}
    replayed = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--replay", str(path), "--check",
                               "gpu.*", "--skip", "gpu.xid", "--format", "json"], capture_output=True, text=True)
    original = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--replay", str(H200_DUMP),
                               "--check", "gpu.*", "--skip", "gpu.xid", "--format", "json"], capture_output=True,
                              text=True)
    assert outcomes(json.loads(replayed.stdout)) == outcomes(json.loads(original.stdout))


def test_live_report_dir_keeps_the_raw_dump(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    out = cli(stub_lib, tmp_path, h200_dump, "run", "--check", "gpu.*", "--report-dir", str(tmp_path / "r"))
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    (art,) = [a for a in report["artifacts"] if a["name"] == "nvml_dump"]
    raw = json.loads((tmp_path / "r" / art["path"]).read_text())
    assert raw["devices"][0]["nvmlDeviceGetUUID"] == h200_dump["devices"][0]["nvmlDeviceGetUUID"]
    assert out.returncode in (0, 1)
