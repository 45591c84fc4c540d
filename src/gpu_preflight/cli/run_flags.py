"""The acceptance suite's ``run`` flags (spec 004): the report's file name and the workload sizes.

Each size flag is sugar for the ``--set`` of a setting that already exists, so a site file,
``config defaults`` and ``checks explain`` keep describing what a run does:

==================  =====================================================================
``--iters N``       ``workload.collective_iters`` and ``workload.collective_iters_cpu``
                    (timed iterations per collective size, GPU ranks and CPU workers)
``--numel N``       ``workload.collective_max_bytes_{quick_gpu,full_gpu,cpu}`` = 4·N
                    (the largest all-reduce, in float32 elements as the suite counts them)
``--steps N``       ``workload.train_steps`` = N × ``--epochs`` (default 1 epoch)
``--epochs N``      with ``--steps``: the training smokes run N epochs of ``--steps`` steps
``--batch-size N``  ``workload.train_batch_size`` (training samples per step on each rank)
``--train-smoke``   the suite's DDP training smoke, which every run of two ranks or more
                    includes (the spelling ``ddp_tests.py --train-smoke`` used; sets nothing)
==================  =====================================================================

``--iters`` and ``--numel`` also set ``workload.collective_scaling = false``: the suite asks for
exactly these values, which the job-size table (docs/distributed.md) must not scale.

The ranges are the settings' own (``tests/test_run_flags.py`` holds them to the schema), so
an out-of-range value is argparse's one-line usage error (exit 3) naming the flag.
"""

from __future__ import annotations

import argparse

from ..outputs.options import DEFAULT_REPORT_NAME, check_report_name
from .argtypes import count

__all__ = ["FLAG_SETTINGS", "MAX_BATCH", "NUMEL_BYTES", "add_acceptance_arguments", "report_name", "size_overrides"]

NUMEL_BYTES = 4  # float32, the element the suite's --numel counts
MAX_STEPS = 100_000  # workload.train_steps' upper bound
MAX_BATCH = 65_536  # workload.train_batch_size's upper bound
EXACT_SIZES = "workload.collective_scaling=false"  # with --iters or --numel: the values as given
FLAG_SETTINGS = {  # flag -> the settings it sets (for the docs and the range test)
    "iters": ("workload.collective_iters", "workload.collective_iters_cpu"),
    "numel": ("workload.collective_max_bytes_quick_gpu", "workload.collective_max_bytes_full_gpu",
              "workload.collective_max_bytes_cpu"),
    "steps": ("workload.train_steps",),
    "batch_size": ("workload.train_batch_size",),
}


def report_name(text: str) -> str:
    """``--report-name``: a bare file name in ``--report-dir``."""
    try:
        return check_report_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_acceptance_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--report-name`` and the workload-size flags to ``gpu-preflight run``."""
    parser.add_argument("--report-name", type=report_name, default=DEFAULT_REPORT_NAME, metavar="NAME",
                        help="file name of the JSON report in --report-dir (default: report.json)")
    g = parser.add_argument_group("workload sizes (shorthands for --set workload.*)")
    g.add_argument("--iters", type=count(1, 10_000), metavar="N",
                   help="timed iterations per collective size (workload.collective_iters{,_cpu})")
    g.add_argument("--numel", type=count(1, (64 << 30) // NUMEL_BYTES), metavar="N",
                   help="largest collective message in float32 elements (workload.collective_max_bytes_* = 4N)")
    g.add_argument("--steps", type=count(1, MAX_STEPS), metavar="N",
                   help="training smoke steps per epoch (workload.train_steps = N x --epochs)")
    g.add_argument("--epochs", type=count(1, MAX_STEPS), metavar="N",
                   help="with --steps: training smoke epochs (default 1)")
    g.add_argument("--train-smoke", action="store_true",
                   help="the suite's DDP training smoke (ddp_tests.py --train-smoke): part of every run of two ranks "
                        "or more, judged by train.smoke; accepted so the suite's command lines run unchanged")
    g.add_argument("--batch-size", type=count(1, MAX_BATCH), metavar="N",
                   help="training smoke samples per step on each rank (workload.train_batch_size; default 512, "
                        "the whole set)")


def size_overrides(iters: int | None, numel: int | None, steps: int | None, epochs: int | None,
                   batch_size: int | None = None) -> list[str]:
    """The ``--set`` strings the size flags stand for; ``ValueError`` (one line, naming the flag)
    for a combination the settings cannot hold."""
    out = [f"{key}={iters}" for key in FLAG_SETTINGS["iters"]] if iters is not None else []
    if batch_size is not None:
        out.append(f"{FLAG_SETTINGS['batch_size'][0]}={batch_size}")
    if numel is not None:
        out += [f"{key}={numel * NUMEL_BYTES}" for key in FLAG_SETTINGS["numel"]]
    if iters is not None or numel is not None:
        out.append(EXACT_SIZES)
    if epochs is not None and steps is None:
        raise ValueError("argument --epochs: needs --steps (the steps of one epoch)")
    if steps is not None:
        total = steps * (epochs or 1)
        if total > MAX_STEPS:
            raise ValueError(f"argument --epochs: --steps x --epochs must be at most {MAX_STEPS}, got {total}")
        out.append(f"{FLAG_SETTINGS['steps'][0]}={total}")
    return out
