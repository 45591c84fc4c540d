"""Real-GPU tests: run only with ``pytest --run-gpu`` on a GPU machine, and fail without a GPU.

They record what a real node prints so it can be kept under tests/fixtures/captured/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
OUT = Path(os.environ.get("GPU_PREFLIGHT_CAPTURE_DIR", "gpu-capture"))


def test_snapshot_reads_every_gpu() -> None:
    from gpu_preflight.backends.nvml import collect

    dump = collect()
    assert dump["devices"], "NVML reports no GPU on a machine run with --run-gpu"
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "snapshot.json").write_text(json.dumps(dump, indent=1))
    for dev in dump["devices"]:
        assert "ok" in dev["nvmlDeviceGetUUID"] and "ok" in dev["nvmlDeviceGetTemperature"]


def test_live_run_has_no_error_and_matches_replay() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    live = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--format", "json", "-v"],
                          capture_output=True, text=True, timeout=120)
    (OUT / "live_report.json").write_text(live.stdout)
    report = json.loads(live.stdout)
    assert report["nodes"]["node_0"]["gpu"], "no GPU in the live report"
    assert not [f for f in report["findings"] if f["status"] == "ERROR"], live.stdout
