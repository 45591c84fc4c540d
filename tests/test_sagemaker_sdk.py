"""The SDK's real ModelTrainer objects from our job specs, built without calling AWS.

Needs the ``sagemaker`` extra (sagemaker-train); CI installs it, so its absence fails this
module. Offline construction needs a region and credentials in the environment (never
used: nothing is sent), ``SAGEMAKER_VALIDATE_ROLE=false`` (the SDK would otherwise ask IAM
about the role) and an explicit output path (else it asks S3 for the default bucket).

The contract with the container is checked with the SDK's own driver code: the
hyperparameters go through ``hyperparameters_to_cli_args`` (what the torchrun, MPI and
basic drivers call) and must come out of our entry script's parser unchanged.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sagemaker.train import ModelTrainer
from sagemaker.train.distributed import MPI, Torchrun

from gpu_preflight.cli.sagemaker_entry import ENTRY_SCRIPT_NAME, parse_args, run_argv
from gpu_preflight.integrations.sagemaker_launcher import (
    METRIC_DEFINITIONS,
    LaunchOptions,
    build_model_trainer,
    job_spec,
    write_source_dir,
)

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/gpu-preflight:0.1.0"
ROLE = "arn:aws:iam::123456789012:role/preflight"


@pytest.fixture(autouse=True)
def offline_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for key, value in {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "testing",
                       "AWS_SECRET_ACCESS_KEY": "testing", "AWS_EC2_METADATA_DISABLED": "true",
                       "SAGEMAKER_VALIDATE_ROLE": "false", "AWS_CONFIG_FILE": str(tmp_path / "none"),
                       "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}.items():
        monkeypatch.setenv(key, value)
    yield


def trainer_for(tmp_path: Path, **kw: Any) -> tuple[Any, dict[str, Any]]:
    options = LaunchOptions(image_uri=IMAGE, role=ROLE, output_path="s3://bucket/preflight", **kw)
    spec = job_spec(options, str(write_source_dir(tmp_path / "src")))
    return build_model_trainer(spec), spec


@pytest.mark.parametrize(("instance_type", "count", "distributed", "cls", "procs"), [
    ("ml.g5.xlarge", 1, "auto", None, None),
    ("ml.g5.12xlarge", 1, "auto", Torchrun, 4),
    ("ml.g5.12xlarge", 1, "mpi", MPI, 4),
    ("ml.p4d.24xlarge", 2, "torchrun", Torchrun, 8),
    ("ml.p5.48xlarge", 4, "mpi", MPI, 8),
])
def test_model_trainer_per_scenario(tmp_path: Path, instance_type: str, count: int, distributed: str,
                                    cls: type | None, procs: int | None) -> None:
    trainer, _ = trainer_for(tmp_path, instance_type=instance_type, instance_count=count, distributed=distributed,
                             subnets=("subnet-1",), security_groups=("sg-1",))
    assert isinstance(trainer, ModelTrainer)
    if cls is None:
        assert trainer.distributed is None
    else:
        assert type(trainer.distributed) is cls and trainer.distributed.process_count_per_node == procs
    assert (trainer.compute.instance_type, trainer.compute.instance_count) == (instance_type, count)
    assert trainer.networking.subnets == ["subnet-1"] and trainer.networking.security_group_ids == ["sg-1"]
    assert trainer.training_image == IMAGE and trainer.role == ROLE
    assert trainer.source_code.entry_script == ENTRY_SCRIPT_NAME
    assert (Path(trainer.source_code.source_dir) / ENTRY_SCRIPT_NAME).is_file()
    assert trainer.output_data_config.s3_output_path == "s3://bucket/preflight"


def test_metric_definitions_reach_the_trainer(tmp_path: Path) -> None:
    trainer, _ = trainer_for(tmp_path)
    assert [(m.name, m.regex) for m in trainer._metric_definitions] == list(METRIC_DEFINITIONS)


def test_mpi_options_and_environment(tmp_path: Path) -> None:
    trainer, _ = trainer_for(tmp_path, instance_type="ml.p4d.24xlarge", distributed="mpi",
                             mpi_options=("-x", "NCCL_DEBUG=INFO"), environment={"FI_LOG_LEVEL": "warn"})
    assert trainer.distributed.mpi_additional_options == ["-x", "NCCL_DEBUG=INFO"]
    assert trainer.environment == {"FI_LOG_LEVEL": "warn"}


def drivers_utils() -> Any:
    """The SDK's container-side helpers (they run inside the job, not importable as a package)."""
    import sagemaker.train

    path = Path(sagemaker.train.__file__).parent / "container_drivers" / "common" / "utils.py"
    spec = importlib.util.spec_from_file_location("sm_driver_utils", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["sm_driver_utils"] = module
    spec.loader.exec_module(module)
    return module


def test_hyperparameters_survive_the_drivers(tmp_path: Path) -> None:
    trainer, _ = trainer_for(tmp_path, run_args=("--full", "--expect-gpus", "8", "--set", "gpu.note=a b"),
                             job_fails_on="warn")
    cli_args = drivers_utils().hyperparameters_to_cli_args(trainer.hyperparameters)
    args = parse_args(cli_args)
    assert args.job_fails_on == "warn"
    assert run_argv(args, {"SM_MODEL_DIR": "/opt/ml/model"}) == [
        "run", "--report-dir", "/opt/ml/model", "--full", "--expect-gpus", "8", "--set", "gpu.note=a b"]
