"""Recommendations by urgency and the cost-benefit arithmetic; the [report] settings' types."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gpu_preflight.config import Config
from gpu_preflight.config.fields import setting_fields
from gpu_preflight.config.loader import coerce
from gpu_preflight.config.report_schema import ReportConfig, report_config
from gpu_preflight.findings.model import ClusterReport, Recommendation
from gpu_preflight.report.advice import add_advice, cost_benefit, recommendations_by_urgency
from gpu_preflight.report.scores import compute_scores

from .report_data import cluster_report, h200_report
from .test_scores import finding, gemm, report_of


def with_gpus(report: dict[str, Any], gpus: int, duration_s: float, wall_s: float | None = None) -> dict[str, Any]:
    report["nodes"]["node_0"]["gpu"] = {f"gpu_{i}": {} for i in range(gpus)}
    report["run"]["duration_s"] = duration_s
    if wall_s is not None:
        report["run"]["wall_s"] = wall_s
    return report


def recs(report: dict[str, Any]) -> dict[str, list[Recommendation]]:
    typed = ClusterReport.of(report)
    return recommendations_by_urgency(ClusterReport.of(typed), compute_scores(ClusterReport.of(typed)))


def test_a_node_without_usable_gpus_is_immediate_although_it_only_warns() -> None:
    findings = [finding("gpu.inventory.count", "WARN", "h0", "no_gpus", recommendation="Run on a GPU node."),
                finding("system.limits", "WARN", "h0", "nofile_low", recommendation="Raise ulimit -n.")]
    out = recs(report_of(findings))
    assert [e.code for e in out["immediate"]] == ["no_gpus"]
    assert [e.code for e in out["short_term"]] == ["nofile_low"]
    declared = recs(report_of([finding("gpu.inventory.count", "PASS", "h0", "ok", expected=0)]))
    assert declared["immediate"] == []


def test_urgency_follows_the_gate() -> None:
    findings = [finding("gpu.thermal", "FAIL", "h0/gpu1", "hot", recommendation="Fix cooling."),
                finding("stack.cuda", "ERROR", "h0", "cuda_init_failed"),
                finding("system.limits", "WARN", "h0", "nofile_low", recommendation="Raise ulimit -n."),
                finding("workloads", "SKIP", "h0", "not_run", recommendation="pip install torch."),
                finding("gpu.ecc.mode", "SKIP", "h0", "no_nvml"), finding("gpu.clocks", "PASS")]
    out = recs(report_of(findings))
    assert [(e.check_id, e.status) for e in out["immediate"]] == [("gpu.thermal", "FAIL"), ("stack.cuda", "ERROR")]
    assert out["immediate"][1].recommendation.startswith("Investigate: stack.cuda ERROR")
    assert [e.check_id for e in out["short_term"]] == ["system.limits"]
    monitoring = {(e.check_id, e.code) for e in out["monitoring"]}
    assert ("workloads", "not_run") in monitoring and ("gpu.ecc.mode", "no_nvml") not in monitoring
    assert {e.component for e in out["monitoring"] if e.code == "not_tested"} == {
        "network_infrastructure", "performance_consistency", "service_reliability"}  # only SKIPs there
    strict = recs(report_of(findings, fail_on="warn"))
    assert [e.check_id for e in strict["immediate"]][-1] == "system.limits" and not strict["short_term"]


def test_one_cause_on_many_subjects_is_one_entry() -> None:
    findings = [finding("gpu.thermal", "WARN", f"h{n}/gpu{g}", "near_slowdown", recommendation="Check airflow.")
                for n in range(3) for g in range(2)]
    findings.append(finding("gpu.thermal", "WARN", "h9/gpu0", "near_slowdown", recommendation="Other advice."))
    (first, second) = recs(report_of(findings))["short_term"]
    assert first.count == 6 and first.subjects[:2] == ["h0/gpu0", "h0/gpu1"]
    assert second.count == 1 and second.recommendation == "Other advice."


def test_spread_that_costs_points_is_watched() -> None:
    report = report_of([gemm("h0/gpu0", 80.0), gemm("h0/gpu1", 100.0), gemm("h0/gpu2", 100.0)])
    watch = [e for e in recs(report)["monitoring"] if e.code == "spread_gemm"]
    assert [e.subjects for e in watch] == [["h0/gpu0"]] and "20.0%" in watch[0].summary


def test_every_entry_is_written_in_one_key_order_and_an_older_spread_entry_reads_back() -> None:
    report = report_of([gemm("h0/gpu0", 80.0), gemm("h0/gpu1", 100.0), gemm("h0/gpu2", 100.0),
                        finding("gpu.thermal", "FAIL", "h0/gpu1", "hot", recommendation="Fix cooling.")])
    out = recs(report)
    written = [e.to_dict() for entries in out.values() for e in entries]
    assert {e["code"] for e in written} >= {"hot", "not_tested", "spread_gemm"}
    assert {tuple(e) for e in written} == {("check_id", "code", "component", "status", "recommendation", "subjects",
                                            "count", "summary")}
    spread = next(e for e in written if e["code"] == "spread_gemm")
    older = {k: v for k, v in spread.items() if k != "recommendation"} | {"recommendation": spread["recommendation"]}
    assert list(older)[-1] == "recommendation"  # how reports before the typed entry wrote it
    assert Recommendation.from_dict(older).to_dict() == spread and list(Recommendation.from_dict(older).to_dict()) \
        == list(spread)


def test_a_mistyped_entry_is_refused_with_its_path() -> None:
    report = add_advice(report_of([finding("gpu.thermal", "FAIL", "h0/gpu1", "hot", recommendation="Fix cooling.")]))
    report["cluster_summary"]["recommendations_by_urgency"]["immediate"][0]["count"] = "one"
    path = r"\$\.cluster_summary\.recommendations_by_urgency\[\.\.\.\]\[0\]\.count"  # msgspec elides a dict key
    with pytest.raises(msgspec.ValidationError, match=path):
        ClusterReport.from_dict(report)


@pytest.mark.parametrize("price, check_cost, averted_cost", [(None, None, None), (4.0, 0.8, 384.0)])
def test_cost_of_checks_vs_a_failed_job(price: float | None, check_cost: float | None,
                                         averted_cost: float | None) -> None:
    report = with_gpus(report_of([finding("gpu.thermal", "FAIL", "h0/gpu3"), finding("gpu.xid", "ERROR")]),
                       gpus=8, duration_s=90.0)
    cfg = ReportConfig(gpu_hour_price=price, job_hours=24.0, failure_loss_fraction=0.5)
    cb = cost_benefit(ClusterReport.of(report), compute_scores(ClusterReport.of(report), cfg), cfg)
    assert cb.check_gpu_hours == pytest.approx(0.2)  # 90 s x 8 GPUs
    assert cb.job_gpu_hours == 192.0 and cb.averted_gpu_hours == 96.0 and cb.basis == "failure"
    assert cb.gating_findings == 2 and cb.benefit_cost_ratio == 480.0
    assert (cb.check_cost, cb.averted_cost) == (check_cost, averted_cost)
    if price is None:
        assert "USD" not in cb.line and "96 GPU-h" in cb.line
    else:
        assert "384.00 USD" in cb.line and "0.8000 USD" in cb.line


def test_cost_of_a_straggler_and_of_a_clean_run() -> None:
    slow = with_gpus(report_of([gemm("h0/gpu0", 90.0), gemm("h0/gpu1", 100.0), gemm("h0/gpu2", 100.0)]),
                     gpus=3, duration_s=10.0, wall_s=120.0)
    cfg = ReportConfig(job_hours=10.0)
    cb = cost_benefit(ClusterReport.of(slow), compute_scores(ClusterReport.of(slow), cfg), cfg)
    assert cb.duration_source == "run.wall_s" and cb.check_gpu_hours == pytest.approx(0.1)
    assert cb.basis == "slowdown" and cb.slowdown_fraction == pytest.approx(0.1)
    assert cb.averted_gpu_hours == pytest.approx(3.0)  # 10 h x 3 GPUs x 10 %
    clean = with_gpus(report_of([gemm("h0/gpu0", 100.0), gemm("h0/gpu1", 100.5)]), gpus=2, duration_s=36.0)
    cb = cost_benefit(ClusterReport.of(clean), compute_scores(ClusterReport.of(clean), cfg), cfg)
    assert cb.basis == "none" and cb.averted_gpu_hours == 0.0 and cb.benefit_cost_ratio is None
    assert "ready to train" in cb.line
    cpu = cost_benefit(ClusterReport.of(report_of([finding("gpu.thermal", "FAIL")])), None, cfg)
    assert cpu.gpus == 0 and "nothing to price" in cpu.line


def test_add_advice_on_real_reports(tmp_path: Path) -> None:
    node = add_advice(h200_report(tmp_path, nvmlDeviceGetCurrentClocksEventReasons=8))
    summary = node["cluster_summary"]
    assert [e["check_id"] for e in summary["recommendations_by_urgency"]["immediate"]] == ["gpu.clocks"]
    assert summary["cost_benefit"]["gpus"] == 1 and summary["cost_benefit"]["basis"] == "failure"
    cluster = add_advice(cluster_report(node_fabric=[450.0, 450.0, 300.0]))
    short = cluster["cluster_summary"]["recommendations_by_urgency"]["short_term"]
    assert [(e["check_id"], e["subjects"]) for e in short] == [("nccl.collectives", ["group node2"])]


def test_report_settings_load_through_the_config_loader() -> None:
    hints = typing.get_type_hints(ReportConfig)
    defaults = ReportConfig()
    for f in setting_fields(ReportConfig):
        assert coerce(getattr(defaults, f.name), hints[f.name]) == getattr(defaults, f.name)
        assert f.metadata["doc"]
    assert coerce({"hardware_health": 2}, hints["weights"]) == {"hardware_health": 2.0}
    assert report_config(Config()) == ReportConfig()  # defaults until the section is registered
