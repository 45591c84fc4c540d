"""Shipped floors against real recordings: a healthy GPU of the profile's SKU passes every floor.

Our own runs on a real H200 and a real H100 (``tests/fixtures/captured``) are replayed through
the cluster checks with the profile the run matched: each measured figure becomes the rank
payload it was, the node's recorded GPU facts its topology. A floor a healthy GPU misses is
as much a bug as a missing floor.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.cluster.aggregate import cluster_facts
from gpu_preflight.config import Config, build_config, find_profile, shipped_profiles
from gpu_preflight.model import Status
from gpu_preflight.registry import CheckContext, get_check

from .conftest import FIXTURES

CAPTURED = FIXTURES / "captured"
RUNS = {"h200-run-2026-11-26": "h200", "h200-run-2026-11-26b": "h200", "h100-run-2026-11-26": "h100-sxm"}


def replayed(report_path: Path) -> Any:
    """The gathered facts of a recorded cluster report, rebuilt from its findings and node facts."""
    report = json.loads(report_path.read_text())
    gemm = [{"dtype": f["details"]["dtype"], "n": 8192, "iters": 10, "tflops": f["observed"], "rel_error": 1e-3,
             "correct": True, "error": None} for f in report["findings"] if f["check_id"] == "compute.gemm"]
    memory = next(f["observed"] for f in report["findings"] if f["check_id"] == "memory.bandwidth")
    payload = {"rank": 0, "node_rank": 0, "local_rank": 0, "hostname": "vm", "node_name": "vm", "device": "cuda:0",
               "errors": [], "collectives": [], "gemm": gemm, "memory": memory,
               "node_entry": {"section": {"facts": report["nodes"]["node_0"]["facts"]}}}
    return cluster_facts({"payloads": {0: payload}, "missing": {},
                          "topology": {"world_size": 1, "num_nodes": 1, "local_world_size": 1, "hosts": ["vm"]}})


def judge(check_id: str, facts: Any, config: Config) -> list[Any]:
    return list(get_check(check_id).fn(CheckContext(host="cluster", facts={"cluster": facts}, config=config)))


@pytest.mark.parametrize("run, profile", sorted(RUNS.items()))
def test_recorded_runs_pass_their_profile_floors(run: str, profile: str) -> None:
    report = CAPTURED / run / "cluster_report.json"
    gpu_names = [g["name"] for g in json.loads(report.read_text())["nodes"]["node_0"]["facts"]["gpu"]["gpus"]]
    assert {find_profile(profile).match_length(n) > 0 for n in gpu_names} == {True}
    config, _ = build_config(profile=find_profile(profile), environ={})
    facts = replayed(report)
    gemm = judge("compute.gemm", facts, config)
    assert {f.details["dtype"] for f in gemm} == {"bf16", "fp16", "tf32", "fp32"}
    assert [(f.status, f.code) for f in gemm] == [(Status.PASS, "ok")] * 4
    memory = judge("memory.bandwidth", facts, config)
    assert [(f.status, f.code) for f in memory] == [(Status.PASS, "ok")]


@pytest.mark.parametrize("run, profile", sorted(RUNS.items()))
def test_recorded_figures_clear_each_floor_with_margin(run: str, profile: str) -> None:
    """Not just a pass: every recorded figure is at least 10 % above the line that would WARN."""
    config, _ = build_config(profile=find_profile(profile), environ={})
    perf = config.perf
    report = json.loads((CAPTURED / run / "cluster_report.json").read_text())
    for f in report["findings"]:
        if f["check_id"] == "compute.gemm":
            line = getattr(perf, f"gemm_{f['details']['dtype']}_tflops") * perf.gemm_warn_fraction
            assert f["observed"] >= 1.1 * line, f["details"]["dtype"]
        elif f["check_id"] == "memory.bandwidth":
            assert f["observed"]["device_copy_gbps"] >= 1.1 * (perf.device_copy_min_gbps or 0)
            assert min(f["observed"]["h2d_gbps"], f["observed"]["d2h_gbps"]) >= 1.1 * (perf.host_transfer_min_gbps
                                                                                       or 0)


def test_h200_bench_recording_passes_the_h200_profile() -> None:
    """The plain-PyTorch figures recorded on the H200 (../shared/captured, copied to fixtures)."""
    bench = json.loads((CAPTURED / "h200-580.159.04" / "gpu_bench.json").read_text())
    config, _ = build_config(profile=find_profile("h200"), environ={})
    perf = config.perf
    for dtype, key in (("bf16", "bf16_8192"), ("fp16", "fp16_8192"), ("tf32", "fp32_tf32_8192"),
                       ("fp32", "fp32_8192")):
        assert bench["gemm"][key]["tflops"] >= getattr(perf, f"gemm_{dtype}_tflops") * perf.gemm_warn_fraction
    assert bench["d2d_copy"]["GBps_read_plus_write"] >= (perf.device_copy_min_gbps or 0)
    assert min(bench["h2d_pinned"]["GBps"], bench["d2h_pinned"]["GBps"]) >= (perf.host_transfer_min_gbps or 0)


@pytest.mark.parametrize("profile", [p.name for p in shipped_profiles()])
def test_every_shipped_profile_has_every_floor(profile: str) -> None:
    config, _ = build_config(profile=find_profile(profile), environ={})
    perf = config.perf
    for dtype in ("bf16", "fp16", "tf32", "fp32"):
        assert getattr(perf, f"gemm_{dtype}_tflops"), dtype
    assert perf.device_copy_min_gbps and perf.host_transfer_min_gbps and perf.allreduce_pcie_busbw_min_gbps
    assert config.gpu.pcie_expected_gen in (4, 5)
    assert perf.allreduce_busbw_min_gbps is None  # a site's override, never shipped: topology decides
    if perf.allreduce_nvswitch_busbw_min_gbps is not None:  # NVSwitch SKU: far above PCIe, names to spot logs
        assert perf.allreduce_nvswitch_busbw_min_gbps > 10 * perf.allreduce_pcie_busbw_min_gbps
        assert perf.allreduce_nvlinks_per_gpu and perf.allreduce_nvswitch_gpu_names
    text = Path(find_profile(profile).path).read_text()
    assert text.count("#") >= 8, "each profile says where its numbers come from"


def test_h200_nvl_and_gh200_are_not_the_sxm_h200() -> None:
    from gpu_preflight.config import match_profile

    assert getattr(match_profile(["NVIDIA H200 NVL"]), "name", None) == "h200-nvl"
    assert match_profile(["NVIDIA GH200 480GB"]) is None
    assert getattr(match_profile(["NVIDIA H200"]), "name", None) == "h200"
