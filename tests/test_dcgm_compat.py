"""The dcgm-exporter compatibility rules: promtool accepts them, and over a real /metrics scrape of
gpu-preflight serve (faults injected into the replayed dump) every DCGM_* name they record carries
the reading dcgm-exporter would give for the same field, with its UUID label."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from .test_server import eventually, promtool, request, start_cli

RULES = Path(__file__).resolve().parents[1] / "deploy" / "prometheus" / "dcgm-exporter-compat.rules.yml"
SAMPLE = re.compile(r"^(gpu_preflight_gpu_[a-z_]+)\{([^}]*)\} (\S+)$")


def scrape(dump: dict[str, Any], tmp_path: Path) -> list[tuple[str, dict[str, str], float]]:
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(dump))
    served = start_cli("--replay", str(path), "--interval", "300", "--timeout", "60")
    try:
        eventually(lambda: b"gpu_preflight_gpu_temperature_celsius" in request(served.port, "/metrics")[2], 60,
                   "the first run's GPU readings")
        text = request(served.port, "/metrics")[2].decode()
    finally:
        served.stop()
    out = []
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            out.append((m.group(1), labels, float(m.group(3))))
    return out


def test_promtool_accepts_the_rules() -> None:
    proc = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_rules_record_dcgm_names_from_a_real_scrape(tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    dev = h200_dump["devices"][0]
    dev["nvmlDeviceGetTemperature"] = {"ok": 77}
    dev["ecc_total"]["volatile_uncorrected"] = {"ok": 3}
    dev["nvmlDeviceGetCurrentClocksEventReasons"] = {"ok": 0x8 | 0x4}
    samples = scrape(h200_dump, tmp_path)
    uuid = dev["nvmlDeviceGetUUID"]["ok"]
    series = [{"series": f"{name}{{{','.join(f'{k}={json.dumps(v)}' for k, v in labels.items())}}}",
               "values": f"{value:g}x2"} for name, labels, value in samples]
    expected = {  # DCGM name -> the value dcgm-exporter would report for this GPU
        "DCGM_FI_DEV_GPU_TEMP": 77, "DCGM_FI_DEV_MEMORY_TEMP": 33, "DCGM_FI_DEV_POWER_USAGE": 76.424,
        "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": 700, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 3,
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": 0, "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0,
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 0, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 12,
    }
    recorded = {r["record"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    assert set(expected) <= recorded
    tests = [{"expr": f'{name}{{gpu="0"}}', "eval_time": "1m",
              "exp_samples": [{"labels": f'{name}{{gpu="0",uuid="{uuid}",UUID="{uuid}"}}', "value": value}]}
             for name, value in expected.items()]
    spec = {"rule_files": [str(RULES)], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": tests}]}
    test_file = tmp_path / "compat_test.yml"
    test_file.write_text(yaml.safe_dump(spec))
    proc = subprocess.run([promtool(), "test", "rules", str(test_file)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
