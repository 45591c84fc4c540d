"""Cluster checks over synthetic gathered payloads: each rule at and around its boundary."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from msgspec.structs import replace

from gpu_preflight.checks.floors import peer_gap_status
from gpu_preflight.cluster.aggregate import cluster_facts
from gpu_preflight.config import Config
from gpu_preflight.config.schema import PerfConfig
from gpu_preflight.findings.canonical import node_entry
from gpu_preflight.model import NodeReport, Status
from gpu_preflight.registry import CheckContext, get_check
from gpu_preflight.report.build import build_cluster_report
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


def judge(check_id: str, f: Any, perf: PerfConfig | None = None, config: Config | None = None) -> list[Any]:
    config = config or Config(perf=perf or PerfConfig())
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


@pytest.mark.parametrize("value, changes, status", [
    (90.0, {}, Status.PASS),      # exactly peer_outlier_fraction (0.1) below: not more than it
    (89.99, {}, Status.WARN),
    (50.01, {}, Status.WARN),
    (50.0, {}, Status.FAIL),      # exactly peer_outlier_fail_fraction (0.5) below
    (49.99, {}, Status.FAIL),
    (80.0, {"peer_outlier_fraction": 0.2}, Status.PASS),
    (79.99, {"peer_outlier_fraction": 0.2}, Status.WARN),
    (30.01, {"peer_outlier_fail_fraction": 0.7}, Status.WARN),
    (30.0, {"peer_outlier_fail_fraction": 0.7}, Status.FAIL),
])
def test_peer_gap_severity_grows_with_the_gap(value: float, changes: dict[str, Any], status: Status) -> None:
    assert peer_gap_status(value, 100.0, PerfConfig(**changes)) is status


@pytest.mark.parametrize("slow, status", [(540.0, Status.PASS), (539.9, Status.WARN), (300.1, Status.WARN),
                                          (300.0, Status.FAIL), (60.0, Status.FAIL)])
def test_gemm_peer_outlier_boundaries(slow: float, status: Status) -> None:
    ps = [payload(r, 0, r, tflops=t) for r, t in enumerate([600.0, 600.0, 600.0, slow])]
    out = {f.subject: f for f in judge("compute.gemm", facts(ps, 1, 4))}
    assert out["h0/gpu3"].status is status and out["h0/gpu0"].status is Status.PASS
    assert out["h0/gpu3"].code == ("ok" if status is Status.PASS else "gemm_outlier")


def test_gemm_peer_fail_outranks_a_floor_warn() -> None:
    """Above the FAIL line of the profile but half the peers' speed: the peers' verdict wins."""
    ps = [payload(r, 0, r, tflops=t) for r, t in enumerate([1000.0, 1000.0, 1000.0, 500.0])]
    out = {f.subject: f for f in judge("compute.gemm", facts(ps, 1, 4), PerfConfig(gemm_bf16_tflops=600.0))}
    assert (out["h0/gpu3"].status, out["h0/gpu3"].code) == (Status.FAIL, "gemm_outlier")


def test_cpu_workers_are_not_held_to_a_gpu_profile() -> None:
    ps = [payload(r, 0, r, device="cpu", tflops=0.05) for r in range(2)]
    out = judge("compute.gemm", facts(ps, 1, 2), PerfConfig(gemm_bf16_tflops=590.0))
    assert [(f.status, f.details["expected"]) for f in out] == [(Status.PASS, None), (Status.PASS, None)]


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


def gpu_facts(n: int = 2, *, nvswitch: int | None = 18, links: int | None = 18, gen: int | None = 5) -> dict[str, Any]:
    """A node's GPU facts as a node report carries them: n GPUs with NVSwitch links, NVLinks, PCIe gen."""
    def one(i: int) -> dict[str, Any]:
        return {"index": i, "name": "NVIDIA H100 80GB HBM3",
                "nvswitch_links": {"na": "not supported"} if nvswitch is None else nvswitch,
                "nvlinks": ({"na": "GPU has no NVLink"} if not links else
                            [{"link": k, "active": True} for k in range(links)]) if links is not None
                else {"na": "Insufficient Permissions"},
                "pcie_gen_max": {"na": "not read"} if gen is None else gen}
    return {"available": True, "gpus": [one(i) for i in range(n)]}


def with_facts(ps: list[dict[str, Any]], gpu: dict[str, Any], per_node: int) -> list[dict[str, Any]]:
    """Attach the node facts to each node's local rank 0 payload (as node leaders send them)."""
    for p in ps:
        if p["local_rank"] == 0:
            p["node_entry"] = {"section": {"facts": {"gpu": copy.deepcopy(gpu)}}}
    return ps


def floors(**changes: Any) -> PerfConfig:
    base = {"allreduce_nvswitch_busbw_min_gbps": 250.0, "allreduce_nvlinks_per_gpu": 18,
            "allreduce_pcie_busbw_min_gbps": 8.0}
    return PerfConfig(**{**base, **changes})


def config_with(perf: PerfConfig, pcie_gen: int | None = 5) -> Config:
    return Config(perf=perf, gpu=replace(Config().gpu, pcie_expected_gen=pcie_gen))


def two_gpus(busbw: float, size: int = 1 << 28, device: str = "cuda:0") -> list[dict[str, Any]]:
    ps = [payload(0, 0, 0, busbw=busbw, device=device), payload(1, 0, 1, busbw=busbw, device=device)]
    for p in ps:
        p["collectives"][0]["results"][0]["size_bytes"] = size
    return ps


@pytest.mark.parametrize("busbw, topo, status, floor", [
    (250.0, {}, Status.PASS, 250.0),                              # NVSwitch, 18 of 18 links
    (249.9, {}, Status.FAIL, 250.0),
    (250.1, {}, Status.PASS, 250.0),
    (166.7, {"links": 12}, Status.PASS, 250.0 * 12 / 18),         # 12 links by design: scaled
    (166.6, {"links": 12}, Status.FAIL, 250.0 * 12 / 18),
    (8.0, {"nvswitch": 0, "links": 0}, Status.PASS, 8.0),         # PCIe gen5, no NVLink
    (7.99, {"nvswitch": 0, "links": 0}, Status.FAIL, 8.0),
    (8.0, {"nvswitch": 0, "links": 4}, Status.PASS, 8.0),         # bridged pairs, no NVSwitch: PCIe floor
    (4.0, {"nvswitch": 0, "links": 0, "gen": 4}, Status.PASS, 4.0),  # a gen5 card in a gen4 host: halved
    (3.99, {"nvswitch": 0, "links": 0, "gen": 4}, Status.FAIL, 4.0),
    (8.0, {"nvswitch": None, "links": None, "gen": None}, Status.PASS, 8.0),  # unknown: the PCIe floor
    (7.99, {"nvswitch": None, "links": None, "gen": None}, Status.FAIL, 8.0),
])
def test_allreduce_floor_follows_the_node_topology(busbw: float, topo: dict[str, Any], status: Status,
                                                    floor: float) -> None:
    ps = with_facts(two_gpus(busbw), gpu_facts(**topo), 2)
    out = judge("nccl.collectives", facts(ps, 1, 2), config=config_with(floors()))
    assert [f.status for f in out] == [status]
    assert out[0].expected == f">= {floor:g}"


def test_a_site_floor_holds_whatever_the_topology() -> None:
    """A site's (or baseline's) own all_reduce floor replaces the derived one on every topology."""
    for topo in ({}, {"nvswitch": 0, "links": 0}, {"nvswitch": None, "links": None}):
        ps = with_facts(two_gpus(39.9), gpu_facts(**topo), 2)
        out = judge("nccl.collectives", facts(ps, 1, 2), config=config_with(floors(allreduce_busbw_min_gbps=40.0)))
        assert [(f.status, f.expected) for f in out] == [(Status.FAIL, ">= 40")]


def test_floor_at_scale_follows_the_topology_the_node_summarised() -> None:
    """Above report.detail_max_nodes a node sends a topology summary, not its GPU records."""
    ps = two_gpus(249.9)
    ps[0]["node_entry"] = {"section": {"facts": {"gpu": {"available": True, "gpus": [0, 1], "topology": {
        "gpus": 2, "nvswitch": True, "nvlinks_min": 18, "pcie_gen_max": 5}}}}}
    out = judge("nccl.collectives", facts(ps, 1, 2), config=config_with(floors()))
    assert [(f.status, f.expected) for f in out] == [(Status.FAIL, ">= 250")]


@pytest.mark.parametrize("size, device, status", [
    (1 << 28, "cuda:0", Status.FAIL),        # at perf.busbw_floor_min_bytes: judged
    ((1 << 28) - 1, "cuda:0", Status.PASS),  # just below: latency-bound, reported only
    (1 << 28, "cpu", Status.PASS),           # gloo on CPU: no GPU floor
])
def test_allreduce_floor_applies_to_gpus_at_large_messages(size: int, device: str, status: Status) -> None:
    ps = with_facts(two_gpus(10.0, size, device), gpu_facts(), 2)
    out = judge("nccl.collectives", facts(ps, 1, 2), config=config_with(floors()))
    assert [f.status for f in out] == [status]
    assert (out[0].expected is None) == (status is Status.PASS)


def node_fabrics(bws: list[float]) -> list[dict[str, Any]]:
    ps = []
    for node, bw in enumerate(bws):
        for local in range(2):
            r = node * 2 + local
            p = payload(r, node, local, busbw=bw, group=f"node{node}", ranks=[node * 2, node * 2 + 1])
            p["collectives"][0]["scope"] = "intra_node"
            ps.append(p)
    return ps


@pytest.mark.parametrize("slow, changes, status", [
    (270.0, {}, Status.PASS),     # 10 % below the median: not more than peer_outlier_fraction
    (269.9, {}, Status.WARN),
    (150.1, {}, Status.WARN),
    (150.0, {}, Status.FAIL),     # 50 % below: peer_outlier_fail_fraction
    (149.9, {}, Status.FAIL),
    (10.0, {}, Status.FAIL),
    (90.1, {"peer_outlier_fail_fraction": 0.7}, Status.WARN),
    (90.0, {"peer_outlier_fail_fraction": 0.7}, Status.FAIL),
])
def test_slow_node_fabric_against_median(slow: float, changes: dict[str, Any], status: Status) -> None:
    out = [f for f in judge("nccl.collectives", facts(node_fabrics([300.0, 300.0, 300.0, slow]), 4, 2),
                            PerfConfig(**changes)) if f.status is not Status.PASS]
    assert [(f.subject, f.code, f.status) for f in out] == ([] if status is Status.PASS else
                                                             [("group node3", "busbw_outlier", status)])


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


def links_of(bws: list[float]) -> list[dict[str, Any]]:
    return [{"pair": [0, i + 1], "gbps": bw, "wrong": 0, "bytes": 1, "iters": 1} for i, bw in enumerate(bws)]


@pytest.mark.parametrize("slow, status", [(0.9, Status.PASS), (0.8999, Status.WARN), (0.5001, Status.WARN),
                                          (0.5, Status.FAIL), (0.025, Status.FAIL)])
def test_node_link_severity_grows_with_the_gap(slow: float, status: Status) -> None:
    ps = [payload(0, 0, 0, links=links_of([1.0, slow, 1.0])), payload(1, 1, 0), payload(2, 2, 0), payload(3, 3, 0)]
    out = [f for f in judge("network.node_links", facts(ps, 4, 1)) if f.status is not Status.PASS]
    assert [(f.subject, f.code, f.status) for f in out] == ([] if status is Status.PASS else
                                                             [("h2", "link_slow", status)])


def test_a_thirty_times_slower_link_fails() -> None:
    """Issue 12.3: three hosts, one link capped with tc tbf: 0.025 GB/s against a median of 0.787."""
    ps = [payload(0, 0, 0, links=links_of([1.549, 0.025])), payload(1, 1, 0), payload(2, 2, 0)]
    out = [f for f in judge("network.node_links", facts(ps, 3, 1)) if f.status is not Status.PASS]
    assert [(f.subject, f.code, f.status) for f in out] == [("h2", "link_slow", Status.FAIL)]
    assert "97% below the median 0.787" in out[0].summary and out[0].recommendation


def memory_payloads(copies: list[float], h2d: list[float] | None = None, node_gpu: dict[str, Any] | None = None,
                    ) -> list[dict[str, Any]]:
    ps = []
    for r, c in enumerate(copies):
        p = payload(r, 0, r)
        p["memory"] = {"device_copy_gbps": c, "h2d_gbps": (h2d or [55.0] * len(copies))[r], "d2h_gbps": 55.0,
                       "pattern_bytes": 1 << 30, "pattern_errors": 0, "error": None}
        ps.append(p)
    return with_facts(ps, node_gpu or gpu_facts(len(copies)), len(copies))


@pytest.mark.parametrize("slow, status, code", [
    (2700.0, Status.PASS, "ok"), (2699.9, Status.WARN, "device_copy_outlier"),
    (1500.1, Status.WARN, "device_copy_outlier"), (1500.0, Status.FAIL, "device_copy_outlier"),
])
def test_memory_peer_outlier_boundaries(slow: float, status: Status, code: str) -> None:
    ps = memory_payloads([3000.0, 3000.0, 3000.0, slow])
    out = {f.subject: f for f in judge("memory.bandwidth", facts(ps, 1, 4))}
    assert (out["h0/gpu3"].status, out["h0/gpu3"].code) == (status, code)
    assert out["h0/gpu0"].status is Status.PASS
    if status is not Status.PASS:
        assert out["h0/gpu3"].details["memory_key"] == "device_copy"


@pytest.mark.parametrize("h2d, gen, status, code", [
    (40.0, 5, Status.PASS, "ok"), (39.99, 5, Status.WARN, "h2d_slow"),
    (20.0, 5, Status.WARN, "h2d_slow"), (19.99, 5, Status.FAIL, "h2d_slow"),   # bandwidth_floor_fail_fraction
    (20.0, 4, Status.PASS, "ok"), (19.99, 4, Status.WARN, "h2d_slow"),         # a gen4 host: floor halved
    (40.0, None, Status.PASS, "ok"), (39.99, None, Status.WARN, "h2d_slow"),   # gen unknown: as stated
])
def test_host_transfer_floor_by_pcie_generation(h2d: float, gen: int | None, status: Status, code: str) -> None:
    ps = memory_payloads([3000.0], [h2d], gpu_facts(1, gen=gen))
    out = judge("memory.bandwidth", facts(ps, 1, 1), config=config_with(PerfConfig(host_transfer_min_gbps=40.0)))
    assert [(f.status, f.code) for f in out] == [(status, code)]


@pytest.mark.parametrize("copy_gbps, status", [(2300.0, Status.PASS), (2299.9, Status.WARN), (1150.0, Status.WARN),
                                               (1149.9, Status.FAIL)])
def test_device_copy_floor(copy_gbps: float, status: Status) -> None:
    out = judge("memory.bandwidth", facts(memory_payloads([copy_gbps]), 1, 1),
                PerfConfig(device_copy_min_gbps=2300.0))
    assert [f.status for f in out] == [status]


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
    report = report.to_dict()
    assert report["cluster_info"]["data_completeness"] == "incomplete: missing h1"
    assert code == 2
    assert report["nodes"]["node_1"]["summary"]["overall_status"] == "ERROR"


DEAD = {"error": "CollectiveTimeout: ...", "bytes": 1, "iters": 1}


@pytest.mark.parametrize(("nodes", "links", "floor", "want"), [
    (4, links_of([1.0, 1.0, 1.0]), None, [("cluster", "ok", "PASS", None)]),
    (4, links_of([1.0, 0.8999, 1.0]), None, [("h2", "link_slow", "WARN", "monitor")]),  # WARN: watch it
    (4, links_of([1.0, 0.5, 1.0]), None, [("h2", "link_slow", "FAIL", "isolate_node")]),  # h0 is fine with the rest
    (4, [{"pair": [0, 1], **DEAD}, *links_of([1.0, 1.0, 1.0])[1:]], None,
     [("h1", "exchange_failed", "FAIL", "isolate_node")]),
    (2, [{"pair": [0, 1], **DEAD}], None, [("h1", "exchange_failed", "FAIL", "monitor")]),  # either end
    (4, links_of([1.0, 0.4, 1.0]), 0.5, [("h2", "link_below_floor", "FAIL", "isolate_node")]),
    # every exchange below the floor: node 0 is the common member, the peers are collateral
    (4, links_of([0.2, 0.21, 0.2]), 0.5, [("h1", "link_below_floor", "FAIL", "monitor"),
                                          ("h2", "link_below_floor", "FAIL", "monitor"),
                                          ("h3", "link_below_floor", "FAIL", "monitor"),
                                          ("h0", "reference_slow", "FAIL", "isolate_node")]),
])
def test_node_link_actions_follow_who_owns_the_exchange(nodes: int, links: list[dict[str, Any]],
                                                        floor: float | None, want: list[Any]) -> None:
    ps = [payload(0, 0, 0, links=links), *(payload(n, n, 0) for n in range(1, nodes))]
    out = judge("network.node_links", facts(ps, nodes, 1), PerfConfig(node_link_min_gbps=floor))
    assert [(f.subject, f.code, f.status.value, f.details.get("operator_action")) for f in out] == want
