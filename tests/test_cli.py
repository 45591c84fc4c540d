"""The command line as a user runs it: real processes, exit codes, stdout/stderr split."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from .conftest import H200_DUMP

ENV = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_")}
ENV.pop("LD_LIBRARY_PATH", None)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpu_preflight", *args], capture_output=True, text=True,
                          timeout=120, env=env or ENV)


def edited_dump(tmp_path: Path, **device_values: Any) -> Path:
    dump = json.loads(H200_DUMP.read_text())
    dump["devices"][0].update(device_values)
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(dump))
    return path


def test_no_gpu_is_never_pass() -> None:
    out = cli("run", "--check", "gpu.*")
    assert out.returncode == 1, out.stderr
    assert "NVML library not found" in out.stderr
    assert "PASS    gpu." not in out.stderr
    assert out.stderr.rstrip().endswith("[RESULT] WARNING: [gpu.inventory.count]")  # the word says what exit 1 says
    assert out.stdout == ""


def test_no_gpu_with_expected_gpus_fails() -> None:
    out = cli("run", "--check", "gpu.*", "--expect-gpus", "2")
    assert out.returncode == 2
    assert out.stderr.rstrip().splitlines()[-1] == "[RESULT] FAILURE: [gpu.inventory.count]"


def test_cpu_node_declared_deliberately_passes() -> None:
    out = cli("run", "--check", "gpu.*", "--expect-gpus", "0", "--format", "json")
    report = json.loads(out.stdout)
    statuses = {f["check_id"]: f["status"] for f in report["findings"]}
    assert statuses["gpu.inventory.count"] == "PASS" and statuses["gpu.ecc.errors"] == "SKIP"
    assert out.returncode == 0


def test_replay_h200_is_healthy_and_json_is_alone_on_stdout() -> None:
    out = cli("run", "--replay", str(H200_DUMP), "--check", "gpu.*", "--format", "json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)  # nothing else on stdout
    assert report["cluster_summary"]["overall_status"] == "PASS"
    assert {f["status"] for f in report["findings"]} <= {"PASS", "SKIP"}
    node = report["nodes"]["node_0"]
    assert node["gpu"]["gpu_0"]["name"] == "NVIDIA H200"
    assert node["gpu"]["gpu_0"]["memory_total_mb"] == 143771
    assert node["node_info"]["profile"] == "h200"
    assert report["cluster_summary"]["recommendations"] == ["Cluster is ready for distributed training"]
    assert report["cluster_summary"]["test_results"]["gpu_health"] is True
    assert report["schema_version"] and report["cluster_info"]["cluster_topology"]["gpus_per_node"] == 1


def test_injected_fault_fails_with_result_line(tmp_path: Path) -> None:
    dump = edited_dump(tmp_path, nvmlDeviceGetRemappedRows={"ok": [0, 2, 0, 1]})
    out = cli("run", "--replay", str(dump), "--check", "gpu.*")
    assert out.returncode == 2
    assert "[RESULT] FAILURE: [gpu.memory.remap]" in out.stderr
    assert "RMA" in out.stderr


def test_report_dir_and_rerender(tmp_path: Path) -> None:
    dump = edited_dump(tmp_path, nvmlDeviceGetTemperature={"ok": 86})
    out = cli("run", "--replay", str(dump), "--check", "gpu.*", "--report-dir", str(tmp_path / "r"))
    assert out.returncode == 1
    path = tmp_path / "r" / "report.json"
    report = json.loads(path.read_text())
    assert report["cluster_summary"]["overall_status"] == "WARN"
    md = cli("report", "render", str(path), "--format", "md")
    assert md.returncode == 0 and "| WARN | gpu.thermal |" in md.stdout
    assert "[RESULT] WARNING: [gpu.thermal]" in md.stdout
    junit = cli("report", "render", str(path), "--format", "junit")
    root = ET.fromstring(junit.stdout)
    assert int(root.get("tests", "0")) == len(report["findings"])
    again = json.loads(cli("report", "render", str(path), "--format", "json").stdout)
    assert again == report
    console = cli("report", "render", str(path), "--format", "console")
    assert console.stderr.rstrip().endswith("[RESULT] WARNING: [gpu.thermal]")


def test_other_formats_on_stdout(tmp_path: Path) -> None:
    out = cli("run", "--replay", str(H200_DUMP), "--check", "gpu.*", "--format", "junit")
    assert ET.fromstring(out.stdout).tag == "testsuites"
    out = cli("run", "--replay", str(H200_DUMP), "--check", "gpu.*", "--format", "md")
    assert out.stdout.startswith("# gpu-preflight report: PASS")


def test_bad_inputs_give_clear_errors(tmp_path: Path) -> None:
    """Usage errors judge no node: exit 3 (could not judge), never 2 (this node failed), with one line."""
    bad_cfg = tmp_path / "site.toml"
    bad_cfg.write_text("[gpu]\nexpected_count = 8\nexpectd_model = 'H100'\n")
    out = cli("run", "--config", str(bad_cfg))
    assert out.returncode == 3 and f"{bad_cfg}:3: gpu.expectd_model: unknown setting" in out.stderr
    not_json = tmp_path / "x.json"
    not_json.write_text("{nope")
    out = cli("run", "--replay", str(not_json))
    assert out.returncode == 3 and "not a JSON NVML dump" in out.stderr
    out = cli("run", "--replay", str(tmp_path / "missing.json"))
    assert out.returncode == 3 and "cannot read replay file" in out.stderr
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"hello": 1}')
    assert "not an NVML dump" in cli("run", "--replay", str(wrong)).stderr
    out = cli("run", "--check", "gpu.nope")
    assert out.returncode == 3 and "no check matches 'gpu.nope'" in out.stderr
    out = cli("report", "render", str(not_json))
    assert out.returncode == 3 and "cannot read report" in out.stderr
    out = cli("run", "--profile", "nonesuch")
    assert out.returncode == 3 and "unknown profile" in out.stderr
    out = cli("run", "--chek", "gpu.*")
    assert out.returncode == 3 and out.stderr.splitlines() == [
        "gpu-preflight: error: unrecognized arguments: --chek gpu.* (see 'gpu-preflight --help')"]
    out = cli("run", "--format", "yaml")
    assert out.returncode == 3 and len(out.stderr.splitlines()) == 1 and "invalid choice: 'yaml'" in out.stderr
    out = cli("report", "render", str(wrong))
    assert out.returncode == 3 and "is not a gpu-preflight report" in out.stderr


def test_checks_list_and_explain() -> None:
    listing = cli("checks", "list").stdout
    for check_id in ("gpu.ecc.errors", "gpu.recovery_action", "system.shm", "gpu.nvlink"):
        assert check_id in listing
    explain = cli("checks", "explain", "gpu.clocks")
    assert explain.returncode == 0 and "HW slowdown" in explain.stdout
    assert cli("checks", "explain", "gpu.nope").returncode == 3


def test_config_defaults_and_profiles() -> None:
    parsed = tomllib.loads(cli("config", "defaults").stdout)
    assert parsed["gpu"]["busy_memory_used_mib_warn"] == 2048
    as_json = json.loads(cli("config", "defaults", "--format", "json").stdout)
    assert as_json["system"]["shm_fail_mib"]["unit"] == "MiB"
    profiles = cli("config", "profiles").stdout
    for name in ("h100-sxm", "h100-pcie", "h200", "a100-40gb", "a100-80gb", "a10g", "l40s", "b200"):
        assert name in profiles


def test_snapshot_without_nvml_is_an_error() -> None:
    out = cli("snapshot")
    assert out.returncode == 3 and "NVML Shared Library Not Found" in out.stderr and out.stdout == ""


def test_site_config_and_env_change_verdicts(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text("gpu:\n  expected_count: 8\n")
    out = cli("run", "--replay", str(H200_DUMP), "--check", "gpu.*", "--config", str(site))
    assert out.returncode == 2 and "1 usable GPU(s), expected 8" in out.stderr
    env = dict(ENV, GPU_PREFLIGHT_GPU__EXPECTED_COUNT="1")
    assert cli("run", "--replay", str(H200_DUMP), "--check", "gpu.*", env=env).returncode == 0
