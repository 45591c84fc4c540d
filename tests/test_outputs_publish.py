"""``annotate`` and ``publish`` as emit() calls them: SageMaker's output directory, the history on
and off, bad stores that must not stop a run, and the ``--output`` flag's validation."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpu_preflight.config.history import HistoryConfig
from gpu_preflight.config.outputs import OutputsConfig
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.history import HistoryStore
from gpu_preflight.outputs import add_output_arguments
from gpu_preflight.outputs.publish import HistoryNotes, annotate, publish

from .history_data import cluster_run, gpus
from .outputs_data import NVRM, run_args, written_report


def sagemaker_env(tmp_path: Path) -> dict[str, str]:
    ml = tmp_path / "opt" / "ml"
    for d in ("model", "output/data"):
        (ml / d).mkdir(parents=True)
    return {"SM_MODEL_DIR": str(ml / "model"), "SM_OUTPUT_DATA_DIR": str(ml / "output" / "data"),
            "SM_OUTPUT_DIR": str(ml / "output"), "TRAINING_JOB_NAME": "preflight-1"}


def quiet() -> SimpleNamespace:
    return SimpleNamespace(history=HistoryConfig(enabled=False), outputs=OutputsConfig())


def test_in_a_sagemaker_job_the_report_lands_in_the_uploaded_output_dir(tmp_path: Path) -> None:
    env = sagemaker_env(tmp_path)
    w = written_report(tmp_path / "out", nvmlDeviceGetRemappedRows=[0, 2, 0, 1])  # a failing node
    (result,) = publish(ClusterReport.of(w.report), run_args(report_dir=w.directory), [w.node], config=quiet(),
                        environ=env)
    assert result.ok and "output.tar.gz" in result.detail
    metrics = Path(env["SM_OUTPUT_DATA_DIR"]) / "metrics"
    assert json.loads((metrics / "health_check_metrics.json").read_text()) == json.loads(
        (w.directory / "report.json").read_text())
    assert (metrics / "report.html").is_file()
    assert (metrics / "artifacts" / "node_0" / "kernel_log_nvrm.txt").read_text() == NVRM
    assert not (metrics / "artifacts" / "node_0" / "stale-from-an-earlier-run.txt").exists()
    assert list(Path(env["SM_MODEL_DIR"]).iterdir()) == []  # model.tar.gz stays the model's
    assert not (Path(env["SM_OUTPUT_DIR"]) / "failure").exists()  # the entry script's, by its policy


def test_a_report_dir_sagemaker_already_uploads_is_not_copied_and_it_can_be_turned_off(tmp_path: Path) -> None:
    env = sagemaker_env(tmp_path)
    w = written_report(Path(env["SM_MODEL_DIR"]))  # as the SageMaker entry script runs it
    (result,) = publish(ClusterReport.of(w.report), run_args(report_dir=w.directory), [w.node], config=quiet(),
                        environ=env)
    assert result.ok and "already uploaded" in result.detail
    assert list(Path(env["SM_OUTPUT_DATA_DIR"]).iterdir()) == []
    report = cluster_run({"h0": gpus("aa")})
    # no --report-dir: a temporary bundle
    publish(ClusterReport.of(report), run_args(), [], config=quiet(), environ=env)
    assert (Path(env["SM_OUTPUT_DATA_DIR"]) / "metrics" / "health_check_metrics.json").is_file()
    off = SimpleNamespace(history=HistoryConfig(enabled=False), outputs=OutputsConfig(sagemaker=False))
    other = sagemaker_env(tmp_path / "second")
    assert publish(ClusterReport.of(report), run_args(), [], config=off, environ=other) == []
    assert list(Path(other["SM_OUTPUT_DATA_DIR"]).iterdir()) == []


def test_history_is_filed_then_consulted_by_the_next_run(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    args = run_args("--history-db", str(db), "--cluster-name", "c7")
    first = cluster_run({"h0": gpus("aa")})
    assert annotate(ClusterReport.of(first), args, config=SimpleNamespace(),
                    environ={}) == HistoryNotes(earlier_scores=())  # first
    assert not db.exists()
    (result,) = publish(ClusterReport.of(first), args, [], config=SimpleNamespace(), environ={})
    assert result.ok and "run #1 recorded" in result.detail and "cluster c7" in result.detail
    second = cluster_run({"h0": gpus("aa", tflops=640.0)})
    before = json.dumps(second)
    notes = annotate(ClusterReport.of(second), args, config=SimpleNamespace(), environ={})
    assert json.dumps(second) == before  # a value: the report it judged is not changed
    assert {f.check_id for f in notes.findings if f.status.value == "WARN"} == {"history.regression"}
    assert [e.components["overall"] for e in notes.earlier_scores or ()] == [
        first["cluster_summary"]["health_scores"]["overall"]["score"]]
    judged = notes.applied(ClusterReport.from_dict(second))
    assert judged.cluster_summary.overall_status.value == "WARN"
    assert judged.cluster_summary.earlier_scores == list(notes.earlier_scores or ())
    # judged once
    assert annotate(ClusterReport.of(judged), args, config=SimpleNamespace(), environ={}) == HistoryNotes()
    publish(ClusterReport.of(judged), args, [], config=SimpleNamespace(), environ={})
    with HistoryStore(db) as store:
        runs = store.runs()
        assert [(r.cluster, r.status) for r in runs] == [("c7", "PASS"), ("c7", "WARN")]
        assert store.db.execute("SELECT COUNT(*) FROM findings WHERE check_id = 'history.regression' "
                                "AND status = 'WARN'").fetchone() == (2,)


def test_history_off_for_replays_unless_asked_and_with_no_history(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    report = cluster_run({"h0": gpus("aa")})
    replay = run_args("--history-db", str(db))
    assert publish(ClusterReport.of(report), replay, [], config=SimpleNamespace(), replayed=True, environ={}) == []
    assert publish(ClusterReport.of(report), run_args("--no-history", "--history-db", str(db)), [],
                   config=SimpleNamespace(),
                   environ={}) == []
    asked = run_args("--history", "--history-db", str(db))
    assert publish(ClusterReport.of(report), asked, [], config=SimpleNamespace(), replayed=True, environ={})[0].ok
    env = {"GPU_PREFLIGHT_HISTORY": str(tmp_path / "env.sqlite")}
    assert publish(ClusterReport.of(report), run_args(), [], config=SimpleNamespace(), environ=env)[0].ok
    assert (tmp_path / "env.sqlite").is_file()


def test_a_broken_history_store_never_stops_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "history.sqlite"
    db.write_text("this is not a database")
    report = cluster_run({"h0": gpus("aa")})
    args = run_args("--history-db", str(db))
    assert annotate(ClusterReport.of(report), args, config=SimpleNamespace(), environ={}) == HistoryNotes()
    assert "history not consulted" in capsys.readouterr().err
    (result,) = publish(ClusterReport.of(report), args, [], config=SimpleNamespace(), environ={})
    assert not result.ok and "DatabaseError" in result.detail
    assert "could not publish to history" in capsys.readouterr().err
    assert report["cluster_summary"]["overall_status"] == "PASS"


def test_output_urls_are_checked_when_the_command_line_is_parsed(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_output_arguments(parser)
    assert parser.parse_args(["--output", "s3://b/p/", "--output", "mlflow"]).output == ["s3://b/p/", "mlflow"]
    for bad in ("ftp://host/x", "s3:///nobucket", "mlflow+"):
        with pytest.raises(SystemExit) as exc:
            parser.parse_args(["--output", bad])
        assert exc.value.code == 2
    assert "unsupported output 'ftp://host/x'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args(["--history", "--no-history"])


def test_a_locked_history_delays_the_verdict_by_its_lock_timeout_only(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Another process holds the database exclusively (a stuck writer): both the comparison and the filing
    give up after ``history.lock_timeout_s`` (they waited 30 s each before)."""
    import subprocess
    import sys
    import time

    db = tmp_path / "history.sqlite"
    args = run_args("--history-db", str(db))
    first = cluster_run({"h0": gpus("aa")})
    assert publish(ClusterReport.of(first), args, [], config=SimpleNamespace(), environ={})[0].ok
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys, time\n"
         f"db = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
         "db.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        config = SimpleNamespace(history=HistoryConfig(lock_timeout_s=0.5), outputs=OutputsConfig())
        second = cluster_run({"h0": gpus("aa", tflops=640.0)})
        started = time.monotonic()
        assert annotate(ClusterReport.of(second), args, config=config, environ={}) == HistoryNotes()
        (result,) = publish(ClusterReport.of(second), args, [], config=config, environ={})
        elapsed = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    assert not result.ok and "database is locked" in result.detail
    assert "history not consulted" in capsys.readouterr().err
    assert 0.9 < elapsed < 4, elapsed  # two waits of 0.5 s, not 2 x 30 s
