"""SageMaker launcher: the job spec for each row of the spec's scenario table, without AWS.

The SDK objects built from these specs are checked in test_sagemaker_sdk.py; the code that
runs inside the job in test_sagemaker_entry.py.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from gpu_preflight.cli.sagemaker_entry import ENTRY_SCRIPT_NAME
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.integrations.sagemaker_launcher import (
    METRIC_DEFINITIONS,
    LaunchError,
    LaunchOptions,
    job_spec,
    main,
    notes,
    resolve_distributed,
    write_source_dir,
)
from gpu_preflight.report.jsonl import verdict_line

from .platform_reports import cluster_report

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/gpu-preflight:0.1.0"


def opts(**kw: object) -> LaunchOptions:
    return LaunchOptions(image_uri=IMAGE, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("instance_type", "count", "distributed", "kind", "procs", "scenario"), [
    ("ml.g5.xlarge", 1, "auto", None, None, "single node, single GPU"),
    ("ml.g5.12xlarge", 1, "auto", "torchrun", 4, "single node, multi-GPU"),
    ("ml.g5.12xlarge", 1, "mpi", "mpi", 4, "single node, multi-GPU"),
    ("ml.g5.12xlarge", 1, "none", None, None, "single node, multi-GPU"),
    ("ml.g5.xlarge", 2, "auto", "torchrun", 1, "multi-node, single GPU"),
    ("ml.p4d.24xlarge", 2, "auto", "torchrun", 8, "multi-node, multi-GPU"),
    ("ml.p5.48xlarge", 4, "mpi", "mpi", 8, "multi-node, multi-GPU"),
    ("ml.future.96xlarge", 1, "auto", "torchrun", None, "single node, GPU count unknown"),
])
def test_scenario_table(instance_type: str, count: int, distributed: str, kind: str | None, procs: int | None,
                        scenario: str) -> None:
    spec = job_spec(opts(instance_type=instance_type, instance_count=count, distributed=distributed), "/src")
    assert spec["scenario"] == scenario
    assert spec["compute"] == {"instance_type": instance_type, "instance_count": count, "volume_size_in_gb": 100}
    if kind is None:
        assert spec["distributed"] is None
    else:
        assert spec["distributed"]["kind"] == kind
        assert spec["distributed"]["process_count_per_node"] == procs


def test_multi_node_needs_a_launcher() -> None:
    with pytest.raises(LaunchError, match="multi-node job needs torchrun or mpi"):
        resolve_distributed(opts(instance_count=2, distributed="none"))


def test_processes_per_node_overrides_the_gpu_count() -> None:
    spec = job_spec(opts(instance_type="ml.p4d.24xlarge", distributed="mpi", processes_per_node=2,
                         mpi_options=("-x", "NCCL_DEBUG=INFO")), "/src")
    assert spec["distributed"] == {"kind": "mpi", "process_count_per_node": 2,
                                   "mpi_additional_options": ["-x", "NCCL_DEBUG=INFO"]}


def test_spec_is_plain_json_with_the_entry_script_and_run_arguments() -> None:
    spec = job_spec(opts(instance_type="ml.p4d.24xlarge", instance_count=2, subnets=("subnet-1",),
                         security_groups=("sg-1",), role="arn:aws:iam::123456789012:role/r",
                         output_path="s3://bucket/preflight", run_args=("--full", "--set", "gpu.note=a b"),
                         job_fails_on="warn", environment={"NCCL_DEBUG": "WARN"}), "/tmp/src")
    assert json.loads(json.dumps(spec)) == spec
    assert spec["source_code"] == {"source_dir": "/tmp/src", "entry_script": ENTRY_SCRIPT_NAME}
    assert spec["networking"] == {"subnets": ["subnet-1"], "security_group_ids": ["sg-1"]}
    assert spec["output_data_config"] == {"s3_output_path": "s3://bucket/preflight"}
    assert spec["hyperparameters"] == {"run-args": "--full --set 'gpu.note=a b'", "job-fails-on": "warn"}
    assert shlex.split(spec["hyperparameters"]["run-args"]) == ["--full", "--set", "gpu.note=a b"]
    assert spec["environment"] == {"NCCL_DEBUG": "WARN"}
    assert spec["stopping_condition"] == {"max_runtime_in_seconds": 3600}


def test_optional_parts_are_left_to_sagemaker() -> None:
    spec = job_spec(opts(), "/src")
    assert spec["networking"] is None and spec["output_data_config"] is None and spec["role"] is None


@pytest.mark.parametrize(("bad", "message"), [
    ({"run_args": ("--report-dir", "/x")}, "--report-dir is set by the entry point"),
    ({"run_args": ("--report-dir=/x",)}, "--report-dir is set by the entry point"),
    ({"job_fails_on": "sometimes"}, "--job-fails-on"),
    ({"instance_count": 0}, "--instance-count"),
    ({"processes_per_node": 0}, "--processes-per-node"),
    ({"distributed": "horovod"}, "--distributed"),
])
def test_invalid_options(bad: dict[str, object], message: str) -> None:
    with pytest.raises(LaunchError, match=message):
        job_spec(opts(**bad), "/src")


def test_notes_warn_about_what_would_test_less() -> None:
    text = " ".join(notes(opts(instance_type="ml.g5.12xlarge", instance_count=2)))
    assert "no EFA" in text and "--subnets" in text
    assert notes(opts(instance_type="ml.p5.48xlarge", instance_count=2, subnets=("s",), security_groups=("g",))) == []


def test_metric_definitions_extract_the_verdict_numbers(tmp_path: Path) -> None:
    """The regexes SageMaker applies to the logs match the verdict line the entry prints."""
    report = cluster_report(tmp_path, {"algo-1": False, "algo-2": True})
    report["cluster_summary"]["performance_summary"]["distributed_all_reduce_bandwidth_gbps"] = 181.5
    line = "[1,0]<stdout>:" + verdict_line(ClusterReport.of(report))  # as mpirun --tag-output prefixes it
    values = {name: re.search(regex, line) for name, regex in METRIC_DEFINITIONS}
    assert all(values.values()), values
    assert float(values["gpu_preflight:allreduce_busbw_gbps"].group(1)) == 181.5  # type: ignore[union-attr]
    counts = report["cluster_summary"]["counts"]
    assert int(values["gpu_preflight:fail_findings"].group(1)) == counts["FAIL"] > 0  # type: ignore[union-attr]
    assert int(values["gpu_preflight:exit_code"].group(1)) == 2  # type: ignore[union-attr]


def test_source_dir_holds_only_the_entry_script(tmp_path: Path) -> None:
    src = write_source_dir(tmp_path / "src")
    assert [p.name for p in src.iterdir()] == [ENTRY_SCRIPT_NAME]
    compile((src / ENTRY_SCRIPT_NAME).read_text(), ENTRY_SCRIPT_NAME, "exec")


def test_cli_dry_run_prints_the_spec(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["--image-uri", IMAGE, "--instance-type", "ml.g5.12xlarge", "--instance-count", "2",
               "--distributed", "torchrun", "--subnets", "subnet-a,subnet-b", "--security-groups", "sg-1",
               "--env", "NCCL_DEBUG=INFO", "--dry-run", "--", "--full", "--expect-gpus", "4"])
    out, err = capsys.readouterr()
    assert rc == 0
    spec = json.loads(out)
    assert spec["distributed"] == {"kind": "torchrun", "process_count_per_node": 4}
    assert spec["networking"]["subnets"] == ["subnet-a", "subnet-b"]
    assert spec["hyperparameters"]["run-args"] == "--full --expect-gpus 4"
    assert spec["environment"] == {"NCCL_DEBUG": "INFO"}
    assert "no EFA" in err


@pytest.mark.parametrize("argv", [
    ["--instance-count", "2", "--distributed", "none"],
    ["--env", "NOVALUE"],
    ["--dry-run", "--", "--report-dir", "/elsewhere"],
])
def test_cli_refuses_bad_jobs(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--image-uri", IMAGE, "--dry-run", *argv]) == 2
    assert capsys.readouterr().out == ""


def test_notebook_example_runs_offline(capsys: pytest.CaptureFixture[str]) -> None:
    """examples/sagemaker_launch.py up to the cell that needs AWS: it must stay runnable."""
    source = (Path(__file__).resolve().parents[1] / "examples" / "sagemaker_launch.py").read_text()
    offline = source[:source.index("# %% The ModelTrainer")]
    exec(compile(offline, "sagemaker_launch.py", "exec"), {"__name__": "example"})
    out = capsys.readouterr().out
    spec = json.loads(out[out.index("{"):])
    assert spec["scenario"] == "multi-node, multi-GPU"
    assert spec["distributed"] == {"kind": "torchrun", "process_count_per_node": 4}
