"""Inside a SageMaker training job: run gpu-preflight, keep the report, log for CloudWatch.

ModelTrainer's drivers start the job's *entry script* (``python``, ``torchrun`` or
``mpirun python -m mpi4py``) with the hyperparameters as ``--key value`` pairs; the
launcher uploads a two-line script that calls :func:`main` here. Every process runs it;
topology comes from the launcher's variables (``gpu_preflight.backends.launcher.topology``,
which reads SageMaker's ``SM_HOSTS``/``SM_CURRENT_HOST``), and rank 0 (on ``algo-1``)
writes the report.

What the job leaves behind:

* ``report.json`` and raw artifacts in ``SM_MODEL_DIR`` (``/opt/ml/model``), which
  SageMaker uploads to S3 as ``<output path>/<job name>/output/model.tar.gz``;
* on stdout (CloudWatch Logs ``/aws/sagemaker/TrainingJobs``) one JSON line per finding
  and a verdict line (:mod:`gpu_preflight.report.jsonl`), plus the console table on stderr;
* when the job is failed by the verdict, ``$SM_OUTPUT_DIR/failure`` (``/opt/ml/output``): SageMaker shows its
  first 1024 characters as the job's FailureReason, so the console says *which* check
  failed instead of "AlgorithmError: exit code 2".

This module is the job's command line (it runs ``gpu-preflight`` in-process, through
:func:`gpu_preflight.cli.main.main`), so it sits in the CLI's layer; its name is the one
the uploaded script imports, kept stable for images with an older or newer gpu-preflight.
What the launcher needs of it lives in :mod:`.sagemaker_script`.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..backends.launcher.topology import TopologyError, detect
from ..boundedio import REPORT_LIMIT, load_json
from ..findings.canonical import result_line
from ..findings.model import ClusterReport
from ..integrations.sagemaker_script import ENTRY_SCRIPT as ENTRY_SCRIPT
from ..integrations.sagemaker_script import ENTRY_SCRIPT_NAME as ENTRY_SCRIPT_NAME
from ..integrations.sagemaker_script import JOB_FAILS_ON
from ..redact import redact_text
from ..report.jsonl import render_jsonl
from ..safeio import describe_error, write_text
from .main import main as cli_main

DEFAULT_MODEL_DIR = "/opt/ml/model"
DEFAULT_OUTPUT_DIR = "/opt/ml/output"
FAILURE_MAX = 1024


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The hyperparameters the launcher sets (SageMaker passes them as ``--key value``)."""
    p = argparse.ArgumentParser(prog="gpu-preflight-sagemaker-entry")
    p.add_argument("--run-args", default="", help="arguments for 'gpu-preflight run', one shell-quoted string")
    p.add_argument("--job-fails-on", choices=JOB_FAILS_ON, default="fail",
                   help="fail: the job fails on FAIL/ERROR; warn: also on WARN; never: the job always "
                        "succeeds and the verdict is only in the report and logs")
    p.add_argument("--report-dir", default=None, help="default: $SM_MODEL_DIR (uploaded to S3 by SageMaker)")
    return p.parse_args(list(argv))


def run_argv(args: argparse.Namespace, env: Mapping[str, str]) -> list[str]:
    """The ``gpu-preflight`` argv: ``run --report-dir <model dir>`` plus the user's arguments."""
    report_dir = args.report_dir or env.get("SM_MODEL_DIR") or DEFAULT_MODEL_DIR
    return ["run", "--report-dir", report_dir, *shlex.split(args.run_args)]


def job_exit_code(code: int, job_fails_on: str) -> int:
    """The process exit code that makes SageMaker mark the job failed or completed.

    gpu-preflight's own codes are 0 pass, 1 warn, 2 fail, 3 error; a WARN should not fail
    a health-check job unless asked, and ``never`` keeps a fleet scan from stopping at the
    first bad node.
    """
    if job_fails_on == "never":
        return 0
    if job_fails_on == "fail" and code == 1:
        return 0
    return code


def is_reporting_rank(env: Mapping[str, str]) -> bool:
    """Whether this process is the one that wrote the report (global rank 0)."""
    try:
        return detect(env).rank == 0
    except TopologyError:
        return False


def failure_reason(report: ClusterReport) -> str:
    """A short FailureReason: the ``[RESULT]`` line, then the first issues, within 1024 characters."""
    typed = report
    text = "gpu-preflight " + result_line(typed)
    for issue in typed.cluster_summary.issues:
        if len(text) + len(str(issue)) + 3 > FAILURE_MAX:
            break
        text += " | " + str(issue)
    return text[:FAILURE_MAX]


def failure_file(env: Mapping[str, str]) -> Path:
    """Where SageMaker reads the FailureReason: ``failure`` in ``SM_OUTPUT_DIR``."""
    return Path(env.get("SM_OUTPUT_DIR") or DEFAULT_OUTPUT_DIR) / "failure"


def publish(report_path: Path, exit_code: int, failure_path: Path) -> None:
    """CloudWatch lines on stdout and, when the job fails, the FailureReason file."""
    try:
        data = load_json(report_path, limit=REPORT_LIMIT, what="report")
    except (OSError, ValueError) as exc:
        print(f"gpu-preflight: no report to publish at {report_path}: {exc}", file=sys.stderr)
        return
    try:
        report = ClusterReport.from_dict(data)  # checked against the model: the path of what is wrong, if anything
    except ValueError as exc:
        print(f"gpu-preflight: no report to publish at {report_path}: not a gpu-preflight report ({exc})",
              file=sys.stderr)
        return
    sys.stdout.write(render_jsonl(report))
    sys.stdout.flush()
    if exit_code != 0:
        try:
            write_text(failure_path, failure_reason(report))
        except (OSError, ValueError) as exc:
            print(f"gpu-preflight: cannot write {failure_path}: {describe_error(exc)}", file=sys.stderr)


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run gpu-preflight as this job's process; returns the job's exit code."""
    environ = os.environ if env is None else env
    args = parse_args(sys.argv[1:] if argv is None else argv)
    argv_run = run_argv(args, environ)

    print(f"gpu-preflight: sagemaker entry: gpu-preflight {redact_text(shlex.join(argv_run))}", file=sys.stderr,
          flush=True)
    code = cli_main(argv_run)
    exit_code = job_exit_code(code, args.job_fails_on)
    report_path = Path(argv_run[2]) / "report.json"
    if is_reporting_rank(environ) and report_path.is_file():
        publish(report_path, exit_code, failure_file(environ))
    return exit_code
