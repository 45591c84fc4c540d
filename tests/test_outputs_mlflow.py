"""MLflow logging against a real sqlite-backed tracking store (MLflow's file store is in maintenance
mode and refuses to start; sqlite is what a small site runs)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpu_preflight.config.history import HistoryConfig
from gpu_preflight.config.outputs import OutputsConfig
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.outputs.mlflow import metric_key
from gpu_preflight.outputs.publish import publish

from .history_data import cluster_run, gpus
from .outputs_data import NVRM, run_args, written_report


def settings(tmp_path: Path, timeout_s: float = 120.0) -> SimpleNamespace:
    """A generous upload deadline by default: importing mlflow alone takes ~9 s on the loaded 2-core CI VM."""
    return SimpleNamespace(history=HistoryConfig(enabled=False),
                           outputs=OutputsConfig(mlflow_experiment="preflight-test", timeout_s=timeout_s,
                                                 mlflow_artifact_location=(tmp_path / "artifacts").as_uri()))


def client(uri: str) -> object:
    try:
        from mlflow import MlflowClient
    except ImportError:
        pytest.fail("mlflow is not installed: pip install 'gpu-preflight[mlflow]' sqlalchemy alembic (test extra)")
    return MlflowClient(tracking_uri=uri)


def test_a_failing_node_run_lands_with_params_metrics_tags_and_artifacts(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    w = written_report(tmp_path / "out", nvmlDeviceGetRemappedRows=[0, 2, 0, 1])
    results = publish(ClusterReport.of(w.report), run_args("--mlflow-uri", uri, report_dir=w.directory), [w.node],
                      config=settings(tmp_path), environ={})
    assert len(results) == 1 and results[0].ok, results[0].detail
    c = client(uri)
    experiment = c.get_experiment_by_name("preflight-test")  # type: ignore[attr-defined]
    (run,) = c.search_runs([experiment.experiment_id])  # type: ignore[attr-defined]
    assert run.info.run_id in results[0].detail and run.info.status == "FAILED"  # the preflight failed
    assert run.data.tags["gpu_preflight.verdict"] == "FAIL" and "gpu.memory.remap" in run.data.tags[
        "gpu_preflight.issues"]
    assert run.data.params["gpu_models"] == "NVIDIA H200" and run.data.params["cluster"] == "default"
    assert run.data.params["driver_versions"] == "580.159.04" and run.data.params["nodes"] == "1"
    assert run.data.metrics["exit_code"] == 2.0 and run.data.metrics["findings.fail"] == 1.0
    host = w.report["nodes"]["node_0"]["node_info"]["hostname"].replace(":", "_")  # the replayed node's name
    assert run.data.metrics[f"temperature/{host}/gpu0"] == 31.0
    names = {a.path for a in c.list_artifacts(run.info.run_id)}  # type: ignore[attr-defined]
    assert names == {"report.json", "report.html", "artifacts"}
    local = Path(c.download_artifacts(run.info.run_id, "report.json", str(tmp_path / "dl")))  # type: ignore[attr-defined]
    assert json.loads(local.read_text()) == json.loads((w.directory / "report.json").read_text())
    nvrm = c.download_artifacts(run.info.run_id, "artifacts/node_0/kernel_log_nvrm.txt",  # type: ignore[attr-defined]
                                str(tmp_path / "dl2"))
    assert Path(nvrm).read_text() == NVRM


def test_a_cluster_run_logs_per_gpu_numbers_and_finishes(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    report = cluster_run({"h0": gpus("aa"), "h1": gpus("bb", tflops=690.0)})
    results = publish(ClusterReport.of(report), run_args("--output", f"mlflow+{uri}"), [], config=settings(tmp_path),
                      environ={"SLURM_CLUSTER_NAME": "tokyo"})
    assert results[0].ok, results[0].detail
    c = client(uri)
    (run,) = c.search_runs([c.get_experiment_by_name("preflight-test").experiment_id])  # type: ignore[attr-defined]
    assert run.info.status == "FINISHED" and run.data.params["cluster"] == "tokyo"
    metrics = run.data.metrics
    assert metrics["gemm.bf16/h1/gpu1"] == 690.0 and metrics["gemm_bf16_tflops_min"] == 690.0
    assert metrics["busbw.intra_node.all_reduce.ranks2/h0"] == 450.0
    assert metrics["busbw.distributed.all_reduce.ranks4/cluster"] == 40.0
    assert run.data.params["world_size"] == "4" and run.data.params["launcher"] == "torchrun"


def test_an_unreachable_tracking_server_fails_fast_and_is_reported_not_raised(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    report = cluster_run({"h0": gpus("aa")})
    started = time.monotonic()
    results = publish(ClusterReport.of(report), run_args("--output", f"mlflow+http://127.0.0.1:{port}"), [],
                      config=settings(tmp_path), environ={})
    assert not results[0].ok and "unreachable" in results[0].detail
    assert time.monotonic() - started < 30  # not MLflow's minutes of retries


@pytest.mark.parametrize("raw, key", [("gemm.bf16/h0/gpu1", "gemm.bf16/h0/gpu1"), ("temperature/vm#1/gpu0",
                                      "temperature/vm_1/gpu0"), ("a//b", "a/b"), ("/x/../y", "y")])
def test_metric_keys_are_ones_mlflow_accepts(raw: str, key: str) -> None:
    assert metric_key(raw) == key


def test_mlflow_without_a_tracking_uri_is_an_error_and_creates_nothing(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    report = cluster_run({"h0": gpus("aa")})
    (result,) = publish(ClusterReport.of(report), run_args("--output", "mlflow"), [], config=settings(tmp_path),
                        environ={})
    assert not result.ok and "no MLflow tracking URI" in result.detail and "MLFLOW_TRACKING_URI" in result.detail
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no ./mlflow.db, no ./mlruns
    (result,) = publish(ClusterReport.of(report), run_args("--output", "mlflow"), [], config=settings(tmp_path),
                        environ={"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'env.db'}"})
    assert result.ok, result.detail
    assert (tmp_path / "env.db").is_file()


def test_a_store_that_cannot_be_created_fails_at_once(tmp_path: Path) -> None:
    report = cluster_run({"h0": gpus("aa")})
    started = time.monotonic()
    (result,) = publish(ClusterReport.of(report), run_args("--output",
                                                           f"mlflow+sqlite:///{tmp_path / 'missing' / 'm.db'}"), [],
                        config=settings(tmp_path), environ={})
    assert not result.ok and "does not exist" in result.detail
    assert time.monotonic() - started < 30  # MLflow alone retries for about 100 s


def test_a_read_only_store_fails_at_once(tmp_path: Path) -> None:
    """A read-only filesystem (a bind mount remounted ro): MLflow alone retries for ~100 s."""
    import subprocess

    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "--bind", str(ro), str(ro)], capture_output=True).returncode != 0:
        pytest.skip("mount --bind not permitted here (needs root in a mount namespace that allows it)")
    try:
        if subprocess.run(["mount", "-o", "remount,ro,bind", str(ro)], capture_output=True).returncode != 0:
            pytest.skip("remounting read-only not permitted here")
        report = cluster_run({"h0": gpus("aa")})
        started = time.monotonic()
        (result,) = publish(ClusterReport.of(report), run_args("--output", f"mlflow+sqlite:///{ro / 'm.db'}"), [],
                            config=settings(tmp_path), environ={})
        assert not result.ok and "not writable" in result.detail
        assert time.monotonic() - started < 30
    finally:
        subprocess.run(["umount", str(ro)], check=True)


def test_a_tracking_server_that_never_answers_is_left_behind_at_the_deadline(tmp_path: Path) -> None:
    """A server that accepts connections and never answers (MLflow waits 120 s per request, then retries)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        port = server.getsockname()[1]
        report = cluster_run({"h0": gpus("aa")})
        started = time.monotonic()
        (result,) = publish(ClusterReport.of(report), run_args("--mlflow-uri", f"http://127.0.0.1:{port}"), [],
                            config=settings(tmp_path, timeout_s=2.0), environ={})
        elapsed = time.monotonic() - started
    assert not result.ok and "not done within 2 s (outputs.timeout_s)" in result.detail
    assert 1.9 < elapsed < 6, elapsed


def test_a_password_in_the_tracking_uri_is_never_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    report = cluster_run({"h0": gpus("aa")})
    uri = f"http://alice:hunter2-secret@127.0.0.1:{port}/?token=tok-secret-9"
    (result,) = publish(ClusterReport.of(report), run_args("--mlflow-uri", uri), [], config=settings(tmp_path),
                        environ={})
    err = capsys.readouterr().err
    assert not result.ok and "alice:<redacted>@127.0.0.1" in err and "token=<redacted>" in err
    for secret in ("hunter2-secret", "tok-secret-9"):
        assert secret not in err and secret not in result.detail and secret not in result.target
