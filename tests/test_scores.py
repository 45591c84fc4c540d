"""Health scores: component mapping, finding points at their boundaries, consistency from spread,
overall mean and cap, bands, connectivity, and explanations that name the right findings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.config.report_schema import ReportConfig
from gpu_preflight.findings.canonical import summarize
from gpu_preflight.findings.model import ClusterReport, ComponentScore, ReportFinding
from gpu_preflight.report.connectivity import connectivity
from gpu_preflight.report.scores import add_scores, component_of, compute_scores, dispersion, rating

from .report_data import cluster_report, h200_report


def finding(check_id: str, status: str, subject: str = "h0", code: str = "c", **extra: Any) -> dict[str, Any]:
    return {"node": "node_0", "check_id": check_id, "status": status, "subject": subject, "code": code,
            "summary": f"{check_id} {status} on {subject}", "observed": None, "expected": None, "unit": None,
            "recommendation": None, "details": {}, **extra}


def report_of(findings: list[dict[str, Any]], fail_on: str = "fail") -> dict[str, Any]:
    """A report of these findings on one node ``h0``, with the verdict they reach."""
    node = {"timestamp": "", "node_info": {"hostname": "h0"}, "summary": summarize([], fail_on).to_dict(), "gpu": {}}
    return {"findings": findings, "nodes": {"node_0": node}, "run": {"fail_on": fail_on, "duration_s": 1.0},
            "cluster_summary": summarize(ReportFinding.many_from_dicts(findings), fail_on).to_dict()}


def gemm(subject: str, tflops: float, dtype: str = "bf16") -> dict[str, Any]:
    return finding("compute.gemm", "PASS", subject, "ok", observed=tflops,
                   details={"dtype": dtype, "expected": None, "median_tflops": None})


def component(report: dict[str, Any], name: str, cfg: ReportConfig | None = None) -> ComponentScore:
    return compute_scores(ClusterReport.of(report), cfg).components[name]


@pytest.mark.parametrize("check_id, expected", [
    ("gpu.thermal", "hardware_health"), ("gpu.ecc.errors", "hardware_health"), ("gpu.busy", "resource_management"),
    ("gpu.inventory.driver", "software_stack"), ("gpu.inventory.count", "hardware_health"),
    ("compute.gemm", "hardware_health"), ("memory.bandwidth", "hardware_health"), ("dcgm.diag", "hardware_health"),
    ("nccl.collectives", "network_infrastructure"), ("network.node_links", "network_infrastructure"),
    ("fabric.pingpong", "network_infrastructure"), ("ib.ports", "network_infrastructure"),
    ("stack.cuda", "software_stack"), ("cluster.consistency", "software_stack"),
    ("system.limits", "resource_management"),
    ("cluster.completeness", "service_reliability"), ("train.smoke", "service_reliability"),
    ("system.disk", "resource_management"), ("system.shm", "resource_management"),
    ("system.memory", "resource_management"), ("system.cpu", "resource_management"),
    ("system.kernel", "software_stack"), ("system.services", "service_reliability"),
    ("some.future_check", "service_reliability"),
    ("nccl_tests.bandwidth", "network_infrastructure"), ("nccl_log.triage", "network_infrastructure"),
    ("localize.suspect", "network_infrastructure"), ("history.regression", "performance_consistency"),
    ("history.repeat_offender", "hardware_health"), ("pcie.lnksta", "hardware_health"),
])
def test_every_check_counts_against_one_component(check_id: str, expected: str) -> None:
    assert component_of(check_id) == expected


@pytest.mark.parametrize("score, band", [(100, "EXCELLENT"), (90, "EXCELLENT"), (89.9, "GOOD"), (75, "GOOD"),
                                         (74.9, "MODERATE"), (50, "MODERATE"), (49.9, "CRITICAL"), (0, "CRITICAL"),
                                         (None, None)])
def test_rating_bands_at_their_boundaries(score: float | None, band: str | None) -> None:
    assert rating(score, ReportConfig()) == band


@pytest.mark.parametrize("statuses, score, band", [
    (["PASS"], 100.0, "EXCELLENT"),
    (["PASS", "WARN"], 90.0, "EXCELLENT"),
    (["ERROR"], 70.0, "MODERATE"),
    (["FAIL"], 40.0, "CRITICAL"),
    (["FAIL", "ERROR", "WARN"], 0.0, "CRITICAL"),  # 100 - 60 - 30 - 10
    (["FAIL", "FAIL"], 0.0, "CRITICAL"),  # two causes: floored at 0, not -20
])
def test_finding_points(statuses: list[str], score: float, band: str) -> None:
    findings = [finding("gpu.thermal", s, "h0/gpu0", code=f"c{i}") for i, s in enumerate(statuses)]
    hw = component(report_of(findings), "hardware_health")
    assert (hw.score, hw.rating) == (score, band)


@pytest.mark.parametrize("count, points", [(1, 10.0), (2, 12.5), (4, 17.5), (5, 20.0), (50, 20.0)])
def test_repeated_cause_costs_at_most_twice(count: int, points: float) -> None:
    findings = [finding("system.limits", "WARN", f"h{i}", "nofile_low") for i in range(count)]
    sw = component(report_of(findings), "resource_management")
    (d,) = sw.deductions
    assert (d.points, d.count, sw.score) == (points, count, 100 - points)
    assert d.subjects == [f"h{i}" for i in range(min(count, 12))]


def test_points_are_settings() -> None:
    cfg = ReportConfig(warn_points=25.0, repeat_fraction=0.0)
    findings = [finding("system.limits", "WARN", f"h{i}", "nofile_low") for i in range(3)]
    assert component(report_of(findings), "resource_management", cfg).score == 75.0


def test_skipped_or_absent_component_is_not_tested_not_perfect() -> None:
    report = report_of([finding("gpu.thermal", "SKIP"), finding("system.limits", "PASS")])
    scores = compute_scores(ClusterReport.of(report))
    hw, net = scores.components["hardware_health"], scores.components["network_infrastructure"]
    assert hw.score is None and hw.rating is None and not hw.tested and "not tested" in hw.reason
    assert net.score is None
    assert scores.overall.components_counted == ["resource_management"]
    assert scores.overall.score == 100.0


def test_overall_is_weighted_mean_and_capped_when_the_run_gates() -> None:
    findings = [finding("gpu.thermal", "WARN"), finding("system.limits", "PASS"),
                finding("network.node_links", "PASS"), finding("train.smoke", "PASS")]
    overall = compute_scores(ClusterReport.of(report_of(findings))).overall
    assert overall.score == 97.5 and overall.rating == "EXCELLENT" and overall.cap is None
    assert overall.incomplete == []
    weighted = compute_scores(ClusterReport.of(report_of(findings)),
                              ReportConfig(weights={"hardware_health": 3.0})).overall
    assert weighted.score == pytest.approx((3 * 90 + 300) / 6, abs=0.05)
    gating = [*findings, finding("train.smoke", "ERROR", code="x")]  # service 70: mean 90 but ERROR gates
    capped = compute_scores(ClusterReport.of(report_of(gating))).overall
    assert capped.score == 74.0 and capped.rating == "MODERATE"
    assert capped.cap is not None and capped.cap.mean == 90.0 and "ERROR" in capped.cap.why
    warn_gates = compute_scores(ClusterReport.of(report_of(findings, fail_on="warn"))).overall
    assert warn_gates.score == 74.0  # under --fail-on warn the WARN gates too


def test_dispersion_statistics() -> None:
    assert dispersion([5.0]) is None
    two = dispersion([90.0, 110.0])
    assert two is not None and two["cv"] == pytest.approx(0.1) and two["straggler_gap"] == pytest.approx(0.1)
    many = dispersion([100.0] * 999 + [50.0])
    assert many is not None and many["cv"] < 0.02 and many["straggler_gap"] == pytest.approx(0.5)
    assert many["dispersion"] == pytest.approx(0.5) and many["spread"] == pytest.approx(0.5)


@pytest.mark.parametrize("low, high, points", [
    (100.0, 100.0, 0.0),      # identical GPUs
    (98.0, 102.0, 0.0),       # dispersion 0.02 = consistency_ok: free
    (75.0, 125.0, 40.0),      # dispersion 0.25 = consistency_bad: the whole 40
    (50.0, 150.0, 40.0),      # beyond bad: clamped
    (86.5, 113.5, 20.0),      # dispersion 0.135: halfway
])
def test_gemm_consistency_points_at_boundaries(low: float, high: float, points: float) -> None:
    report = report_of([gemm("h0/gpu0", low), gemm("h0/gpu1", high)])
    perf = component(report, "performance_consistency")
    (m,) = perf.measurements
    assert m.points == pytest.approx(points, abs=0.01)
    assert perf.score == pytest.approx(100 - points, abs=0.05)
    assert m.slowest == "h0/gpu0" and m.n == 2


def test_consistency_counts_the_worst_series_of_a_family_and_skips_cpu_workers() -> None:
    report = report_of([gemm("h0/gpu0", 100.0), gemm("h0/gpu1", 100.0),
                        gemm("h0/gpu0", 50.0, "fp32"), gemm("h0/gpu1", 60.0, "fp32")])
    perf = component(report, "performance_consistency")
    counted = [m for m in perf.measurements if m.counted]
    assert [m.series for m in counted] == ["fp32 GEMM TFLOP/s across GPUs"]
    assert len(perf.measurements) == 2 and len(perf.deductions) == 1
    cpu = component(report_of([gemm("h0/rank0", 0.02), gemm("h0/rank1", 0.03)]), "performance_consistency")
    assert cpu.score is None and "not measured" in cpu.reason


def test_real_faulty_node_explains_its_hardware_score(tmp_path: Path) -> None:
    report = h200_report(tmp_path, nvmlDeviceGetCurrentClocksEventReasons=8)  # HW slowdown -> gpu.clocks FAIL
    scores = compute_scores(ClusterReport.of(report))
    hw = scores.components["hardware_health"]
    assert hw.score == 40.0 and hw.rating == "CRITICAL"
    (d,) = hw.deductions
    assert (d.check_id, d.status, d.subjects, d.points) == ("gpu.clocks", "FAIL",
                                                                        ["replay:dump.json/gpu0"], 60.0)
    assert scores.overall.score <= 74.0 and scores.overall.cap is not None
    assert scores.components["performance_consistency"].score is None  # node-only: nothing measured


def test_cluster_report_names_the_slow_gpu_node_and_link() -> None:
    report = cluster_report(gemm=[700.0, 700.0, 700.0, 600.0, 700.0, 700.0], node_fabric=[450.0, 450.0, 380.0],
                            links=[48.0, 30.0])
    add_scores(report)
    json.dumps(report["cluster_summary"]["health_scores"])  # the block is plain JSON
    scores = ClusterReport.of(report).cluster_summary.health_scores
    assert scores is not None
    perf = scores.components["performance_consistency"]
    slowest = {m.family: m.slowest for m in perf.measurements if m.counted}
    assert slowest == {"gemm": "h1/gpu1", "node_fabric": "h2"}
    net = scores.components["network_infrastructure"]
    assert {(d.check_id, d.code, tuple(d.subjects)) for d in net.deductions} == {
        ("nccl.collectives", "busbw_outlier", ("group node2",)), ("network.node_links", "link_slow", ("h2",))}
    hw = scores.components["hardware_health"]
    assert [(d.check_id, d.subjects) for d in hw.deductions] == [("compute.gemm", ["h1/gpu1"])]
    gemm_series = next(m for m in perf.measurements if m.family == "gemm")
    assert gemm_series.straggler_gap == pytest.approx(1 / 7, abs=1e-4)
    assert gemm_series.points == pytest.approx(40 * (1 / 7 - 0.02) / 0.23, abs=0.01)


def test_connectivity_star_from_node_links_and_from_a_pair_matrix() -> None:
    healthy = cluster_report(links=[48.0, 47.0])
    conn = connectivity(ClusterReport.of(healthy))
    assert conn is not None and conn.source == "network.node_links" and conn.nodes == ["h0", "h1", "h2"]
    assert {(p["a"], p["b"], p["gbps"], p["status"]) for p in conn.pairs} == {
        ("h0", "h1", 48.0, "PASS"), ("h0", "h2", 47.0, "PASS")}
    assert conn.cells[1][2] is None and conn.cells[2][0] == {"gbps": 47.0, "status": "PASS"}
    links = compute_scores(ClusterReport.of(healthy)).components["performance_consistency"].measurements
    assert any(m.family == "node_links" and m.n == 2 for m in links)
    measured: list[dict[str, Any]] = [
        {"members": [1, 2], "status": "ok", "gbps": 40.0, "rail": 0},
        {"members": [1, 2], "status": "ok", "gbps": 30.0, "rail": 1},
        {"members": [0, 2], "status": "timeout"}, {"members": [0, 1, 2], "status": "ok", "gbps": 9.0},
        {"a": "h0", "b": "h1", "gbps": 45.0, "result": "slow"}]
    full = connectivity(ClusterReport.of(healthy), measured)
    assert full is not None and full.source == "matrix"
    pairs = {(p["a"], p["b"]): (p["gbps"], p["status"]) for p in full.pairs}
    assert pairs == {("h1", "h2"): (30.0, "PASS"), ("h0", "h2"): (None, "FAIL"), ("h0", "h1"): (45.0, "WARN")}
    assert connectivity(ClusterReport.of(h200_report())) is None


def test_slow_link_keeps_the_healthy_pairs_when_findings_carry_every_exchange() -> None:
    report = cluster_report(links=[48.0, 30.0])
    slow = next(f for f in report["findings"] if f["check_id"] == "network.node_links")
    star = connectivity(ClusterReport.of(report))
    assert star is not None and [(p["b"], p["status"]) for p in star.pairs] == [("h2", "WARN")]  # h1 unknown
    slow["details"]["exchanges"] = {"h1": 48.0, "h2": 30.0}  # what the check could attach to every finding
    star = connectivity(ClusterReport.of(report))
    assert star is not None
    assert {(p["b"], p["gbps"], p["status"]) for p in star.pairs} == {("h1", 48.0, "PASS"), ("h2", 30.0, "WARN")}


def test_localisation_pair_matrix_feeds_connectivity_and_consistency() -> None:
    from gpu_preflight.localize.model import LocalizeConfig
    from gpu_preflight.localize.report import localization_block
    from gpu_preflight.localize.simulate import Scenario, simulate

    outcome = simulate(Scenario(4, slow={2: 0.3}), LocalizeConfig(rails=1)).outcome  # node h2 at 30 %
    report = cluster_report(nodes=4)
    report["cluster_summary"]["localization"] = localization_block(outcome, ["h0", "h1", "h2", "h3"])
    conn = connectivity(ClusterReport.of(report))
    assert conn is not None and conn.source == "localization" and not conn.truncated
    slow = {tuple(sorted((p["a"], p["b"]))) for p in conn.pairs if p["status"] == "WARN"}
    assert slow == {("h0", "h2"), ("h1", "h2"), ("h2", "h3")} and len(conn.pairs) == 6
    consistency = compute_scores(ClusterReport.of(report)).components["performance_consistency"]
    links = next(m for m in consistency.measurements
                 if m.family == "node_links")
    assert links.n == 6 and "h2" in links.slowest and links.points == 40.0


def test_history_regressions_lower_consistency_beside_the_spread() -> None:
    findings = [gemm("h0/gpu0", 75.0), gemm("h0/gpu1", 125.0),  # spread: the full 40
                finding("history.regression", "WARN", "h0/gpu0", "tflops_regression"),
                finding("history.regression", "SKIP", "cluster", "not_measured")]
    perf = component(report_of(findings), "performance_consistency")
    assert perf.score == 50.0 and perf.counts["WARN"] == 1
    assert [(d.check_id, d.family, d.points) for d in perf.deductions] == [
        (None, "gemm", 40.0), ("history.regression", None, 10.0)]
    only_history = component(report_of([finding("history.regression", "FAIL", "h0/gpu0", "x")]),
                             "performance_consistency")
    assert only_history.tested and only_history.score == 40.0 and only_history.measurements == []
    skipped = component(report_of([finding("history.regression", "SKIP", "cluster", "not_measured")]),
                        "performance_consistency")
    assert skipped.score is None


# Praise needs evidence: (findings, component, tested, rating, overall rating). Host checks alone
# do not test the hardware; node-local collectives do not test the network.
_NO_GPU = [finding("gpu.inventory.count", "WARN", code="no_gpus"), finding("gpu.thermal", "SKIP"),
           finding("system.numa", "PASS"), finding("system.limits", "PASS")]


@pytest.mark.parametrize("findings, name, tested, band, overall_band", [
    (_NO_GPU, "hardware_health", False, "INCOMPLETE", "INCOMPLETE"),       # 90 from host checks: no praise
    ([*_NO_GPU[1:], finding("gpu.inventory.count", "PASS", expected=0)],   # --expect-gpus 0: CPU node by choice
     "hardware_health", True, "EXCELLENT", "INCOMPLETE"),                   # ... but no network measured
    ([finding("gpu.inventory.count", "FAIL", code="gpus_missing")], "hardware_health", False, "CRITICAL",
     "CRITICAL"),                                                           # bad news keeps its band
    ([finding("gpu.thermal", "PASS"), finding("nccl.collectives", "PASS")], "network_infrastructure", False, None,
     "INCOMPLETE"),                                                         # two local processes talking
    ([finding("gpu.thermal", "PASS"), finding("nccl.collectives", "WARN")], "network_infrastructure", False,
     "INCOMPLETE", "INCOMPLETE"),
    ([finding("gpu.thermal", "PASS"), finding("network.node_links", "PASS")], "network_infrastructure", True,
     "EXCELLENT", "EXCELLENT"),
    ([finding("gpu.thermal", "PASS"), finding("network.node_links", "SKIP", code="single_node")],
     "network_infrastructure", False, None, "INCOMPLETE"),
    ([finding("gpu.thermal", "PASS"), finding("network.node_links", "ERROR")], "network_infrastructure", False,
     "MODERATE", "MODERATE"),                                              # could not measure is not measured
    ([finding("nvidia_smi.gpu", "PASS"), finding("localize.suspect", "FAIL")], "hardware_health", True,
     "EXCELLENT", "MODERATE"),                                              # judged logs read GPUs too
])
def test_core_components_are_rated_only_on_what_was_measured(
        findings: list[dict[str, Any]], name: str, tested: bool, band: str | None, overall_band: str) -> None:
    scores = compute_scores(ClusterReport.of(report_of(findings)))
    comp = scores.components[name]
    assert comp.tested is tested and comp.rating == band
    assert (comp.reason is None) is tested
    assert scores.overall.rating == overall_band
    missing = {m.component for m in scores.overall.incomplete}
    assert (name in missing) is (not tested)


def test_unlisted_passes_of_a_large_cluster_prove_the_core() -> None:
    report = report_of([])
    report["cluster_summary"]["unlisted"] = {"gpu.ecc.errors": {"PASS": 80000}, "network.node_links": {"PASS": 1}}
    scores = compute_scores(ClusterReport.of(report))
    assert scores.overall.incomplete == []
    assert scores.components["hardware_health"].tested


def test_a_process_that_ran_node_checks_still_scores_and_groups_cluster_ids() -> None:
    """Node runs import only the node checks; the same process reading a cluster report later
    (a server re-rendering a saved report) must still count a cluster check where it belongs."""
    import subprocess
    import sys

    from .conftest import H200_DUMP

    code = ("from gpu_preflight import run_checks\n"
            f"run_checks(replay={str(H200_DUMP)!r}, include=['gpu.*'], environ={{}})\n"
            "import sys\n"
            "assert 'gpu_preflight.checks.cluster_compute' not in sys.modules\n"
            "from gpu_preflight.report.scores import component_of\n"
            "from gpu_preflight.findings.canonical import finding_groups\n"
            "print(component_of('network.node_links'), finding_groups('compute.gemm'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert out.stdout.split(maxsplit=1) == ["network_infrastructure", "('compute',)\n"], out.stderr
