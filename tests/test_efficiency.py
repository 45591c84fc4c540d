"""Issue 29 item 5: GEMM work per watt per GPU (TFLOP/s over the median power of its GEMM phase),
the GPU below 0.85 x its node's other GPUs named, in the report's load data; SKIP with the
reason where nothing was measured, never a PASS."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.backends.nvml_sampler import LoadRecord, summarize
from gpu_preflight.cluster.aggregate import build_cluster_report, cluster_facts
from gpu_preflight.config import Config
from gpu_preflight.model import Finding, Status
from gpu_preflight.records.efficiency import work_per_watt
from gpu_preflight.workloads.sampling import RankSampler

from .test_load import H100, h100_record, healthy, judge, limits, sampled, synthetic

BF16 = "gemm_bf16"


def gemm(tflops: float, dtype: str = "bf16", correct: bool = True, error: str | None = None) -> dict[str, Any]:
    return {"dtype": dtype, "n": 8192, "iters": 5, "tflops": tflops, "rel_error": 1e-3, "correct": correct,
            "error": error}


def gathered(gpus: dict[tuple[int, int], tuple[dict[str, Any], list[dict[str, Any]]]], per_node: int) -> dict[str, Any]:
    """Payloads of GPU ranks as rank 0 gathers them: each (node, local) with its load and GEMM results."""
    payloads = {}
    nodes = 1 + max(node for node, _ in gpus)
    for (node, local), (load, results) in gpus.items():
        rank = node * per_node + local
        payloads[rank] = {"rank": rank, "node_rank": node, "local_rank": local, "hostname": f"h{node}",
                          "device": f"cuda:{local}", "errors": [], "load": load, "gemm": results}
    return {"payloads": payloads, "missing": {},
            "topology": {"world_size": nodes * per_node, "num_nodes": nodes, "local_world_size": per_node,
                         "hosts": [f"h{i}" for i in range(nodes)]}}


def efficiency(data: dict[str, Any], **settings: Any) -> list[Finding]:
    return judge("load.efficiency", cluster_facts(data), **settings)


def test_stub_power_readings_and_gemm_results_name_the_gpu_that_does_less_per_watt(
        stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    """Four GPUs sampled through the real pynvml (stub): three draw 690 W for 700 TFLOP/s, one draws
    690 W for 560 (0.80 of its peers) and is named; a fifth draws 560 W for 700 and is fine."""
    full = sampled(stub_lib, tmp_path, limits(h200_dump), [("idle", 3), (BF16, 20)], healthy(23))
    series = healthy(23)
    series["nvmlDeviceGetPowerUsage"] = [80_000] * 3 + [560_000] * 20
    lean = sampled(stub_lib, tmp_path, limits(h200_dump), [("idle", 3), (BF16, 20)], series)
    assert full["phases"][BF16]["power_w"]["median"] == 690.0 and lean["phases"][BF16]["power_w"]["median"] == 560.0
    gpus = {(0, i): (full, [gemm(700.0)]) for i in range(4)}
    gpus[(0, 2)] = (full, [gemm(560.0)])
    gpus[(0, 4)] = (lean, [gemm(700.0)])
    findings = efficiency(gathered(gpus, per_node=5))
    warns = [f for f in findings if f.status is Status.WARN]
    assert [(f.subject, f.code) for f in warns] == [("h0/gpu2", "efficiency_below_peers")]
    w = warns[0]
    assert w.observed == pytest.approx(560 / 690, abs=1e-5) and w.unit == "TFLOP/s per W"
    assert "bf16 GEMM 812 GFLOP/s per W (560.0 TFLOP/s at 690 W)" in w.summary and "4 peer(s) on h0" in w.summary
    assert w.details["peers_median_tflops_per_watt"] == pytest.approx(700 / 690, abs=1e-5)
    assert w.recommendation
    passed = {f.subject: f for f in findings if f.status is Status.PASS}
    assert sorted(passed) == ["h0/gpu0", "h0/gpu1", "h0/gpu3", "h0/gpu4"]
    assert passed["h0/gpu4"].observed == pytest.approx(700 / 560, abs=1e-5)


@pytest.mark.parametrize(("tflops", "status"), [(85.0, Status.PASS), (84.99, Status.WARN)])
def test_the_threshold_is_085_of_the_median_of_the_nodes_other_gpus(tflops: float, status: Status) -> None:
    load = synthetic(1400.0, power=500.0)
    gpus = {(0, i): (load, [gemm(100.0)]) for i in range(3)}
    gpus[(0, 3)] = (load, [gemm(tflops)])
    [mine] = [f for f in efficiency(gathered(gpus, per_node=4)) if f.subject == "h0/gpu3"]
    assert mine.status is status
    [setting] = [f for f in efficiency(gathered(gpus, per_node=4), efficiency_min_fraction=0.8)
                 if f.subject == "h0/gpu3"]
    assert setting.status is Status.PASS  # the threshold is a setting (load.efficiency_min_fraction)


def test_peers_are_the_gpus_of_the_same_node() -> None:
    """h1's GPUs all do 0.7 of h0's: each node is in line with itself, nobody is named."""
    load = synthetic(1400.0, power=500.0)
    gpus = {(n, i): (load, [gemm(100.0 if n == 0 else 70.0)]) for n in range(2) for i in range(2)}
    assert {f.status for f in efficiency(gathered(gpus, per_node=2))} == {Status.PASS}


def test_nothing_measured_is_a_skip_with_the_reason_never_a_pass() -> None:
    load = synthetic(1400.0, power=500.0)
    no_power = synthetic(1400.0)
    del no_power["phases"][BF16]["power_w"]  # NVML refused every power reading
    short = synthetic(1400.0, power=500.0, n=2)
    gpus = {(0, 0): (no_power, [gemm(100.0)]), (0, 1): (load, [gemm(100.0, correct=False)]),
            (0, 2): (short, [gemm(100.0)]), (0, 3): (load, [gemm(0.0, error="CUDA error: out of memory")])}
    findings = efficiency(gathered(gpus, per_node=4))
    assert [(f.status, f.code) for f in findings] == [(Status.SKIP, "not_measured")] * 4
    assert "no work per watt" in findings[0].summary
    alone = efficiency(gathered({(0, 0): (load, [gemm(100.0)])}, per_node=1))
    assert [(f.status, f.code) for f in alone] == [(Status.SKIP, "no_peers")]
    assert alone[0].details["work_per_watt"]["bf16"]["tflops_per_watt"] == 0.2  # measured, reported, not judged


def test_cpu_workers_skip_with_the_reason() -> None:
    data = {"payloads": {r: {"rank": r, "node_rank": 0, "local_rank": r, "device": "cpu", "gemm": [gemm(0.05, "fp32")]}
                         for r in range(2)},
            "missing": {}, "topology": {"world_size": 2, "num_nodes": 1, "local_world_size": 2, "hosts": ["h0"]}}
    [f] = efficiency(data)
    assert (f.status, f.code) == (Status.SKIP, "no_series") and "CPU workers" in f.summary


def test_the_real_h100_figure_and_the_rank_puts_it_in_its_load_summary() -> None:
    """The recorded H100: 678 TFLOP/s bf16 at a median 698 W, about 0.97 TFLOP/s per W."""
    tflops = json.loads((H100 / "load_summary.json").read_text())["results"]
    results = [gemm(tflops[f"gemm_{d}"], d) for d in ("bf16", "fp16", "tf32", "fp32")]

    class Stopped:
        def stop(self) -> LoadRecord:
            return h100_record()

    payload: dict[str, Any] = {"gemm": results}
    RankSampler(Stopped(), None, None).finish(payload, Config().load)  # type: ignore[arg-type]
    figures = payload["load"]["work_per_watt"]
    assert figures == work_per_watt(results, summarize(h100_record()))
    bf16 = figures["bf16"]
    assert bf16["tflops"] == 678.23 and 690 <= bf16["power_w_median"] <= 705
    assert 0.95 <= bf16["tflops_per_watt"] <= 0.99 and bf16["samples"] >= 100
    assert set(figures) == {"bf16", "fp16", "tf32", "fp32"}


def test_the_report_keeps_each_gpus_figures_in_its_load_data() -> None:
    load = synthetic(1400.0, power=500.0)
    gpus = {(0, i): ({**load, "work_per_watt": work_per_watt([gemm(100.0 + i)], load)}, [gemm(100.0 + i)])
            for i in range(2)}
    report, _ = build_cluster_report(gathered(gpus, per_node=2), Config(), fail_on="fail", include=[], exclude=[],
                                     suite="quick", timeout_s=30)
    data = report.to_dict()
    assert data["nodes"]["node_0"]["load"]["gpu1"]["work_per_watt"]["bf16"] == {
        "tflops": 101.0, "power_w_median": 500.0, "tflops_per_watt": 0.202, "samples": 20}
    assert {f["subject"] for f in data["findings"] if f["check_id"] == "load.efficiency"} >= {"h0/gpu0", "h0/gpu1"}
    perf = data["cluster_summary"]["performance_summary"]  # the job's lowest and median, from what rank 0 gathered
    assert (perf["gemm_bf16_tflops_per_watt_min"], perf["gemm_bf16_tflops_per_watt_median"]) == (0.2, 0.202)
