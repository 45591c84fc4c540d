"""Reports of clusters above ``report.detail_max_nodes``: the same verdict, counts and scores
as the detailed report, in a fraction of the findings.

The clusters are built like ``report_data.gathered_cluster`` (real H200 node reports, the
real cluster checks and aggregation); the threshold is lowered so three nodes count as
"large", and each node entry is built the way the runner builds it above the threshold.
"""

from __future__ import annotations

import copy
from typing import Any

from gpu_preflight.config import Config
from gpu_preflight.config.report_schema import ReportConfig
from gpu_preflight.config.schema import PerfConfig
from gpu_preflight.engine import run_checks
from gpu_preflight.findings.canonical import node_entry
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.model import per_subject
from gpu_preflight.report.build import build_cluster_report
from gpu_preflight.report.connectivity import MATRIX_MAX_NODES, connectivity
from gpu_preflight.report.measurements import gemm_points

from .conftest import H200_DUMP
from .report_data import gathered_cluster

NODES, PER_NODE = 3, 2


def _report(*, summarized: bool, gemm: list[float] | None = None) -> dict[str, Any]:
    gathered = gathered_cluster(NODES, PER_NODE, gemm=gemm)
    node = run_checks(replay=str(H200_DUMP), include=["gpu.*"], environ={})
    for n in range(NODES):
        own = copy.deepcopy(node)  # each node its own GPU, as on a real cluster
        own.facts["gpu"]["gpus"][0]["uuid"] = f"GPU-{n:08x}"
        gathered["payloads"][n * PER_NODE]["node_entry"] = node_entry(own, f"node_{n}", detail=not summarized)
    config = Config(perf=PerfConfig(gemm_bf16_tflops=670.0),
                    report=ReportConfig(detail_max_nodes=1 if summarized else 32))
    report, _ = build_cluster_report(gathered, config, fail_on="fail", include=[], exclude=[], suite="quick",
                                     timeout_s=30.0)
    return report.to_dict()


def test_summarized_report_keeps_verdict_counts_groups_and_scores() -> None:
    full, small = _report(summarized=False), _report(summarized=True)
    a, b = full["cluster_summary"], small["cluster_summary"]
    assert (a["overall_status"], a["exit_code"], a["test_results"]) == (b["overall_status"], b["exit_code"],
                                                                        b["test_results"])
    # Every finding a node made is counted (listed or not); a cluster check's rolled-up passes are one finding.
    assert {k: v for k, v in a["counts"].items() if k != "PASS"} == {k: v for k, v in b["counts"].items()
                                                                       if k != "PASS"}
    rolled = sum(1 for f in small["findings"] if f["status"] == "PASS" and (f.get("details") or {}).get("rolled_up"))
    members = sum(f["observed"]["count"] for f in small["findings"]
                  if f["status"] == "PASS" and (f.get("details") or {}).get("rolled_up"))
    assert b["counts"]["PASS"] == a["counts"]["PASS"] - members + rolled
    assert len(small["findings"]) < len(full["findings"]) / 3
    scores = {k: v["score"] for k, v in a["health_scores"]["components"].items()}
    assert scores == {k: v["score"] for k, v in b["health_scores"]["components"].items()}
    assert sum(n for by in b["unlisted"].values() for n in by.values()) > 0


def test_rolled_up_passes_keep_every_gpu_value() -> None:
    full, small = _report(summarized=False), _report(summarized=True)
    rolled = [f for f in small["findings"] if f["check_id"] == "compute.gemm"]
    assert len(rolled) == 1 and rolled[0]["subject"] == "cluster" and rolled[0]["details"]["rolled_up"]
    assert rolled[0]["observed"]["count"] == NODES * PER_NODE
    assert sorted(gemm_points(ClusterReport.of(full))) == sorted(gemm_points(ClusterReport.of(small)))
    expanded = {f["subject"]: f["observed"] for f in per_subject(small["findings"]) if f["check_id"] == "compute.gemm"}
    assert expanded == {f["subject"]: f["observed"] for f in full["findings"] if f["check_id"] == "compute.gemm"}


def test_a_slow_gpu_is_still_named_at_scale() -> None:
    gemm = [700.0] * (NODES * PER_NODE)
    gemm[3] = 300.0  # h1/gpu1
    small = _report(summarized=True, gemm=gemm)
    warned = [f for f in small["findings"] if f["check_id"] == "compute.gemm" and f["status"] != "PASS"]
    assert [(f["subject"], f["status"]) for f in warned] == [("h1/gpu1", "FAIL")]
    passed = next(f for f in small["findings"] if f["check_id"] == "compute.gemm" and f["status"] == "PASS")
    assert "h1/gpu1" not in passed["details"]["subjects"] and passed["observed"]["count"] == NODES * PER_NODE - 1


def test_each_skip_cause_is_listed_once_with_its_node_count() -> None:
    full, small = _report(summarized=False), _report(summarized=True)
    skips = [f for f in full["findings"] if f["status"] == "SKIP" and f["node"] != "cluster"]
    assert skips, "the H200 capture has checks that skip (no NVLink, no retired pages)"
    causes = {(f["check_id"], f["code"]) for f in skips}
    rolled = [f for f in small["findings"] if f["status"] == "SKIP" and f["node"] == "cluster"
              and (f["check_id"], f["code"]) in causes]
    assert {(f["check_id"], f["code"]) for f in rolled} == causes
    assert all(f["details"]["nodes"] == NODES and f["summary"].startswith(f"on {NODES} nodes") for f in rolled)


def test_connectivity_grid_only_for_small_clusters() -> None:
    report = _report(summarized=False)
    conn = connectivity(ClusterReport.of(report))
    assert conn is not None and conn.cells is not None
    big = copy.deepcopy(report)
    names = [f"n{i}" for i in range(MATRIX_MAX_NODES + 1)]
    node = report["nodes"]["node_0"]
    big["nodes"] = {f"node_{i}": {**node, "node_info": {**node["node_info"], "current_host": n}}
                    for i, n in enumerate(names)}
    big["findings"] = [{"check_id": "network.node_links", "status": "PASS", "subject": "cluster", "code": "ok",
                        "summary": "", "observed": {n: 40.0 for n in names[1:]}}]
    wide = connectivity(ClusterReport.of(big))
    assert wide is not None and wide.cells is None and len(wide.pairs) == MATRIX_MAX_NODES


def test_history_reads_the_same_gpu_measurements_from_either_report() -> None:
    from gpu_preflight.history.extract import extract

    def measured(report: dict[str, Any]) -> set[tuple[str, str, float]]:
        return {(m.metric, m.subject, m.value) for m in extract(ClusterReport.of(report)).measurements
                if m.metric.startswith(("gemm.", "memory."))}

    full, small = measured(_report(summarized=False)), measured(_report(summarized=True))
    assert full and full == small
