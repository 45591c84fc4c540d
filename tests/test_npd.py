"""The node-problem-detector custom plugin: its monitor config follows NPD's rules, the ConfigMap
ships exactly the files in deploy/k8s/npd, and the plugin script turns a real gpu-preflight
server's verdict into NPD's exit codes (0 OK, 1 problem, other Unknown) with a short message."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from .test_server import eventually, get_json, start_cli

REPO = Path(__file__).resolve().parents[1]
NPD = REPO / "deploy" / "k8s" / "npd"
CONFIG = NPD / "gpu-preflight-monitor.json"
SCRIPT = NPD / "gpu-preflight-npd.sh"
DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")  # Go's time.ParseDuration


def seconds(duration: str) -> float:
    assert DURATION.match(duration), duration
    scale = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, _, u in re.findall(r"(\d+(\.\d+)?)(ns|us|µs|ms|s|m|h)", duration))


def test_monitor_config_follows_npds_custom_plugin_rules() -> None:
    cfg = json.loads(CONFIG.read_text())
    assert cfg["plugin"] == "custom" and cfg["source"]
    plugin = cfg["pluginConfig"]
    interval, timeout = seconds(plugin["invoke_interval"]), seconds(plugin["timeout"])
    assert 0 < timeout < interval and plugin["concurrency"] >= 1 and plugin["max_output_length"] >= 80
    conditions = {c["type"] for c in cfg["conditions"]}
    assert all(c["reason"] and c["message"] for c in cfg["conditions"])
    for rule in cfg["rules"]:
        assert rule["type"] in ("temporary", "permanent") and rule["reason"]
        if rule["type"] == "permanent":
            assert rule["condition"] in conditions
        assert seconds(rule["timeout"]) <= timeout
        assert (NPD / Path(rule["path"]).name).is_file()


def test_the_configmap_ships_the_files_in_deploy() -> None:
    doc = yaml.safe_load((REPO / "deploy" / "k8s" / "node-problem-detector.yaml").read_text())
    assert doc["kind"] == "ConfigMap"
    assert doc["data"] == {p.name: p.read_text() for p in (CONFIG, SCRIPT)}
    rule_dirs = {str(Path(r["path"]).parent) for r in json.loads(CONFIG.read_text())["rules"]}
    assert rule_dirs == {"/config/plugin"}  # where the documented volume mount puts the script


def run_plugin(port: int, **env: str) -> subprocess.CompletedProcess[str]:
    shim = Path(sys.executable).parent / "gpu-preflight"
    environ = {**os.environ, "GPU_PREFLIGHT": str(shim), "GPU_PREFLIGHT_PORT": str(port), **env}
    return subprocess.run(["sh", str(SCRIPT)], capture_output=True, text=True, env=environ, timeout=60, check=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.mark.parametrize("fault, code, word", [(None, 0, "ready:"), ("hot", 1, "not ready:")])
def test_the_plugin_reports_a_real_servers_verdict(tmp_path: Path, h200_dump: dict[str, Any], fault: str | None,
                                                   code: int, word: str) -> None:
    if fault == "hot":  # at the GPU's shutdown temperature: gpu.thermal FAILs, the node is not ready
        h200_dump["devices"][0]["nvmlDeviceGetTemperature"] = {"ok": 95}
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps(h200_dump))
    served = start_cli("--replay", str(dump), "--interval", "300", "--timeout", "60")
    try:
        eventually(lambda: "reasons" in get_json(served.port, "/readyz")[1]
                   and "first" not in " ".join(get_json(served.port, "/readyz")[1]["reasons"]), 60, "a first run")
        result = run_plugin(served.port)
    finally:
        served.stop()
    assert result.returncode == code, result
    first = result.stdout.splitlines()[0]
    assert first.startswith(word) and len(first) <= json.loads(CONFIG.read_text())["pluginConfig"]["max_output_length"]


def test_no_server_is_unknown_never_healthy() -> None:
    result = run_plugin(free_port(), GPU_PREFLIGHT_QUERY_TIMEOUT_S="1")
    assert result.returncode == 2 and result.stdout.startswith("no answer")
    missing = run_plugin(free_port(), GPU_PREFLIGHT="/nonexistent/gpu-preflight")
    assert missing.returncode == 2 and "not found" in missing.stdout
