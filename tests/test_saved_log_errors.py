"""A saved kernel log the user named that holds nothing readable is an ERROR (exit 3), never a
quiet SKIP beside passing checks: the user asked for exactly that file to be judged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("content, says", [(b"", "empty input"), (b"\x00\x01\x02" * 300, "binary data")])
def test_an_unreadable_saved_log_is_an_error(tmp_path: Path, content: bytes, says: str) -> None:
    log = tmp_path / "kern.log"
    log.write_bytes(content)
    proc = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--node-only", "--no-history",
                           "--kernel-log", str(log), "--format", "json"], capture_output=True, text=True,
                          timeout=120, check=False)
    report = json.loads(proc.stdout)
    [xid] = [f for f in report["findings"] if f["check_id"] == "gpu.xid"]
    assert (xid["status"], xid["code"]) == ("ERROR", "saved_log_unreadable") and says in xid["summary"]
    assert proc.returncode == 3 and report["cluster_summary"]["overall_status"] == "ERROR"
    console = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--node-only", "--no-history",
                              "--kernel-log", str(log)], capture_output=True, text=True, timeout=120, check=False)
    assert console.returncode == 3 and console.stderr.strip().splitlines()[-1].startswith("[RESULT] ERROR: [")
