"""Cluster checks over synthetic gathered payloads: each rule at and around its boundary."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpu_preflight.cluster.aggregate import build_cluster_report, cluster_facts
from gpu_preflight.config import Config
from gpu_preflight.config.schema import PerfConfig
from gpu_preflight.model import NodeReport, Status
from gpu_preflight.registry import CheckContext, get_check
from gpu_preflight.report.canonical import node_entry
from gpu_preflight.workloads.collectives import bus_factor


def payload(rank: int, node: int, local: int, *, device: str = "cuda:0", tflops: float = 600.0,
            correct: bool = True, busbw: float = 300.0, wrong: int = 0, links: list[dict[str, Any]] | None = None,
            group: str = "all", ranks: list[int] | None = None) -> dict[str, Any]:
    p: dict[str, Any] = {
        "rank": rank, "node_rank": node, "local_rank": local, "hostname": f"h{node}", "node_name": f"h{node}",
        "device": device.replace("0", str(local)) if device.startswith("cuda") else device, "errors": [],
        "stack": {"torch_version": "2.13.0", "torch_cuda": "12.8", "nccl_version": "2.27.3", "cudnn_version": 9,
                  "cuda_available": True, "device_count": 8, "cuda_init_error": None},
        "gemm": [{"dtype": "bf16", "n": 8192, "iters": 10, "tflops": tflops, "rel_error": 1e-3, "correct": correct,
                  "error": None}],
        "train": {"mode": "single", "steps": 40, "loss_start": 2.5, "loss_end": 0.5, "finite": True,
                  "improved": True},
        "collectives": [{"op": "all_reduce", "group": group, "scope": "distributed", "ranks": ranks or [0, 1],
                         "success": wrong == 0, "error": None, "wrong": wrong, "peak_bandwidth_gbps": busbw,
                         "results": [{"size_bytes": 1 << 28, "busbw_gbps": busbw, "algbw_gbps": busbw,
                                      "bandwidth_gbps": busbw, "latency_ms": 1.0, "wrong": wrong, "time_us": 1000}]}],
    }
    if links is not None:
        p["links"] = links
    return p


def facts(payloads: list[dict[str, Any]], nodes: int, per_node: int, missing: dict[int, str] | None = None) -> Any:
    gathered = {"payloads": {p["rank"]: p for p in payloads}, "missing": missing or {},
                "topology": {"world_size": nodes * per_node, "num_nodes": nodes, "local_world_size": per_node,
                             "hosts": [f"h{i}" for i in range(nodes)]}}
    return cluster_facts(gathered)


def judge(check_id: str, f: Any, perf: PerfConfig | None = None) -> list[Any]:
    config = Config(perf=perf or PerfConfig())
    return list(get_check(check_id).fn(CheckContext(host="cluster", facts={"cluster": f}, config=config)))


@pytest.mark.parametrize("op, n, factor", [("all_reduce", 8, 1.75), ("all_gather", 4, 0.75),
                                           ("reduce_scatter", 2, 0.5), ("all_to_all", 8, 0.875),
                                           ("broadcast", 8, 1.0), ("sendrecv", 8, 1.0), ("all_reduce", 1, 1.0)])
def test_bus_factors_follow_nccl_tests(op: str, n: int, factor: float) -> None:
    assert bus_factor(op, n) == pytest.approx(factor)


@pytest.mark.parametrize("tflops, status", [(700.0, Status.PASS), (603.0, Status.PASS), (602.9, Status.WARN),
                                            (402.0, Status.WARN), (401.9, Status.FAIL)])
def test_gemm_against_profile_expectation(tflops: float, status: Status) -> None:
    perf = PerfConfig(gemm_bf16_tflops=670.0)  # warn below 603, fail below 402
    out = judge("compute.gemm", facts([payload(0, 0, 0, tflops=tflops)], 1, 1), perf)
    assert [f.status for f in out] == [status]


def test_gemm_outlier_against_peers_and_wrong_result() -> None:
    ps = [payload(r, 0, r, tflops=t) for r, t in enumerate([600.0, 600.0, 600.0, 539.0])]
    out = {f.subject: f for f in judge("compute.gemm", facts(ps, 1, 4))}
    assert out["h0/gpu3"].status is Status.WARN and out["h0/gpu3"].code == "gemm_outlier"
    assert out["h0/gpu0"].status is Status.PASS
    ps[3]["gemm"][0]["tflops"] = 541.0  # 541 >= 600 * 0.9 = 540
    assert {f.status for f in judge("compute.gemm", facts(ps, 1, 4))} == {Status.PASS}
    ps[1]["gemm"][0]["correct"] = False
    bad = [f for f in judge("compute.gemm", facts(ps, 1, 4)) if f.status is Status.FAIL]
    assert [(f.subject, f.code) for f in bad] == [("h0/gpu1", "gemm_wrong")]


def test_cpu_ranks_are_not_compared_with_each_other() -> None:
    ps = [payload(r, 0, r, device="cpu", tflops=t) for r, t in enumerate([0.08, 0.04])]
    assert {f.status for f in judge("compute.gemm", facts(ps, 1, 2))} == {Status.PASS}


def test_wrong_elements_fail_correctness() -> None:
    assert judge("nccl.correctness", facts([payload(0, 0, 0), payload(1, 0, 1)], 1, 2))[0].status is Status.PASS
    out = judge("nccl.correctness", facts([payload(0, 0, 0, wrong=3), payload(1, 0, 1, wrong=3)], 1, 2))
    assert [f.status for f in out] == [Status.FAIL] and "3 wrong" in out[0].summary


@pytest.mark.parametrize("busbw, status", [(250.0, Status.PASS), (249.9, Status.FAIL)])
def test_allreduce_floor(busbw: float, status: Status) -> None:
    out = judge("nccl.collectives", facts([payload(0, 0, 0, busbw=busbw), payload(1, 0, 1, busbw=busbw)], 1, 2),
                PerfConfig(allreduce_busbw_min_gbps=250.0))
    assert [f.status for f in out] == [status]


def test_slow_node_fabric_against_median() -> None:
    ps = []
    for node, bw in enumerate([300.0, 300.0, 300.0, 260.0]):
        for local in range(2):
            r = node * 2 + local
            p = payload(r, node, local, busbw=bw, group=f"node{node}", ranks=[node * 2, node * 2 + 1])
            p["collectives"][0]["scope"] = "intra_node"
            ps.append(p)
    out = [f for f in judge("nccl.collectives", facts(ps, 4, 2)) if f.status is Status.WARN]
    assert [(f.subject, f.code) for f in out] == [("group node3", "busbw_outlier")]


def test_node_links_name_the_slow_peer_or_the_reference() -> None:
    def links(bws: list[float]) -> list[dict[str, Any]]:
        return [{"pair": [0, i + 1], "gbps": bw, "wrong": 0, "bytes": 1, "iters": 1} for i, bw in enumerate(bws)]

    ps = [payload(0, 0, 0, links=links([1.0, 0.2, 1.0])), payload(1, 1, 0), payload(2, 2, 0), payload(3, 3, 0)]
    out = [f for f in judge("network.node_links", facts(ps, 4, 1)) if f.status is not Status.PASS]
    assert [(f.subject, f.code) for f in out] == [("h2", "link_slow")]
    ps[0]["links"] = links([0.2, 0.21, 0.2])  # every exchange with h0 is equally slow: nothing stands out...
    assert {f.status for f in judge("network.node_links", facts(ps, 4, 1))} == {Status.PASS}
    ps[0]["links"] = links([0.2, 0.21, 0.2])
    out = judge("network.node_links", facts(ps, 4, 1), PerfConfig(node_link_min_gbps=0.5))
    assert ("h0", "reference_slow") in [(f.subject, f.code) for f in out]  # ...but below the floor: h0 is named
    dead = {"pair": [0, 1], "error": "CollectiveTimeout: ...", "bytes": 1, "iters": 1}
    ps[0]["links"] = [dead, *links([1.0, 1.0])[1:]]
    out = [f for f in judge("network.node_links", facts(ps, 4, 1)) if f.status is Status.FAIL]
    assert [(f.subject, f.code) for f in out] == [("h1", "exchange_failed")]


def test_training_failures() -> None:
    p = payload(0, 0, 0)
    p["train"].update(loss_end=2.1, improved=False)
    p["ddp"] = {"mode": "ddp", "steps": 40, "loss_start": 2.5, "loss_end": 0.5, "finite": True, "improved": True,
                "params_identical": False, "param_digests": ["a", "b"]}
    out = {f.code for f in judge("train.smoke", facts([p, payload(1, 0, 1)], 1, 2))}
    assert {"train_no_progress", "ddp_params_differ"} <= out


def test_stack_cuda_newer_than_driver_and_init_failure() -> None:
    p = payload(0, 0, 0)
    f = facts([p], 1, 1)
    f.node_facts[0] = {"gpu": {"available": True, "gpus": [{}], "cuda_driver_version": "12.4"}}
    out = judge("stack.cuda", f)
    assert [(x.status, x.code) for x in out] == [(Status.FAIL, "cuda_newer_than_driver")]
    p["stack"]["cuda_init_error"] = "RuntimeError: CUDA driver version is insufficient for CUDA runtime version"
    assert judge("stack.cuda", f)[0].code == "cuda_init_failed"


def test_version_skew_and_completeness() -> None:
    a, b = payload(0, 0, 0), payload(1, 1, 0)
    b["stack"]["nccl_version"] = "2.21.5"
    f = facts([a, b], 2, 1, missing={})
    assert any(x.code == "version_skew" for x in judge("cluster.consistency", f))
    f = facts([a], 2, 1, missing={1: "rank 1 on h1 stopped answering (last heartbeat 12 s ago)"})
    out = judge("cluster.completeness", f)
    assert [(x.status, x.subject) for x in out] == [(Status.FAIL, "h1/rank1")]


def test_cluster_report_marks_missing_node_incomplete() -> None:
    a = payload(0, 0, 0)
    a["node_entry"] = node_entry(NodeReport("h0", "t", []), "node_0")
    gathered = {"payloads": {0: copy.deepcopy(a)}, "missing": {1: "rank 1 on h1 did not report"},
                "topology": {"world_size": 2, "num_nodes": 2, "local_world_size": 1, "hosts": ["h0", "h1"]}}
    report, code = build_cluster_report(gathered, Config(), fail_on="fail", include=[], exclude=[], suite="quick",
                                        timeout_s=10)
    assert report["cluster_info"]["data_completeness"] == "incomplete: missing h1"
    assert code == 2
    assert report["nodes"]["node_1"]["summary"]["overall_status"] == "ERROR"
