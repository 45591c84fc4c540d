"""The health assessment: readiness follows the verdict, trends at their boundaries, targets,
stability, issues, the schedule from config, node specs, scores kept in the history, and the
HTML sections saying what the JSON says."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from msgspec.structs import replace

from gpu_preflight.config import build_config
from gpu_preflight.config.loader import ConfigError
from gpu_preflight.config.report_schema import ReportConfig
from gpu_preflight.findings.canonical import verdict_of
from gpu_preflight.findings.model import (
    ClusterReport,
    ComponentScore,
    EarlierScore,
    HealthScores,
    OverallScore,
    Readiness,
    ReadinessLevels,
    Recommendation,
    ScoreDeduction,
    ScoreMeasurement,
    ScoreSettings,
)
from gpu_preflight.history import HistoryStore, extract
from gpu_preflight.model import Status
from gpu_preflight.report.advice import recommendations_by_urgency
from gpu_preflight.report.assessment import (
    CAVEATS,
    NEEDS_FIXES,
    READY,
    issues,
    node_specs,
    readiness,
    schedule,
    stability,
    targets,
    trends,
)
from gpu_preflight.report.html import render_html
from gpu_preflight.report.html_assessment import assessment_sections
from gpu_preflight.report.scores import compute_scores

from .test_cli import cli
from .test_markdown_golden import REPORT
from .test_scores import finding, report_of

GPU, LINK = finding("gpu.thermal", "PASS", "h0/gpu0", "ok"), finding("network.node_links", "PASS", "h1", "ok")


def ready_of(findings: list[dict[str, Any]], fail_on: str = "fail") -> tuple[str, str, ReadinessLevels]:
    report = report_of(findings, fail_on)
    scores = compute_scores(ClusterReport.of(report))
    out = readiness(ClusterReport.of(report), scores, recommendations_by_urgency(ClusterReport.of(report), scores))
    return out.development.status, out.production.status, out


@pytest.mark.parametrize("findings, fail_on, dev, prod, says", [
    ([GPU, LINK], "fail", READY, READY, "[RESULT] SUCCESS"),
    ([GPU], "fail", READY, CAVEATS, "not tested: no link between two nodes was measured"),
    ([finding("system.limits", "PASS")], "fail", CAVEATS, CAVEATS, "not tested: no GPU was read"),
    ([GPU, LINK, finding("gpu.thermal", "WARN", "h0/gpu1", "hot")], "fail", CAVEATS, CAVEATS, "[RESULT] WARNING"),
    ([GPU, LINK, finding("gpu.thermal", "WARN", "h0/gpu1", "hot")], "warn", CAVEATS, NEEDS_FIXES,
     "[RESULT] FAILURE: [gpu.thermal]"),
    ([GPU, LINK, finding("gpu.ecc.errors", "FAIL", "h0/gpu1", "dbe")], "fail", NEEDS_FIXES, NEEDS_FIXES,
     "[RESULT] FAILURE: [gpu.ecc.errors]"),
    ([GPU, LINK, finding("stack.cuda", "ERROR", "h0", "cuda_init_failed")], "fail", NEEDS_FIXES, NEEDS_FIXES,
     "[RESULT] ERROR: [stack.cuda]"),
    # no usable GPU, not declared CPU-only: only a WARN for the host, but no GPU job can start there
    ([finding("gpu.inventory.count", "WARN", "h0", "no_gpus"), finding("system.limits", "PASS")], "fail",
     NEEDS_FIXES, NEEDS_FIXES, "gpu.inventory.count: "),
    ([finding("gpu.inventory.count", "PASS", "h0", "ok", expected=0), LINK], "fail", READY, READY,
     "[RESULT] SUCCESS"),
])
def test_readiness_follows_the_verdict(findings: list[dict[str, Any]], fail_on: str, dev: str, prod: str,
                                       says: str) -> None:
    got_dev, got_prod, out = ready_of(findings, fail_on)
    assert (got_dev, got_prod) == (dev, prod)
    assert any(says in r for r in out.production.reasons)


@pytest.mark.parametrize("status", [s.value for s in Status if s is not Status.SKIP])
@pytest.mark.parametrize("fail_on", ["fail", "warn", "error"])
def test_ready_is_impossible_when_the_verdict_gates(status: str, fail_on: str) -> None:
    report = report_of([GPU, LINK, finding("gpu.clocks", status, "h0/gpu1", "x")], fail_on)
    _, prod, _ = ready_of(report["findings"], fail_on)
    gates = verdict_of(ClusterReport.of(report)).exit_code >= 2
    assert (prod == NEEDS_FIXES) == gates and (prod == READY) == (status == "PASS")


def _scores(**components: float | None) -> HealthScores:
    """Scores of these components (and none overall), with the default settings but no weights."""
    cfg = ReportConfig()
    settings = ScoreSettings(fail_points=cfg.fail_points, error_points=cfg.error_points, warn_points=cfg.warn_points,
                             repeat_fraction=cfg.repeat_fraction, repeat_max_multiple=cfg.repeat_max_multiple,
                             consistency_ok=cfg.consistency_ok, consistency_bad=cfg.consistency_bad,
                             consistency_max_points=cfg.consistency_max_points, bands={}, weights={})
    return HealthScores(
        overall=OverallScore(score=None, rating=None, cap=None, components_counted=[]),
        components={c: ComponentScore(title=c, score=s, rating=None, tested=s is not None, counts={}, deductions=[],
                                      reason=None) for c, s in components.items()},
        connectivity=None, settings=settings, formula="")


@pytest.mark.parametrize("now, trend", [(94.9, "STABLE"), (95.0, "IMPROVING"), (85.1, "STABLE"), (85.0, "DEGRADING"),
                                        (None, "not tested")])
def test_trend_against_the_median_of_earlier_runs_at_its_boundary(now: float | None, trend: str) -> None:
    earlier = [EarlierScore(run=run, timestamp="t", components={"hardware_health": s})
               for run, s in enumerate((10.0, 90.0, 88.0, 92.0))]  # last 3: median 90
    got = trends(_scores(hardware_health=now), earlier, ReportConfig(trend_runs=3))["hardware_health"]
    assert got.trend == trend
    if now is not None:
        assert got.baseline == 90.0 and got.runs == 3


def test_first_run_no_history_and_no_earlier_score() -> None:
    cfg = ReportConfig()
    assert trends(_scores(hardware_health=90.0), [], cfg)["hardware_health"].trend == "first run"
    assert trends(_scores(hardware_health=90.0), None, cfg)["hardware_health"].trend == "no history"
    older = [EarlierScore(run=1, timestamp="t", components={})]  # filed before the history kept scores
    assert trends(_scores(hardware_health=90.0), older, cfg)["hardware_health"].trend == "no earlier score"


def test_targets_reach_the_setting_and_never_lower_a_score() -> None:
    scores = _scores(network_infrastructure=33.0, hardware_health=95.0, software_stack=None)
    network = replace(scores.components["network_infrastructure"],
                      deductions=[ScoreDeduction(check_id="network.node_links", points=67)])
    scores = replace(scores, components={**scores.components, "network_infrastructure": network})
    got = targets(scores, ReportConfig(target_score=85.0, target_days=14))
    rows = {r.component: r for r in got.components}
    assert (rows["network_infrastructure"].target, rows["network_infrastructure"].change) == (85.0, 52.0)
    assert rows["network_infrastructure"].by == ["network.node_links"]
    assert (rows["hardware_health"].target, rows["hardware_health"].by) == (95.0, [])
    assert rows["software_stack"].target is None and got.days == 14
    assert got.overall.target == 90.0  # mean of 85 and 95; the untested component does not count


def test_stability_states_std_dev_and_latency_spread() -> None:
    gemm = ScoreMeasurement(family="gemm", series="bf16 GEMM TFLOP/s across GPUs", slowest="h1/gpu0", n=4, mean=600.0,
                            median=600.0, min=500.0, max=700.0, cv=0.1, straggler_gap=0.17, spread=0.29,
                            dispersion=0.17, points=10.0, counted=True)
    scores = _scores(performance_consistency=90.0)
    perf = replace(scores.components["performance_consistency"], measurements=[gemm])
    rows = stability(replace(scores, components={"performance_consistency": perf}),
                     [{"a": "h0", "b": "h1", "latency_us": 30.0}, {"a": "h2", "b": "h3", "latency_us": 50.0}])
    assert (rows[0].std_dev, rows[0].unit) == (60.0, "TFLOP/s")
    assert (rows[1].mean, rows[1].std_dev, rows[1].slowest, rows[1].counted) == (40.0, 10.0, "h2<->h3", False)


def test_issues_have_priority_and_impact() -> None:
    def entry(check_id: str, component: str, status: Status, subject: str) -> Recommendation:
        return Recommendation(check_id=check_id, code="c", component=component, status=status, recommendation="r",
                              subjects=[subject], count=1, summary="s")

    recs = {"immediate": [entry("stack.cuda", "software_stack", Status.ERROR, "h0")],
            "short_term": [entry("gpu.busy", "resource_management", Status.WARN, "h0/gpu0")],
            "monitoring": [entry("workloads", "service_reliability", Status.SKIP, "h0")]}
    got = issues(recs)
    assert [(i.priority, i.status) for i in got] == [("HIGH", "ERROR"), ("MEDIUM", "WARN")]
    assert got[0].impact.startswith("not measured") and "GPUs" in got[1].impact


@pytest.mark.parametrize("prod, days, date", [(READY, 7.0, "2026-11-27"), (CAVEATS, 7.0, "2026-11-27"),
                                              (NEEDS_FIXES, 2.0, "2026-11-22")])
def test_next_assessment_from_config(prod: str, days: float, date: str) -> None:
    report = msgspec.structs.replace(ClusterReport.of(report_of([])), timestamp="2026-11-20T06:00:00+00:00")
    got = schedule(ClusterReport.of(report), _ready(prod), ReportConfig())
    assert (got.days, got.next_assessment) == (days, date)
    longer = schedule(ClusterReport.of(report), _ready(READY), ReportConfig(assessment_interval_days=14))
    assert longer.next_assessment == "2026-12-04" and any(i.when == "every 14 days" for i in longer.items)
    undated = msgspec.structs.replace(ClusterReport.of(report_of([])), timestamp="?")
    assert schedule(undated, _ready(READY), ReportConfig()).next_assessment is None


def _ready(production: str) -> ReadinessLevels:
    return ReadinessLevels(development=Readiness(status=READY, reasons=[]),
                           production=Readiness(status=production, reasons=[]))


@pytest.mark.parametrize("setting", ["report.assessment_interval_days=0", "report.reassess_after_fixes_days=-1",
                                     "report.target_score=101", "report.trend_runs=0", "report.trend_points=nan"])
def test_assessment_settings_have_ranges(setting: str) -> None:
    with pytest.raises(ConfigError, match="must be"):
        build_config(overrides=[setting])


def stored() -> dict[str, Any]:
    report: dict[str, Any] = json.loads(REPORT.read_text(encoding="utf-8"))
    return report


def test_node_specs_per_node_up_to_detail_max_nodes() -> None:
    report = stored()
    specs = node_specs(ClusterReport.of(report), ReportConfig())
    assert (specs["total_nodes"], specs["total_gpus"], specs["listed"]) == (4, 4, True)
    rows = {n["node"]: n for n in specs["nodes"]}
    assert rows["h0"]["score"] == 100.0 and rows["h0"]["worst"] == "PASS"
    assert rows["h3"]["worst"] == "FAIL" and rows["h3"]["score"] < rows["h2"]["score"] < 100
    assert rows["h2"]["gpu_memory_gb"] == pytest.approx(140.4, abs=0.1)
    big = node_specs(ClusterReport.of(report), ReportConfig(detail_max_nodes=3))
    assert not big["listed"] and big["nodes"] == [] and big["total_gpus"] == 4


def test_html_shows_the_same_assessment_as_the_json() -> None:
    report = stored()
    page = render_html(ClusterReport.of(report))
    a = report["cluster_summary"]["assessment"]
    for level in ("development", "production"):
        card = re.search(rf'id="readiness-{level}">.*?class="rating"[^>]*>([^<]+)<', page)
        assert card and card.group(1) == a["readiness"][level]["status"]
    for section in ("assessment", "node-specs", "latency", "stability", "issues"):
        assert f'<section id="{section}">' in page
    assert f"<b>Next assessment:</b> {a['schedule']['next_assessment']}" in page
    issue_rows = re.findall(r'<tr><td>(HIGH|MEDIUM)</td><td><span class="st"[^>]*>(\w+)</span></td><td>([^<]+)</td>',
                            page)
    assert issue_rows == [(i["priority"], i["status"], i["check_id"]) for i in a["issues"]]


def test_html_sections_stay_small_at_ten_thousand_nodes() -> None:
    report = stored()
    section = report["nodes"]["node_0"]
    report["nodes"] = {f"node_{i}": {**section, "node_info": {"hostname": f"n{i}"}} for i in range(10_000)}
    typed = ClusterReport.of(report)
    scores, recs = typed.cluster_summary.health_scores, typed.cluster_summary.recommendations_by_urgency
    assert scores is not None and recs is not None
    # its time: bench/bench_end_of_run.py
    html = assessment_sections(typed, scores, recs, ReportConfig())
    assert len(html) < 40_000 and "10,000 node(s), 10,000 GPU(s)" in html


def test_history_keeps_each_runs_scores_for_the_trend(tmp_path: Path) -> None:
    report = stored()
    with HistoryStore(tmp_path / "h.sqlite") as store:
        now = datetime(2026, 12, 1, tzinfo=UTC)  # a fixed clock after both runs: the test reads no calendar
        first, _ = store.record(extract(ClusterReport.of(report)), "c1", now=now)
        again = dict(report, timestamp="2026-11-21T06:00:00+00:00")
        second, _ = store.record(extract(ClusterReport.of(again)), "c1", now=now)
        got = store.earlier_scores("c1", 5)
        assert [e.run for e in got] == [first, second]
        assert [e.timestamp for e in got] == [report["timestamp"], "2026-11-21T06:00:00+00:00"]
        assert got[0].components["overall"] == report["cluster_summary"]["health_scores"]["overall"]["score"]
        assert got[0].components["network_infrastructure"] == 30.0
        assert [e.run for e in store.earlier_scores("c1", 5, before=second)] == [first]
        assert store.earlier_scores("other", 5) == []
        store.db.execute("DROP TABLE scores")  # a database from before the history kept scores
        store.db.commit()
    with HistoryStore(tmp_path / "h.sqlite", readonly=True) as old:
        assert [e.components for e in old.earlier_scores("c1", 5)] == [{}, {}]


def test_a_second_run_reads_its_trend_from_the_history(tmp_path: Path) -> None:
    from .conftest import H200_DUMP

    base = ["run", "--replay", str(H200_DUMP), "--check", "gpu.*", "--format", "md"]
    args = [*base, "--history", "--history-db", str(tmp_path / "h.sqlite")]
    first = cli(*args)
    assert first.returncode == 0 and "| Hardware health | 100/100 | EXCELLENT | first run |" in first.stdout
    second = cli(*args)
    assert "| Hardware health | 100/100 | EXCELLENT | STABLE (+0 vs 100, 1 run(s)) |" in second.stdout
    off = cli(*base, "--no-history")
    assert "| Hardware health | 100/100 | EXCELLENT | no history |" in off.stdout
