"""Inside a SageMaker job: the uploaded entry script, run the way ModelTrainer's drivers run it.

SageMaker itself is not here; its container contract is: ``SM_MODEL_DIR``,
``SM_OUTPUT_DIR``, ``SM_HOSTS``/``SM_CURRENT_HOST`` in the environment, the entry script
started as ``python <entry> --key value ...`` (no distribution) or under ``torchrun``
(Torchrun()), with the hyperparameters as arguments. The tests start the real script that
way and read what a job would leave: the report in the model directory, JSON lines on
stdout (CloudWatch), the FailureReason file, and the exit code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_preflight.cli.sagemaker_entry import (
    ENTRY_SCRIPT_NAME,
    FAILURE_MAX,
    failure_reason,
    job_exit_code,
    parse_args,
    publish,
    run_argv,
)
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.integrations.sagemaker_launcher import LaunchOptions, hyperparameters, write_source_dir

from .platform_reports import cluster_report, dump_file
from .torch_extra import needs_torch

BIN = Path(sys.executable).parent


def sm_env(tmp: Path, hosts: list[str] | None = None) -> dict[str, str]:
    (tmp / "model").mkdir(exist_ok=True)
    (tmp / "output").mkdir(exist_ok=True)
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "RANK", "WORLD", "LOCAL_", "MASTER_",
                                                                        "SLURM_", "OMPI_", "PMIX_", "TORCHELASTIC"))}
    return {**keep, "SM_MODEL_DIR": str(tmp / "model"), "SM_OUTPUT_DIR": str(tmp / "output"),
            "SM_HOSTS": json.dumps(hosts or ["algo-1"]), "SM_CURRENT_HOST": (hosts or ["algo-1"])[0]}


def hp_args(**kw: object) -> list[str]:
    """The hyperparameters as the SDK's drivers pass them: ``--key value`` pairs."""
    args = []
    for key, value in hyperparameters(LaunchOptions(image_uri="x", **kw)).items():  # type: ignore[arg-type]
        args += [f"--{key}", value]
    return args


def start(tmp: Path, argv: list[str], env: dict[str, str], launcher: list[str] | None = None,
          timeout: int = 120) -> subprocess.CompletedProcess[str]:
    code = write_source_dir(tmp / "code")
    cmd = [*(launcher or [sys.executable]), ENTRY_SCRIPT_NAME, *argv]
    return subprocess.run(cmd, cwd=code, env=env, capture_output=True, text=True, timeout=timeout)


def jsonl(stdout: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_run_argv_defaults_to_the_model_dir() -> None:
    args = parse_args(["--run-args", "--full --set 'gpu.x=a b'"])
    assert run_argv(args, {"SM_MODEL_DIR": "/opt/ml/model"}) == ["run", "--report-dir", "/opt/ml/model", "--full",
                                                                  "--set", "gpu.x=a b"]
    assert run_argv(parse_args([]), {})[:3] == ["run", "--report-dir", "/opt/ml/model"]


@pytest.mark.parametrize(("code", "policy", "job"), [
    (0, "fail", 0), (1, "fail", 0), (2, "fail", 2), (3, "fail", 3),
    (1, "warn", 1), (0, "warn", 0), (2, "never", 0), (3, "never", 0),
])
def test_job_exit_code(code: int, policy: str, job: int) -> None:
    assert job_exit_code(code, policy) == job


def test_failure_reason_fits_sagemakers_limit(tmp_path: Path) -> None:
    report = cluster_report(tmp_path, {f"algo-{i}": True for i in range(1, 5)})
    report["cluster_summary"]["issues"] *= 50
    text = failure_reason(ClusterReport.of(report))
    assert text.startswith("gpu-preflight [RESULT] FAILURE: [gpu.pcie]")
    assert len(text) <= FAILURE_MAX


def test_publish_reads_the_typed_report_and_refuses_a_file_without_a_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = cluster_report(tmp_path, {"algo-1": False, "algo-2": True})
    good = tmp_path / "report.json"
    good.write_text(json.dumps(report))
    publish(good, 2, tmp_path / "failure")
    assert len(capsys.readouterr().out.splitlines()) == len(report["findings"]) + 1
    assert (tmp_path / "failure").read_text() == failure_reason(ClusterReport.of(report))
    del report["cluster_summary"]
    good.write_text(json.dumps(report))
    (tmp_path / "failure").unlink()
    publish(good, 2, tmp_path / "failure")
    out, err = capsys.readouterr()
    assert out == "" and not (tmp_path / "failure").exists()
    assert err.count("\n") == 1 and "not a gpu-preflight report" in err and "cluster_summary" in err


def test_healthy_single_gpu_job(tmp_path: Path) -> None:
    """Scenario 'single node, single GPU': no launcher, the basic driver runs ``python entry``."""
    dump = dump_file(tmp_path, "h200")
    proc = start(tmp_path, hp_args(run_args=("--node-only", "--replay", str(dump), "--check", "gpu.*")),
                 sm_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "model" / "report.json").read_text())
    lines = jsonl(proc.stdout)
    assert len(lines) == len(report["findings"]) + 1
    assert {line["event"] for line in lines[:-1]} == {"gpu_preflight.finding"}
    assert lines[-1]["event"] == "gpu_preflight.verdict" and lines[-1]["result"] == "[RESULT] SUCCESS"
    assert not (tmp_path / "output" / "failure").exists()
    assert "[RESULT] SUCCESS" in proc.stderr  # the console table is still there for people


def test_failing_node_fails_the_job_with_a_reason(tmp_path: Path) -> None:
    dump = dump_file(tmp_path, "bad", downtrained=True)
    proc = start(tmp_path, hp_args(run_args=("--node-only", "--replay", str(dump), "--check", "gpu.*")),
                 sm_env(tmp_path))
    assert proc.returncode == 2, proc.stderr
    reason = (tmp_path / "output" / "failure").read_text()
    assert reason.startswith("gpu-preflight [RESULT] FAILURE: [gpu.pcie]")
    first = jsonl(proc.stdout)[0]
    assert (first["status"], first["check_id"], first["code"]) == ("FAIL", "gpu.pcie", "link_downtrained")


def test_never_policy_completes_the_job_but_keeps_the_verdict(tmp_path: Path) -> None:
    dump = dump_file(tmp_path, "bad", downtrained=True)
    proc = start(tmp_path, hp_args(run_args=("--node-only", "--replay", str(dump), "--check", "gpu.*"),
                                   job_fails_on="never"), sm_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert jsonl(proc.stdout)[-1]["overall_status"] == "FAIL"
    assert not (tmp_path / "output" / "failure").exists()


def test_bad_run_arguments_fail_the_job(tmp_path: Path) -> None:
    proc = start(tmp_path, hp_args(run_args=("--check", "no.such.check", "--node-only")), sm_env(tmp_path))
    assert proc.returncode == 3  # a usage error: could not judge the node
    assert jsonl(proc.stdout) == []


@needs_torch
def test_torchrun_job_only_rank_zero_reports(tmp_path: Path) -> None:
    """Scenario 'single node, multi-GPU' with Torchrun(): two ranks (gloo on CPU here)."""
    launcher = [str(BIN / "torchrun"), "--standalone", "--nproc_per_node=2"]
    proc = start(tmp_path, hp_args(run_args=("--check", "nccl.*", "--check", "cluster.completeness",
                                             "--timeout-s", "60")), sm_env(tmp_path), launcher, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = jsonl(proc.stdout)
    verdicts = [line for line in lines if line["event"] == "gpu_preflight.verdict"]
    assert len(verdicts) == 1  # rank 1 ran the same entry but publishes nothing
    assert verdicts[0]["overall_status"] == "PASS"
    report = json.loads((tmp_path / "model" / "report.json").read_text())
    assert report["cluster_info"]["cluster_topology"]["world_size"] == 2
    assert {f["check_id"] for f in report["findings"]} >= {"cluster.completeness", "nccl.collectives"}
