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
from gpu_preflight.outputs.mlflow import metric_key
from gpu_preflight.outputs.publish import publish

from .history_data import cluster_run, gpus
from .outputs_data import NVRM, run_args, written_report


def settings(tmp_path: Path) -> SimpleNamespace:
    return SimpleNamespace(history=HistoryConfig(enabled=False),
                           outputs=OutputsConfig(mlflow_experiment="preflight-test",
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
    results = publish(w.report, run_args("--mlflow-uri", uri, report_dir=w.directory), [w.node],
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
    assert run.data.metrics["temperature/vm/gpu0"] == 31.0
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
    results = publish(report, run_args("--output", f"mlflow+{uri}"), [], config=settings(tmp_path),
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
    results = publish(report, run_args("--output", f"mlflow+http://127.0.0.1:{port}"), [],
                      config=settings(tmp_path), environ={})
    assert not results[0].ok and "unreachable" in results[0].detail
    assert time.monotonic() - started < 30  # not MLflow's minutes of retries


@pytest.mark.parametrize("raw, key", [("gemm.bf16/h0/gpu1", "gemm.bf16/h0/gpu1"), ("temperature/vm#1/gpu0",
                                      "temperature/vm_1/gpu0"), ("a//b", "a/b"), ("/x/../y", "y")])
def test_metric_keys_are_ones_mlflow_accepts(raw: str, key: str) -> None:
    assert metric_key(raw) == key
