"""What gpu-preflight recorded on a real H100 at this session's last device run: the node's
verdict replays from its snapshot (the recorded host, not this one), and the self-launched run
sampled the GPU under load through the product's own path and judged it healthy."""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import FIXTURES

RUN = FIXTURES / "captured" / "h100-run-2026-11-26b"


def test_the_snapshot_replays_the_recorded_hosts_verdict() -> None:
    """Recorded there: WARN for the image's open-files limit and missing nvidia-persistenced only.
    Replayed here, the same two warnings come back — not this machine's load or limits."""
    recorded = json.loads((RUN / "node_only_report.json").read_text())
    proc = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--replay", str(RUN / "snapshot.json"),
                           "--no-history", "--format", "json"], capture_output=True, text=True, timeout=120,
                          check=False)
    replayed = json.loads(proc.stdout)

    def warned(report: dict) -> set[tuple[str, str]]:
        return {(f["check_id"], f["code"]) for f in report["findings"] if f["status"] in ("WARN", "FAIL", "ERROR")}

    assert warned(replayed) == warned(recorded) == {("system.limits", "nofile_low"),
                                                    ("system.services", "service_missing")}
    assert proc.returncode == 1
    [nvlink] = [f for f in replayed["findings"] if f["check_id"] == "gpu.nvlink"]
    assert (nvlink["status"], nvlink["code"]) == ("SKIP", "single_gpu")  # a one-GPU VM: no NVLink to judge


def test_the_self_launched_run_sampled_the_gpu_under_load() -> None:
    report = json.loads((RUN / "cluster_report.json").read_text())
    assert report["cluster_summary"]["exit_code"] == 1  # the same two host warnings, nothing else
    load = {f["check_id"]: f for f in report["findings"] if f["check_id"].startswith("load.")}
    assert {k: f["status"] for k, f in load.items()} == {"load.clocks": "PASS", "load.ecc": "PASS",
                                                          "load.peers": "SKIP", "load.power": "PASS",
                                                          "load.thermal": "PASS"}
    [series] = report["nodes"]["node_0"]["load"].values()
    assert series["hz"] == 10.0 and series["samples"] > 100
    assert [p for p in series["phases"] if p.startswith("gemm_")] == ["gemm_bf16", "gemm_fp16", "gemm_tf32",
                                                                      "gemm_fp32"]
    gemm = series["phases"]["gemm_bf16"]
    assert gemm["power_max_fraction"] > 0.9  # a healthy GPU draws its power under GEMM
    assert "gemm_bf16" in (RUN / "report.html").read_text()
