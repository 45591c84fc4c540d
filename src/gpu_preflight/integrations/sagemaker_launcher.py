"""Launch gpu-preflight as a SageMaker training job with ``ModelTrainer`` (sagemaker 3.x).

The job shape follows the distributed scenarios of the SageMaker health-check tool:

=========================  ==========  ================================================
scenario                   instances   distributed
=========================  ==========  ================================================
single node, single GPU    1           none (one process)
single node, multi-GPU     1           ``Torchrun()`` or ``MPI(process_count_per_node=G)``
multi-node (any GPUs)      >1          ``Torchrun()`` or ``MPI(...)``: required
=========================  ==========  ================================================

``--distributed auto`` (the default) picks torchrun unless the job is one single-GPU
instance (an unknown instance type counts as multi-GPU: torchrun with one process is harmless,
one process on eight GPUs would leave seven untested).

Building the job is split in two so it can be checked without AWS:
:func:`job_spec` turns the options into plain data (what a notebook would pass), and
:func:`build_model_trainer` turns that data into the SDK's objects (``sagemaker.train``,
imported only there). ``--dry-run`` prints the spec and never imports the SDK.

Run as a script::

    python -m gpu_preflight.integrations.sagemaker_launcher --image-uri URI \\
        --instance-type ml.g5.12xlarge --instance-count 2 --distributed torchrun \\
        --subnets subnet-a --security-groups sg-a [--dry-run] [-- --full --expect-gpus 4]
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from ..redact import redact_env, redact_text
from ..safeio import write_text
from .sagemaker_script import ENTRY_SCRIPT, ENTRY_SCRIPT_NAME, JOB_FAILS_ON

DISTRIBUTED = ("auto", "none", "torchrun", "mpi")

# GPUs per SageMaker training instance type, for process counts and scenario choice; an
# unknown type leaves the process count to SageMaker (SM_NUM_GPUS) and is never a guess.
GPUS_PER_INSTANCE: dict[str, int] = {
    "ml.g4dn.xlarge": 1, "ml.g4dn.2xlarge": 1, "ml.g4dn.4xlarge": 1, "ml.g4dn.8xlarge": 1,
    "ml.g4dn.16xlarge": 1, "ml.g4dn.12xlarge": 4,
    "ml.g5.xlarge": 1, "ml.g5.2xlarge": 1, "ml.g5.4xlarge": 1, "ml.g5.8xlarge": 1, "ml.g5.16xlarge": 1,
    "ml.g5.12xlarge": 4, "ml.g5.24xlarge": 4, "ml.g5.48xlarge": 8,
    "ml.g6.xlarge": 1, "ml.g6.2xlarge": 1, "ml.g6.4xlarge": 1, "ml.g6.8xlarge": 1, "ml.g6.16xlarge": 1,
    "ml.g6.12xlarge": 4, "ml.g6.24xlarge": 4, "ml.g6.48xlarge": 8,
    "ml.g6e.xlarge": 1, "ml.g6e.2xlarge": 1, "ml.g6e.12xlarge": 4, "ml.g6e.24xlarge": 4, "ml.g6e.48xlarge": 8,
    "ml.p3.2xlarge": 1, "ml.p3.8xlarge": 4, "ml.p3.16xlarge": 8, "ml.p3dn.24xlarge": 8,
    "ml.p4d.24xlarge": 8, "ml.p4de.24xlarge": 8,
    "ml.p5.48xlarge": 8, "ml.p5e.48xlarge": 8, "ml.p5en.48xlarge": 8,
}
# Instance types with EFA: multi-node jobs on anything else run NCCL over TCP sockets.
EFA_INSTANCES = frozenset({"ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge",
                           "ml.p5e.48xlarge", "ml.p5en.48xlarge", "ml.g5.48xlarge", "ml.g6.48xlarge",
                           "ml.g6e.48xlarge", "ml.g4dn.8xlarge", "ml.g4dn.12xlarge", "ml.g4dn.16xlarge"})

# SageMaker metric definitions: regexes over the job's log lines (report.jsonl's verdict
# line), so the headline numbers show up as training-job metrics in CloudWatch.
METRIC_DEFINITIONS: tuple[tuple[str, str], ...] = (
    ("gpu_preflight:fail_findings", r'"fail_findings":([0-9]+)'),
    ("gpu_preflight:error_findings", r'"error_findings":([0-9]+)'),
    ("gpu_preflight:warn_findings", r'"warn_findings":([0-9]+)'),
    ("gpu_preflight:exit_code", r'"exit_code":([0-9]+)'),
    ("gpu_preflight:allreduce_busbw_gbps", r'"distributed_all_reduce_bandwidth_gbps":([0-9.eE+-]+)'),
)


class LaunchError(ValueError):
    """The options describe a job that cannot work (e.g. multi-node without a launcher)."""


class LaunchOptions(msgspec.Struct, frozen=True):
    """Everything a launch needs; the defaults are the spec's multi-GPU health check."""

    image_uri: str
    instance_type: str = "ml.g5.12xlarge"
    instance_count: int = 1
    distributed: str = "auto"
    processes_per_node: int | None = None
    subnets: tuple[str, ...] = ()
    security_groups: tuple[str, ...] = ()
    role: str | None = None
    output_path: str | None = None
    base_job_name: str = "gpu-preflight"
    max_runtime_s: int = 3600
    volume_size_gb: int = 100
    run_args: tuple[str, ...] = ()
    job_fails_on: str = "fail"
    mpi_options: tuple[str, ...] = ()
    environment: dict[str, str] = {}


def gpus_per_instance(instance_type: str) -> int | None:
    return GPUS_PER_INSTANCE.get(instance_type)


def resolve_distributed(opts: LaunchOptions) -> str:
    """``none``, ``torchrun`` or ``mpi`` for the options (``auto`` follows the scenario table)."""
    if opts.distributed not in DISTRIBUTED:
        raise LaunchError(f"--distributed must be one of {', '.join(DISTRIBUTED)}")
    gpus = gpus_per_instance(opts.instance_type)
    if opts.distributed == "auto":
        if opts.instance_count == 1 and gpus == 1 and (opts.processes_per_node or 1) == 1:
            return "none"
        return "torchrun"  # more than one GPU, or an instance type whose GPU count is unknown
    if opts.distributed == "none" and opts.instance_count > 1:
        raise LaunchError("a multi-node job needs torchrun or mpi: without a launcher each node only checks "
                          "itself and no inter-node link is tested")
    return opts.distributed


def scenario(opts: LaunchOptions) -> str:
    """The scenario-table row these options fall in (for the printed plan and the docs)."""
    gpus = gpus_per_instance(opts.instance_type)
    if opts.instance_count > 1:
        return "multi-node, multi-GPU" if (gpus or 2) > 1 else "multi-node, single GPU"
    if gpus == 1:
        return "single node, single GPU"
    return "single node, multi-GPU" if gpus else "single node, GPU count unknown"


def notes(opts: LaunchOptions) -> list[str]:
    """Warnings about options that run but test less than the user may expect."""
    out = []
    if gpus_per_instance(opts.instance_type) is None:
        out.append(f"{opts.instance_type}: GPU count unknown here; the process count is left to SageMaker "
                   "(SM_NUM_GPUS)")
    if opts.instance_count > 1 and opts.instance_type not in EFA_INSTANCES:
        out.append(f"{opts.instance_type} has no EFA: inter-node NCCL runs over TCP sockets, so bandwidth "
                   "thresholds for EFA will fail")
    if opts.instance_count > 1 and not (opts.subnets and opts.security_groups):
        out.append("no --subnets/--security-groups: multi-node EFA jobs need a VPC whose security group "
                   "allows all traffic to itself")
    return out


def hyperparameters(opts: LaunchOptions) -> dict[str, str]:
    """What the entry script receives: the ``gpu-preflight run`` arguments as one string.

    SageMaker turns every hyperparameter into a ``--key value`` pair, which cannot carry a
    bare flag such as ``--full``; one shell-quoted string carries any argument list.
    """
    if opts.job_fails_on not in JOB_FAILS_ON:
        raise LaunchError(f"--job-fails-on must be one of {', '.join(JOB_FAILS_ON)}")
    if any(a == "--report-dir" or a.startswith("--report-dir=") for a in opts.run_args):
        raise LaunchError("--report-dir is set by the entry point ($SM_MODEL_DIR, uploaded to S3)")
    return {"run-args": shlex.join(opts.run_args), "job-fails-on": opts.job_fails_on}


def job_spec(opts: LaunchOptions, source_dir: str) -> dict[str, Any]:
    """The ModelTrainer configuration as plain data (JSON-serialisable)."""
    if opts.instance_count < 1:
        raise LaunchError("--instance-count must be at least 1")
    if opts.processes_per_node is not None and opts.processes_per_node < 1:
        raise LaunchError("--processes-per-node must be at least 1")
    kind = resolve_distributed(opts)
    procs = opts.processes_per_node or gpus_per_instance(opts.instance_type)
    distributed: dict[str, Any] | None = None
    if kind == "torchrun":
        distributed = {"kind": "torchrun", "process_count_per_node": procs}
    elif kind == "mpi":
        distributed = {"kind": "mpi", "process_count_per_node": procs,
                       "mpi_additional_options": list(opts.mpi_options)}
    return {
        "scenario": scenario(opts),
        "training_image": opts.image_uri,
        "base_job_name": opts.base_job_name,
        "role": opts.role,
        "source_code": {"source_dir": source_dir, "entry_script": ENTRY_SCRIPT_NAME},
        "distributed": distributed,
        "compute": {"instance_type": opts.instance_type, "instance_count": opts.instance_count,
                    "volume_size_in_gb": opts.volume_size_gb},
        "networking": {"subnets": list(opts.subnets), "security_group_ids": list(opts.security_groups)}
        if opts.subnets or opts.security_groups else None,
        "stopping_condition": {"max_runtime_in_seconds": opts.max_runtime_s},
        "output_data_config": {"s3_output_path": opts.output_path} if opts.output_path else None,
        "hyperparameters": hyperparameters(opts),
        "environment": dict(opts.environment),
        "metric_definitions": [{"name": n, "regex": r} for n, r in METRIC_DEFINITIONS],
    }


def write_source_dir(directory: Path) -> Path:
    """The code ModelTrainer uploads: only the two-line entry script (the image has the rest)."""
    write_text(directory / ENTRY_SCRIPT_NAME, ENTRY_SCRIPT)
    return directory


def build_model_trainer(spec: dict[str, Any], session: Any = None) -> Any:
    """The SDK's ``ModelTrainer`` for a :func:`job_spec` (needs ``pip install 'gpu-preflight[sagemaker]'``)."""
    # optional: sagemaker comes with the [sagemaker] extra, not with a node-only install
    from sagemaker.core.shapes import MetricDefinition  # type: ignore[import-not-found, import-untyped, unused-ignore]
    from sagemaker.core.training.configs import Compute, Networking, OutputDataConfig, SourceCode, StoppingCondition  # type: ignore[import-not-found, import-untyped, unused-ignore]
    from sagemaker.train import ModelTrainer  # type: ignore[import-not-found, import-untyped, unused-ignore]
    from sagemaker.train.distributed import MPI, Torchrun  # type: ignore[import-not-found, import-untyped, unused-ignore]

    dist = spec["distributed"]
    distributed: Any = None
    if dist and dist["kind"] == "torchrun":
        distributed = Torchrun(process_count_per_node=dist["process_count_per_node"])
    elif dist and dist["kind"] == "mpi":
        distributed = MPI(process_count_per_node=dist["process_count_per_node"],
                          mpi_additional_options=dist["mpi_additional_options"] or None)
    kwargs: dict[str, Any] = {
        "training_image": spec["training_image"],
        "base_job_name": spec["base_job_name"],
        "source_code": SourceCode(**spec["source_code"]),
        "distributed": distributed,
        "compute": Compute(**spec["compute"]),
        "stopping_condition": StoppingCondition(**spec["stopping_condition"]),
        "hyperparameters": spec["hyperparameters"],
        "environment": spec["environment"],
    }
    if spec["role"]:
        kwargs["role"] = spec["role"]
    if spec["networking"]:
        kwargs["networking"] = Networking(**spec["networking"])
    if spec["output_data_config"]:
        kwargs["output_data_config"] = OutputDataConfig(**spec["output_data_config"])
    if session is not None:
        kwargs["sagemaker_session"] = session
    trainer = ModelTrainer(**kwargs)
    return trainer.with_metric_definitions([MetricDefinition(name=m["name"], regex=m["regex"])
                                            for m in spec["metric_definitions"]])


def launch(opts: LaunchOptions, *, wait: bool = True, logs: bool = True) -> Any:
    """Create the training job (and by default wait for it, streaming its logs)."""
    with tempfile.TemporaryDirectory(prefix="gpu-preflight-sm-") as tmp:
        spec = job_spec(opts, str(write_source_dir(Path(tmp))))
        trainer = build_model_trainer(spec)
        trainer.train(wait=wait, logs=logs)  # uploads the source dir before it returns
    return trainer


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """Launcher options; everything after ``--`` goes to ``gpu-preflight run``."""
    argv = list(argv)
    run_args = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(prog="python -m gpu_preflight.integrations.sagemaker_launcher",
                                description="Run gpu-preflight as a SageMaker training job (ModelTrainer). "
                                            "Arguments after '--' go to 'gpu-preflight run'.")
    p.add_argument("--image-uri", required=True, help="the gpu-preflight image in ECR (container/build-and-push.sh)")
    p.add_argument("--instance-type", default="ml.g5.12xlarge")
    p.add_argument("--instance-count", type=int, default=1)
    p.add_argument("--distributed", choices=DISTRIBUTED, default="auto",
                   help="auto: torchrun when the job has more than one GPU (default)")
    p.add_argument("--processes-per-node", type=int, help="default: the instance's GPU count")
    p.add_argument("--mpi-option", action="append", default=[], help="extra mpirun option (repeatable)")
    p.add_argument("--subnets", default="", help="comma-separated subnet ids (EFA needs a VPC)")
    p.add_argument("--security-groups", default="", help="comma-separated security group ids")
    p.add_argument("--role", help="execution role ARN (default: the SDK's resolution)")
    p.add_argument("--output-path", help="s3:// prefix for the report (default: the session's bucket)")
    p.add_argument("--base-job-name", default="gpu-preflight")
    p.add_argument("--max-runtime-s", type=int, default=3600)
    p.add_argument("--volume-size-gb", type=int, default=100)
    p.add_argument("--job-fails-on", choices=JOB_FAILS_ON, default="fail")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="container environment")
    p.add_argument("--dry-run", action="store_true", help="print the job spec as JSON; no AWS call, no SDK import")
    p.add_argument("--no-wait", action="store_true", help="return once the job is created")
    return p.parse_args(own), run_args


def options_from_args(args: argparse.Namespace, run_args: Sequence[str]) -> LaunchOptions:
    env = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise LaunchError(f"--env {item!r} is not KEY=VALUE")
        env[key] = value
    return LaunchOptions(
        image_uri=args.image_uri, instance_type=args.instance_type, instance_count=args.instance_count,
        distributed=args.distributed, processes_per_node=args.processes_per_node,
        subnets=tuple(s for s in args.subnets.split(",") if s),
        security_groups=tuple(s for s in args.security_groups.split(",") if s), role=args.role,
        output_path=args.output_path, base_job_name=args.base_job_name, max_runtime_s=args.max_runtime_s,
        volume_size_gb=args.volume_size_gb, run_args=tuple(run_args), job_fails_on=args.job_fails_on,
        mpi_options=tuple(args.mpi_option), environment=env)


def main(argv: Sequence[str] | None = None) -> int:
    args, run_args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        opts = options_from_args(args, run_args)
        spec = job_spec(opts, "<temporary directory with " + ENTRY_SCRIPT_NAME + ">")
    except LaunchError as exc:
        print(f"gpu-preflight: {exc}", file=sys.stderr)
        return 2
    for note in notes(opts):
        print(f"gpu-preflight: note: {note}", file=sys.stderr)
    if args.dry_run:
        shown = {**spec, "environment": redact_env(spec["environment"]),
                 "hyperparameters": {k: redact_text(v) for k, v in spec["hyperparameters"].items()}}
        print(json.dumps(shown, indent=2))
        return 0
    try:
        trainer = launch(opts, wait=not args.no_wait)
    except ImportError as exc:
        print(f"gpu-preflight: the SageMaker SDK is missing ({exc}): pip install 'gpu-preflight[sagemaker]'",
              file=sys.stderr)
        return 3
    job = getattr(trainer, "_latest_training_job", None)
    name = getattr(job, "training_job_name", None)
    print(f"gpu-preflight: training job {name or '(name unknown)'}; report in the job's model.tar.gz "
          f"under {spec['output_data_config'] or 'the session default bucket'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
