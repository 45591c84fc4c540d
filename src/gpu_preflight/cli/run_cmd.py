"""``gpu-preflight run``: parse the flags into a :class:`~gpu_preflight.run.RunRequest`, run it, print.

The run itself (node checks alone, one rank under a launcher, self-launched workers) is
:func:`gpu_preflight.run.run`, which a library user calls the same way.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..config import ConfigError
from ..outputs.options import DEFAULT_REPORT_NAME, OutputOptions
from ..outputs.sagemaker import REPORT_NAME, default_report_dir
from ..report import render
from ..run import LocaliseOptions, RunRequest, RunSettings, RunUsageError, request_from_env, run
from .argtypes import TIMEOUT_ENV, env_number, seconds
from .exits import EXIT_ERROR, EXIT_USAGE
from .run_flags import size_overrides

__all__ = ["cmd_run", "output_options", "run_request", "show"]


def output_options(args: argparse.Namespace) -> OutputOptions:
    """The output flags as :class:`~gpu_preflight.outputs.options.OutputOptions`.

    Inside a SageMaker training job without ``--report-dir``, the report directory is the one
    SageMaker uploads (:func:`~gpu_preflight.outputs.sagemaker.default_report_dir`): the run must
    know it before it starts, or the raw outputs it saves have nowhere to go and the report's
    artifact paths stay empty.
    """
    report_dir, report_name = args.report_dir, args.report_name
    if report_dir is None and (uploaded := default_report_dir(os.environ)) is not None:
        report_dir = str(uploaded)
        report_name = REPORT_NAME if report_name == DEFAULT_REPORT_NAME else report_name
    return OutputOptions(report_dir=report_dir, report_name=report_name, pretty=args.pretty,
                         format=args.format, verbose=args.verbose, quiet=args.quiet, outputs=tuple(args.output),
                         mlflow_uri=args.mlflow_uri, prom_textfile=args.prom_textfile, history=args.history,
                         history_db=args.history_db, cluster_name=args.cluster_name)


def run_request(args: argparse.Namespace) -> RunRequest:
    """The :class:`~gpu_preflight.run.RunRequest` of a parsed ``run`` command line.

    ``--timeout-s`` (else ``$GPU_PREFLIGHT_TIMEOUT_S``, checked the same way: a bad value is a
    ``ConfigError``) is what its help says, the time limit per probe, check and collective: the
    request's ``probe_timeout_s`` and ``collective_timeout_s``. The workload-size flags become
    the ``--set`` overrides they stand for (after the command line's own ``--set``, so the flag
    wins); a combination they cannot hold is a ``ValueError`` with one line.
    """
    timeout = args.timeout_s if args.timeout_s is not None else env_number(TIMEOUT_ENV, seconds())
    overrides = [*args.set, *size_overrides(args.iters, args.numel, args.steps, args.epochs, args.batch_size)]
    settings = RunSettings(suite=args.suite, include=tuple(args.check), exclude=tuple(args.skip), profile=args.profile,
                           config_file=args.config, overrides=tuple(overrides), expect_gpus=args.expect_gpus,
                           replay=args.replay, kernel_log=args.kernel_log, probe_timeout_s=timeout,
                           collective_timeout_s=timeout, fail_on=args.fail_on, node_only=args.node_only)
    localise = LocaliseOptions(mode=args.localize, exclude_file=args.exclude_file, exclude_style=args.exclude_style)
    return RunRequest(settings, output_options(args), localise)


def show(report: Any, output: Any) -> None:
    """The verdict as asked (``report`` typed, or its dict): the console view on stderr, or one
    format alone on stdout."""
    if output.format == "console":
        # start-up: the console renderer only for --format console
        from ..report.console import render_console

        render_console(report, verbose=output.verbose)
    else:
        sys.stdout.write(render(report, output.format))
        sys.stdout.flush()


def cmd_run(args: argparse.Namespace) -> int:
    if args.replay:
        # start-up: snapshots only for --replay
        from ..snapshots import ReplayError, load_dump

        try:
            load_dump(args.replay)  # fail fast with a clear message, before any check runs
        except ReplayError as exc:
            print(f"gpu-preflight: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if args.kernel_log:
        # start-up: a replay loads no backend; only with --kernel-log
        from ..backends.kernel_log import KernelLogFileError, SavedKernelLog

        try:
            SavedKernelLog(args.kernel_log)  # a missing file, a FIFO or /dev/zero: refused before any check runs
        except KernelLogFileError as exc:
            print(f"gpu-preflight: {exc}", file=sys.stderr)
            return EXIT_ERROR

    try:  # a self-launched worker's request comes typed from its supervisor, not from flags
        request = request_from_env(os.environ) or run_request(args)
    except ConfigError:
        raise  # main() prints it as a configuration error
    except ValueError as exc:
        print(f"gpu-preflight run: error: {exc} (see 'gpu-preflight run --help')", file=sys.stderr)  # as argparse
        return EXIT_USAGE
    try:
        return run(request, show=show).exit_code
    except RunUsageError as exc:
        print(f"gpu-preflight: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyError as exc:
        print(f"gpu-preflight: {exc.args[0]}", file=sys.stderr)
        return EXIT_USAGE
