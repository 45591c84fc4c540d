"""The run history: what a run files, regressions at and around their thresholds, repeat-offender
GPUs that moved hosts, the merge into the report, and the trends the CLI prints."""

from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight import build_report
from gpu_preflight.cli import history_cmd
from gpu_preflight.config.history import HistoryConfig
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.history import HistoryStore, add_findings, extract, history_findings
from gpu_preflight.history.trends import trends
from gpu_preflight.model import Finding, Status

from .history_data import REMAP_FAILURE, Gpu, cluster_run, gpus
from .outputs_data import node_with_artifact


def file_run(store: HistoryStore, report: dict[str, Any], cluster: str = "c1") -> int:
    run_id, new = store.record(extract(ClusterReport.of(report)), cluster)
    assert new
    return run_id


def judged(store: HistoryStore, report: dict[str, Any], config: object = None, cluster: str = "c1"
           ) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for f in history_findings(ClusterReport.of(report), store, config or HistoryConfig(), cluster):
        out.setdefault(f.check_id, []).append(f)
    return out


def not_passing(found: dict[str, list[Finding]], check_id: str) -> list[Finding]:
    return [f for f in found.get(check_id, []) if f.status is not Status.PASS]


def cli(*argv: str) -> int:
    """``gpu-preflight history ...`` through the command's own parser and runner."""
    parser = argparse.ArgumentParser()
    history_cmd.add_commands(parser.add_subparsers(dest="command", required=True))
    return history_cmd.run(parser.parse_args(list(argv)))


@pytest.fixture
def store(tmp_path: Path) -> HistoryStore:
    with HistoryStore(tmp_path / "history.sqlite") as s:
        yield s


def test_a_run_files_gpus_by_identity_with_findings_and_measurements(store: HistoryStore) -> None:
    a = gpus("aa")
    a[1].faults = dict(REMAP_FAILURE)
    run_id = file_run(store, cluster_run({"h0": a, "h1": gpus("bb")}, node_fabric={"h1": 430.0}))
    db = store.db
    assert db.execute("SELECT cluster, status, num_nodes, world_size FROM runs").fetchall() == [("c1", "FAIL", 2, 4)]
    assert db.execute("SELECT node, slot, uuid, serial, model FROM gpus WHERE run_id = ? ORDER BY node, slot",
                      (run_id,)).fetchall()[1] == ("h0", "gpu1", a[1].uuid, a[1].serial, "NVIDIA H200")
    failed = db.execute("SELECT check_id, node, slot, uuid, serial FROM findings WHERE status = 'FAIL'").fetchall()
    assert failed == [("gpu.memory.remap", "h0", "gpu1", a[1].uuid, a[1].serial)]
    rows = {(m, s): (v, u) for m, s, v, u in db.execute("SELECT metric, subject, value, uuid FROM measurements")}
    assert rows[("gemm.bf16", "h0/gpu1")] == (700.0, a[1].uuid)
    assert rows[("memory.device_copy", "h1/gpu0")][0] == 4000.0
    assert rows[("busbw.intra_node.all_reduce@2", "h1")] == (430.0, None)  # node-wide: no GPU
    assert rows[("busbw.distributed.all_reduce@4", "cluster")] == (40.0, None)
    assert rows[("temperature", "h0/gpu0")][0] == 31.0
    assert store.record(extract(ClusterReport.of(cluster_run({"h0": gpus("cc")}))), "c1")[1] is True
    assert db.execute("SELECT COUNT(*) FROM runs").fetchone() == (2,)


def test_the_same_report_is_filed_once(store: HistoryStore) -> None:
    report = cluster_run({"h0": gpus("aa")})
    first = file_run(store, report)
    assert store.record(extract(ClusterReport.of(report)), "c1") == (first, False)
    assert len(store.runs()) == 1


def test_first_run_has_nothing_to_compare_with(store: HistoryStore) -> None:
    found = judged(store, cluster_run({"h0": gpus("aa")}))
    assert [(f.status, f.code) for f in found["history.regression"]] == [(Status.SKIP, "no_baseline")]
    assert [(f.status, f.code) for f in found["history.repeat_offender"]] == [(Status.PASS, "ok")]


@pytest.mark.parametrize("delta, flagged", [(0.0, False), (-0.01, True), (+0.01, False)])
def test_gemm_regression_at_five_percent(store: HistoryStore, delta: float, flagged: bool) -> None:
    for _ in range(3):
        file_run(store, cluster_run({"h0": gpus("aa"), "h1": gpus("bb")}))
    at = 700.0 * (1 - 0.05)  # exactly -5 %: not yet a regression
    now = gpus("aa")
    now[1].tflops = at + delta
    found = judged(store, cluster_run({"h0": now, "h1": gpus("bb")}))
    bad = not_passing(found, "history.regression")
    if not flagged:
        assert bad == [] and found["history.regression"][0].code == "ok"
        return
    assert [(f.status, f.subject, f.code) for f in bad] == [(Status.WARN, "h0/gpu1", "tflops_regression")]
    assert "below its own baseline 700 (median of 3)" in bad[0].summary
    assert bad[0].details["uuid"] == now[1].uuid and bad[0].unit == "TFLOP/s"


@pytest.mark.parametrize("delta, flagged", [(0.0, False), (-0.01, True), (+0.01, False)])
def test_node_bandwidth_regression_at_ten_percent(store: HistoryStore, delta: float, flagged: bool) -> None:
    file_run(store, cluster_run({"h0": gpus("aa"), "h1": gpus("bb")}, node_fabric={"h1": 450.0}))
    at = 450.0 * (1 - 0.10)
    found = judged(store, cluster_run({"h0": gpus("aa"), "h1": gpus("bb")}, node_fabric={"h1": at + delta}))
    bad = not_passing(found, "history.regression")
    assert [(f.subject, f.code) for f in bad] == ([("h1", "bandwidth_regression")] if flagged else [])
    if flagged:
        assert "all_reduce bus bandwidth (intra-node, 2 ranks)" in bad[0].summary


def test_cluster_and_memory_bandwidth_regressions_and_configurable_fractions(store: HistoryStore) -> None:
    file_run(store, cluster_run({"h0": gpus("aa")}, world_busbw=40.0))
    slow = gpus("aa")
    slow[0].copy_gbps = 3500.0  # -12.5 %
    report = cluster_run({"h0": slow}, world_busbw=35.0)  # -12.5 %
    found = {(f.subject, f.details["metric"]) for f in not_passing(judged(store, report), "history.regression")}
    assert found == {("h0/gpu0", "memory.device_copy"), ("h0", "busbw.intra_node.all_reduce@2")}
    lenient = HistoryConfig(bandwidth_regression_fraction=0.15)
    assert not_passing(judged(store, report, lenient), "history.regression") == []


def test_the_model_baseline_catches_a_gpu_that_was_always_slow(store: HistoryStore) -> None:
    file_run(store, cluster_run({"h0": gpus("aa"), "h1": gpus("bb")}))
    newcomer = gpus("cc")
    newcomer[0].tflops = 600.0
    alone = cluster_run({"h2": newcomer}, world_busbw=450.0)  # one node: the world group is its NVLink
    found = not_passing(judged(store, alone), "history.regression")
    assert [(f.subject, f.details["metric"]) for f in found] == [("h2/gpu0", "gemm.bf16")]
    assert "below the NVIDIA H200 baseline 700 (median of 4)" in found[0].summary
    assert set(found[0].details["baselines"]) == {"model"}  # the GPU itself has no history yet


def test_a_baseline_needs_enough_earlier_values(store: HistoryStore) -> None:
    file_run(store, cluster_run({"h0": gpus("aa")}))
    slow = gpus("aa", tflops=600.0)
    few = judged(store, cluster_run({"h0": slow}), HistoryConfig(baseline_min_samples=3))
    assert [(f.status, f.code) for f in few["history.regression"]] == [(Status.SKIP, "no_baseline")]
    assert len(not_passing(judged(store, cluster_run({"h0": slow})), "history.regression")) == 2


def test_a_node_only_run_is_filed_and_checked_for_repeat_offenders(store: HistoryStore) -> None:
    bad = build_report([node_with_artifact(nvmlDeviceGetRemappedRows=[0, 2, 0, 1])])
    file_run(store, bad)
    found = judged(store, build_report([node_with_artifact()]))
    assert [(f.status, f.code) for f in found["history.regression"]] == [(Status.SKIP, "not_measured")]
    host = bad["nodes"]["node_0"]["node_info"]["hostname"]
    assert [(f.subject, f.code) for f in not_passing(found, "history.repeat_offender")] == [
        (f"{host}/gpu0", "failed_before")]


def test_cpu_worker_numbers_are_filed_but_never_judged(store: HistoryStore) -> None:
    def cpu_only(report: dict[str, Any]) -> dict[str, Any]:
        for section in report["nodes"].values():
            section["gpu"] = {}  # what a node without GPUs reports: no model, no identity
        return report

    file_run(store, cpu_only(cluster_run({"h0": gpus("aa")})))
    halved = cpu_only(cluster_run({"h0": gpus("aa", tflops=350.0)}, node_fabric={"h0": 200.0}))
    found = judged(store, halved)
    assert [(f.status, f.code) for f in found["history.regression"]] == [(Status.SKIP, "cpu_only")]
    assert [(f.status, f.code) for f in found["history.repeat_offender"]] == [(Status.SKIP, "no_gpu_identity")]
    assert len(trends(store, metric="gemm.*")) == 2


def test_a_gpu_that_failed_before_is_named_after_it_moved_to_another_host(store: HistoryStore) -> None:
    a = gpus("aa")
    a[0].faults = dict(REMAP_FAILURE)
    file_run(store, cluster_run({"h0": a, "h1": gpus("bb")}))
    moved = Gpu(a[0].uuid, a[0].serial)  # reseated in h2, healthy today
    found = judged(store, cluster_run({"h0": gpus("dd"), "h2": [moved, gpus("cc")[1]]}))
    offenders = not_passing(found, "history.repeat_offender")
    assert [(f.status, f.subject, f.code) for f in offenders] == [
        (Status.WARN, "h2/gpu0", "failed_before_elsewhere")]
    assert "gpu.memory.remap FAIL on h0" in offenders[0].summary and "now in h2" in offenders[0].summary
    assert offenders[0].details["hosts"] == ["h0"]


def test_a_gpu_is_recognised_by_serial_alone_and_only_for_its_own_failures(store: HistoryStore) -> None:
    a = gpus("aa")
    a[0].faults = dict(REMAP_FAILURE)
    file_run(store, cluster_run({"h0": a}))
    same_board = Gpu("GPU-ffff0000-0000-0000-0000-000000000000", a[0].serial)  # UUID not read, serial is
    offenders = not_passing(judged(store, cluster_run({"h0": [same_board, a[1]]})), "history.repeat_offender")
    assert [(f.subject, f.code) for f in offenders] == [("h0/gpu0", "failed_before")]


def test_warnings_old_failures_and_host_failures_do_not_make_a_repeat_offender(store: HistoryStore) -> None:
    a = gpus("aa")
    a[0].faults = {"nvmlDeviceGetRemappedRows": [0, 2, 1, 0]}  # remap pending: a WARN
    a[1].faults = dict(REMAP_FAILURE)
    file_run(store, cluster_run({"h0": a}))
    today = cluster_run({"h0": gpus("aa")})
    assert [f.subject for f in not_passing(judged(store, today), "history.repeat_offender")] == ["h0/gpu1"]
    assert not_passing(judged(store, today, HistoryConfig(repeat_offender_window_days=0)),
                       "history.repeat_offender") == []
    assert len(not_passing(judged(store, today, HistoryConfig(repeat_offender_statuses=["FAIL", "WARN"])),
                           "history.repeat_offender")) == 2
    assert not_passing(judged(store, today, HistoryConfig(repeat_offender_checks=["compute.*"])),
                       "history.repeat_offender") == []


def test_a_report_already_in_the_history_is_judged_against_earlier_runs_only(store: HistoryStore) -> None:
    file_run(store, cluster_run({"h0": gpus("aa")}))
    slow = cluster_run({"h0": gpus("aa", tflops=600.0)})
    file_run(store, slow)
    file_run(store, cluster_run({"h0": gpus("aa", tflops=100.0)}))  # later runs must not count
    found = not_passing(judged(store, slow), "history.regression")
    assert {f.details["baselines"]["own"]["median"] for f in found} == {700.0}


def test_history_findings_merge_into_the_report_and_its_verdict(store: HistoryStore) -> None:
    file_run(store, cluster_run({"h0": gpus("aa"), "h1": gpus("bb")}))
    report = cluster_run({"h0": gpus("aa"), "h1": gpus("bb", tflops=650.0)})  # -7 %: above the profile's floor
    assert report["cluster_summary"]["overall_status"] == "PASS"
    typed = ClusterReport.of(report)
    merged = add_findings(typed, history_findings(typed, store, HistoryConfig(), "c1"))
    summary = merged.cluster_summary
    assert summary.overall_status is Status.WARN and summary.exit_code == 1
    mine = [f for f in merged.findings if f.check_id == "history.regression"]
    assert {(f.node, f.subject) for f in mine} == {("node_1", "h1/gpu0"), ("node_1", "h1/gpu1")}
    assert any("history.regression" in issue for issue in summary.issues)
    assert "history.regression" in {c.check_id for c in merged.cluster_checks}
    assert summary.counts["WARN"] == sum(f.status is Status.WARN for f in merged.findings)


def test_trends_follow_a_gpu_across_hosts(store: HistoryStore, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    a = gpus("aa")
    for host, tflops in (("h0", 700.0), ("h0", 690.0), ("h5", 600.0)):
        a[0].tflops = tflops
        file_run(store, cluster_run({host: a}))
    series = trends(store, gpu=a[0].uuid, metric="gemm.*")
    assert len(series) == 1 and series[0].values == [700.0, 690.0, 600.0] and series[0].subject == "h5/gpu0"
    assert series[0].change == pytest.approx((600.0 - 695.0) / 695.0)
    db = str(tmp_path / "history.sqlite")
    assert cli("history", "trends", "--db", db, "--gpu", a[0].uuid[:12], "--metric", "gemm.*") == 0
    out = capsys.readouterr().out
    assert "h5/gpu0" in out and "-13.7%" in out and "█" in out and "▁" in out
    assert cli("history", "--db", db, "trends", "--node", "h0", "--metric", "busbw.*", "--format", "json") == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["metric"], [p["value"] for p in r["points"]]) for r in rows] == [
        ("busbw.intra_node.all_reduce@2", [40.0, 40.0])]  # one node: its world group is node-local
    assert cli("history", "gpu", a[0].serial, "--db", db) == 0
    out = capsys.readouterr().out
    assert "3 run(s) on 2 host(s): h0, h5" in out
    assert cli("history", "--db", db) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 4  # header + 3 runs


def test_cli_import_check_and_prune(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "h.sqlite")
    good, slow = tmp_path / "good.json", tmp_path / "slow.json"
    good.write_text(json.dumps(cluster_run({"h0": gpus("aa")})))
    slow.write_text(json.dumps(cluster_run({"h0": gpus("aa", tflops=600.0)})))
    assert cli("history", "check", str(slow), "--db", db) == 0  # no history: nothing to judge
    assert cli("history", "import", str(good), str(good), "--db", db, "--cluster-name", "c9") == 0
    assert "already filed" in capsys.readouterr().err
    assert cli("history", "check", str(slow), "--db", db, "--cluster-name", "c9") == 1
    assert "history.regression" in capsys.readouterr().out
    assert cli("history", "runs", "--db", db, "--format", "json") == 0
    assert [r["cluster"] for r in json.loads(capsys.readouterr().out)] == ["c9"]
    assert cli("history", "prune", "--older-than-days", "0", "--db", db) == 0
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM measurements").fetchone() == (0,)  # cascades
    assert cli("history", "runs", "--db", str(tmp_path / "missing.sqlite")) == 3
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert cli("history", "import", str(bad), "--db", db) == 3


def test_extract_reads_the_typed_report_as_its_dict_and_refuses_one_without_a_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpu_preflight.findings.model import ClusterReport

    report = cluster_run({"h0": gpus("aa"), "h1": gpus("bb", tflops=600.0)})
    assert extract(ClusterReport.from_dict(report)).gpus
    del report["cluster_summary"]
    unjudged = tmp_path / "unjudged.json"
    unjudged.write_text(json.dumps(report))
    assert cli("history", "import", str(unjudged), "--db", str(tmp_path / "h.sqlite")) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "not a gpu-preflight report (Object missing required field `cluster_summary`)" in err


def test_history_findings_merge_into_the_typed_report_as_a_new_value(store: HistoryStore) -> None:

    from gpu_preflight.findings.model import ClusterReport

    file_run(store, cluster_run({"h0": gpus("aa"), "h1": gpus("bb")}))
    report = cluster_run({"h0": gpus("aa"), "h1": gpus("bb", tflops=650.0)})
    found = history_findings(ClusterReport.of(report), store, HistoryConfig(), "c1")
    typed = ClusterReport.from_dict(report)
    later = add_findings(typed, found)
    assert typed.cluster_summary.overall_status.value == "PASS"  # the first value is unchanged
    assert later.cluster_summary.overall_status.value == "WARN"
    assert ClusterReport.from_dict(later.to_dict()) == later  # written and read back, the same report
