"""What gpu-preflight recorded on a real H200 replays and re-renders as it did there."""

from __future__ import annotations

import json
from pathlib import Path

from gpu_preflight import Status, run_checks
from gpu_preflight.config import Config, build_config, find_profile
from gpu_preflight.report import render

from .conftest import FIXTURES

RUN = FIXTURES / "captured" / "h200-run-2026-11-26"
RUN_GATHERED = FIXTURES / "captured" / "h200-run-2026-11-26b"  # after the two-level gather


def test_our_own_snapshot_of_a_real_h200_replays_healthy() -> None:
    node = run_checks(replay=str(RUN / "snapshot.json"), include=["gpu.*"], environ={})
    assert {f.status for f in node.findings} <= {Status.PASS, Status.SKIP}
    assert node.profile == "h200"
    names = {f.check_id for f in node.findings if f.status is Status.PASS}
    assert {"gpu.ecc.errors", "gpu.recovery_action", "gpu.pcie", "gpu.thermal"} <= names


def test_real_cluster_report_figures_and_rerender() -> None:
    report = json.loads((RUN / "cluster_report.json").read_text())
    gemm = {f["details"]["dtype"]: f for f in report["findings"] if f["check_id"] == "compute.gemm"}
    assert gemm["bf16"]["observed"] > 600 and gemm["bf16"]["status"] == "PASS"
    mem = next(f for f in report["findings"] if f["check_id"] == "memory.bandwidth")
    assert mem["status"] == "PASS" and mem["observed"]["pattern_errors"] == 0
    assert "| PASS | compute.gemm |" in render(report, "md")


def test_h200_profile_floors_accept_what_a_healthy_h200_measured() -> None:
    config, _ = build_config(profile=find_profile("h200"), environ={})
    perf = config.perf
    measured = {"bf16": 653.6, "fp16": 623.2, "tf32": 341.3, "fp32": 50.9}
    for dtype, value in measured.items():
        expected = getattr(perf, f"gemm_{dtype}_tflops")
        assert value >= expected * perf.gemm_warn_fraction, dtype
    assert (perf.device_copy_min_gbps or 0) <= 4253 and (perf.host_transfer_min_gbps or 0) <= 55.3
    assert isinstance(config, Config) and Path(RUN / "log.txt").read_text().count("passed") >= 1


def test_real_run_through_node_bundles_and_columns_keeps_every_figure() -> None:
    """The second recording went through the node bundle and packed columns: the same figures
    arrive, per GPU, and the node section was built on the node."""
    report = json.loads((RUN_GATHERED / "cluster_report.json").read_text())
    gemm = {f["details"]["dtype"]: f["observed"] for f in report["findings"] if f["check_id"] == "compute.gemm"}
    assert gemm["bf16"] > 600 and gemm["tf32"] > 300 and set(gemm) == {"bf16", "fp16", "tf32", "fp32"}
    perf = report["cluster_summary"]["performance_summary"]
    assert perf["gemm_bf16_tflops_min"] == perf["gemm_bf16_tflops_median"] > 600
    mem = next(f for f in report["findings"] if f["check_id"] == "memory.bandwidth")
    assert mem["status"] == "PASS" and mem["observed"]["pattern_errors"] == 0
    section = report["nodes"]["node_0"]
    assert section["gpu"]["gpu_0"]["power_limit_w"] == 700 and section["gpu"]["gpu_0"]["slowdown_temperature_c"]
    assert {c["check_id"] for c in section["checks"]} >= {"gpu.ecc.errors", "gpu.thermal"}
    assert report["cluster_summary"]["overall_status"] == "WARN"  # the image's limits, not the GPU
