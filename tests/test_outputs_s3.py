"""S3 uploads against moto's S3 server (a real HTTP endpoint; boto3 talks to it as to AWS)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpu_preflight.config.history import HistoryConfig
from gpu_preflight.config.outputs import OutputsConfig
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.outputs.publish import publish
from gpu_preflight.outputs.s3 import job_name, parse_s3_url

from .outputs_data import NVRM, run_args, written_report


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    exe = Path(sys.executable).with_name("moto_server")
    if not exe.is_file():
        pytest.fail("moto_server not found beside the interpreter: pip install 'moto[server]' (the test extra)")
    port = free_port()
    proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(endpoint + "/moto-api/", timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"moto_server did not start on {endpoint} (exit {proc.poll()})")
                time.sleep(0.2)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def s3(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    import boto3

    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": str(tmp_path / "none"),
                       "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}.items():
        monkeypatch.setenv(key, value)
    client = boto3.client("s3", endpoint_url=moto_endpoint)
    bucket = f"preflight-{tmp_path.name.lower().replace('_', '-')[-40:]}"
    client.create_bucket(Bucket=bucket)
    return SimpleNamespace(client=client, bucket=bucket, endpoint=moto_endpoint)


def keys(s3: Any, prefix: str = "") -> dict[str, bytes]:
    listed = s3.client.list_objects_v2(Bucket=s3.bucket, Prefix=prefix).get("Contents", [])
    return {o["Key"]: s3.client.get_object(Bucket=s3.bucket, Key=o["Key"])["Body"].read() for o in listed}


def settings(endpoint: str | None = None, **outputs: Any) -> SimpleNamespace:
    """A generous upload deadline unless a test sets one: the CI VM has two loaded cores."""
    outputs.setdefault("timeout_s", 60.0)
    return SimpleNamespace(history=HistoryConfig(enabled=False), outputs=OutputsConfig(s3_endpoint_url=endpoint,
                                                                                         **outputs))


def test_the_report_dir_is_uploaded_under_the_prefix(s3: Any, tmp_path: Path) -> None:
    w = written_report(tmp_path / "out")
    args = run_args("--output", f"s3://{s3.bucket}/preflight/", report_dir=w.directory)
    results = publish(ClusterReport.of(w.report), args, [w.node], config=settings(s3.endpoint), environ={})
    assert [(r.ok, r.detail) for r in results] == [
        (True, f"3 object(s) uploaded, report at s3://{s3.bucket}/preflight/report.json")]
    found = keys(s3)
    assert set(found) == {"preflight/report.json", "preflight/report.html",
                          "preflight/artifacts/node_0/kernel_log_nvrm.txt"}  # not the stale file
    assert found["preflight/report.json"] == (w.directory / "report.json").read_bytes()
    assert found["preflight/artifacts/node_0/kernel_log_nvrm.txt"].decode() == NVRM
    head = s3.client.head_object(Bucket=s3.bucket, Key="preflight/report.json")
    assert head["ContentType"] == "application/json"


def test_the_spec_layout_with_the_job_name_and_no_report_dir(s3: Any, tmp_path: Path) -> None:
    w = written_report(tmp_path / "unused")
    url = f"s3://{s3.bucket}/{{job}}/metrics/health_check_metrics.json"
    env = {"TRAINING_JOB_NAME": "llama-pretrain-7", "AWS_ENDPOINT_URL_S3": s3.endpoint}
    results = publish(ClusterReport.of(w.report), run_args("--output", url), [w.node], config=settings(), environ=env)
    assert results[0].ok, results[0].detail
    found = keys(s3, "llama-pretrain-7/")
    assert set(found) == {"llama-pretrain-7/metrics/health_check_metrics.json",
                          "llama-pretrain-7/metrics/report.html",
                          "llama-pretrain-7/metrics/artifacts/node_0/kernel_log_nvrm.txt"}
    uploaded = json.loads(found["llama-pretrain-7/metrics/health_check_metrics.json"])
    assert uploaded["findings"] == w.report["findings"]
    assert uploaded["artifacts"][0]["path"] == "artifacts/node_0/kernel_log_nvrm.txt"


def test_a_failed_upload_is_reported_and_the_other_targets_still_run(s3: Any, tmp_path: Path) -> None:
    w = written_report(tmp_path / "out")
    prom = tmp_path / "gpu_preflight.prom"
    args = run_args("--output", "s3://no-such-bucket-here/x/", "--prom-textfile", str(prom), report_dir=w.directory)
    results = publish(ClusterReport.of(w.report), args, [w.node], config=settings(s3.endpoint), environ={})
    by_target = {r.target: r for r in results}
    assert not by_target["s3://no-such-bucket-here/x/"].ok
    assert "NoSuchBucket" in by_target["s3://no-such-bucket-here/x/"].detail
    assert by_target[f"prometheus textfile {prom}"].ok and prom.is_file()


def test_an_endpoint_that_never_answers_is_left_behind_at_the_deadline(s3: Any, tmp_path: Path) -> None:
    w = written_report(tmp_path / "out")
    prom = tmp_path / "gpu_preflight.prom"
    with socket.socket() as server:  # accepts connections, never answers a request
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        endpoint = f"http://127.0.0.1:{server.getsockname()[1]}"
        args = run_args("--output", "s3://bucket/x/", "--prom-textfile", str(prom), report_dir=w.directory)
        started = time.monotonic()
        results = publish(ClusterReport.of(w.report), args, [w.node], config=settings(endpoint, timeout_s=2.0),
                          environ={})
        elapsed = time.monotonic() - started
    by_target = {r.target: r for r in results}
    assert not by_target["s3://bucket/x/"].ok and "not done within 2 s" in by_target["s3://bucket/x/"].detail
    assert by_target[f"prometheus textfile {prom}"].ok
    assert 1.9 < elapsed < 6, elapsed  # boto3's own defaults: 60 s per read, several retries


@pytest.mark.parametrize("url, bucket, report_key, artifact_key", [
    ("s3://b", "b", "report.json", "artifacts/a.txt"),
    ("s3://b/p", "b", "p/report.json", "p/artifacts/a.txt"),
    ("s3://b/p/q/", "b", "p/q/report.json", "p/q/artifacts/a.txt"),
    ("s3://b/{job}/metrics/health_check_metrics.json", "b", "j1/metrics/health_check_metrics.json",
     "j1/metrics/artifacts/a.txt"),
    ("s3://b/r.json", "b", "r.json", "artifacts/a.txt"),
])
def test_url_layouts(url: str, bucket: str, report_key: str, artifact_key: str) -> None:
    loc = parse_s3_url(url, "j1")
    assert (loc.bucket, loc.key("report.json"), loc.key("artifacts/a.txt")) == (bucket, report_key, artifact_key)


def test_job_names() -> None:
    assert job_name({"SM_TRAINING_ENV": '{"job_name": "sm-job"}'}) == "sm-job"
    assert job_name({"SLURM_JOB_ID": "4242"}) == "slurm-4242"
    assert job_name({}, "2026-11-26T00:01:27.254887+00:00") == "run-20261126T000127Z"
