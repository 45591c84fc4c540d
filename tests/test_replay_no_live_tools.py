"""A replay judges the recorded host only: live tools installed on the replaying machine
(dcgmi, nccl-tests) are never run, and their checks say why instead of "not found"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .conftest import H200_DUMP


def test_replay_never_runs_this_hosts_tools(tmp_path: Path) -> None:
    bin_dir, marker = tmp_path / "bin", tmp_path / "ran"
    bin_dir.mkdir()
    for tool in ("dcgmi", "all_reduce_perf"):
        script = bin_dir / tool
        script.write_text(f"#!/bin/sh\necho {tool} >> {marker}\nexit 0\n")
        script.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--full", "--replay", str(H200_DUMP),
                           "--no-history", "--check", "dcgm.*", "--check", "nccl_tests.*", "--format", "json"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert not marker.exists(), marker.read_text()
    report = json.loads(proc.stdout)
    skipped = {f["check_id"]: f["summary"] for f in report["findings"]}
    assert skipped and all("replayed snapshot" in s for s in skipped.values()), skipped


def test_replay_does_not_report_this_hosts_missing_tools() -> None:
    """Whether dcgmi is installed here says nothing about the recorded host."""
    proc = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--full", "--replay", str(H200_DUMP),
                           "--no-history", "--check", "dcgm.*", "--check", "nccl_tests.*", "--format", "json"],
                          capture_output=True, text=True, timeout=120, check=False)
    summaries = [f["summary"] for f in json.loads(proc.stdout)["findings"]]
    assert summaries and all("replayed snapshot" in s and "not found" not in s for s in summaries), summaries
