"""``gpu-preflight run``: node checks alone, one rank under a launcher, or self-launched workers.

- ``--node-only``/``--replay``: the node checks of this host (no torch).
- under torchrun, srun, mpirun, SageMaker or a PyTorchJob: this process is one rank;
  rank 0 writes the cluster report.
- alone: start one worker per GPU (two CPU workers without GPUs) and supervise them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from .exits import EXIT_ERROR, EXIT_USAGE

STARTED = time.monotonic()  # the run's wall time prices the checks (cluster_summary.cost_benefit)


def _timeout(args: argparse.Namespace, nodes: int) -> float:
    if args.timeout_s is not None:
        return float(args.timeout_s)
    base = 60.0 if nodes <= 1 else 180.0
    return base * (3 if args.suite == "full" else 1)


def _options(args: argparse.Namespace, timeout_s: float) -> Any:
    from ..engine import RunOptions

    return RunOptions(suite=args.suite, include=args.check, exclude=args.skip, profile=args.profile,
                      config_file=args.config, overrides=args.set, expect_gpus=args.expect_gpus,
                      replay=args.replay, kernel_log=args.kernel_log, report_dir=args.report_dir,
                      timeout_s=timeout_s, fail_on=args.fail_on)


def rescore(report: dict[str, Any], args: argparse.Namespace) -> None:
    """Scores, advice and cost with the site's ``[report]`` settings, over the final findings
    (history, localisation) and the run's whole wall time."""
    from ..config import build_config
    from ..report.advice import add_advice
    from ..report.scores import add_scores

    config = build_config(config_file=args.config, overrides=args.set)[0].report
    report.setdefault("run", {})["wall_s"] = round(time.monotonic() - STARTED, 3)
    add_advice(add_scores(report, config), config)


def emit(report: dict[str, Any], args: argparse.Namespace, nodes: list[Any]) -> int:
    """Judge against history, write the report directory (report.json compact, or indented with
    ``--pretty``), publish, print; return the exit code.

    Publishing comes before the verdict so that ``[RESULT]`` closes the verdict. A report
    directory that cannot be written (read-only, full, not a directory, refused as unsafe)
    does not hide the verdict: it is printed as always, then one line says what could not be
    written, and the run exits 3 since its report is not where it was asked to be. Nothing
    half-written is left there (:mod:`gpu_preflight.safeio`), and what is published comes
    from this run, never from a stale ``report.json`` left in the directory.
    """
    from ..outputs.publish import annotate, publish
    from ..report import render, write_report
    from ..report.console import render_console
    from ..safeio import describe_error

    annotate(report, args)
    rescore(report, args)
    unwritten = None
    if args.report_dir:
        try:
            path = write_report(report, nodes, args.report_dir, pretty=args.pretty)
            print(f"gpu-preflight: report written to {path}", file=sys.stderr)
        except (OSError, ValueError) as exc:
            unwritten = f"could not write the report to {args.report_dir}: {describe_error(exc, args.report_dir)}"
            args = argparse.Namespace(**{**vars(args), "report_dir": None})
    publish(report, args, nodes)
    if args.format == "console":
        render_console(report, verbose=args.verbose)
    else:
        sys.stdout.write(render(report, args.format))
        sys.stdout.flush()
    if unwritten:
        print(f"gpu-preflight: {unwritten}", file=sys.stderr)
        return EXIT_ERROR
    return int(report["cluster_summary"]["exit_code"])


def cmd_run(args: argparse.Namespace, argv: list[str]) -> int:
    from ..probes.gpu import ReplayError, load_dump

    if args.replay:
        try:
            load_dump(args.replay)  # fail fast with a clear message, before any check runs
        except ReplayError as exc:
            print(f"gpu-preflight: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if args.kernel_log:
        from ..backends.kernel_log import KernelLogFileError, SavedKernelLog

        try:
            SavedKernelLog(args.kernel_log)  # a missing file, a FIFO or /dev/zero: refused before any check runs
        except KernelLogFileError as exc:
            print(f"gpu-preflight: {exc}", file=sys.stderr)
            return EXIT_ERROR
    try:
        _validate(args)
        if args.node_only or args.replay or not _wants_cluster_checks(args):
            return node_only(args)
        from ..distributed.topology import TopologyError, detect  # not needed by node-only runs

        try:
            topo = detect(os.environ)
        except TopologyError as exc:
            print(f"gpu-preflight: cannot tell this process's place in the job: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if topo.is_distributed:
            return as_rank(args, topo)
        return self_launched(args, argv)
    except KeyError as exc:
        print(f"gpu-preflight: {exc.args[0]}", file=sys.stderr)
        return EXIT_USAGE


def _validate(args: argparse.Namespace) -> None:
    """Configuration, profile and check patterns, checked before any worker starts.

    A typo must be a usage error here (exit 3), not an ERROR finding from every worker later.
    """
    from ..config import build_config, find_profile
    from ..registry import matching
    from .argtypes import TIMEOUT_ENV, env_number, seconds

    if args.timeout_s is None:  # the environment's timeout, checked like --timeout-s (never silently ignored)
        args.timeout_s = env_number(TIMEOUT_ENV, seconds())
    profile = find_profile(args.profile) if args.profile and args.profile != "auto" else None
    build_config(profile=profile, config_file=args.config, overrides=args.set)
    matching([*args.check, *args.skip], "node")


def _wants_cluster_checks(args: argparse.Namespace) -> bool:
    """``--check`` patterns that select only node checks need no workers."""
    from ..registry import all_checks

    if not args.check:
        return True
    return any(spec.scope == "cluster" and spec.matches(p) for spec in all_checks() for p in args.check)


def node_only(args: argparse.Namespace, note: str | None = None) -> int:
    from ..engine import run_checks
    from ..model import CheckResult, Finding, Status
    from ..report import build_report

    node = run_checks(_options(args, args.timeout_s or 30.0))
    if note:
        node.results.append(CheckResult("workloads", "Distributed workloads", [Finding(
            "workloads", Status.SKIP, node.hostname, "not_run", note,
            recommendation="pip install 'gpu-preflight[torch]' to run GEMM, memory, collectives and training.")], 0.0))
    report = build_report([node], expected_total_gpus=_expected(node), assess=False)  # emit() scores it
    return emit(report, args, [node])


def _expected(node: Any) -> int | None:
    for f in node.findings:
        if f.check_id == "gpu.inventory.count" and isinstance(f.expected, int):
            return int(f.expected)
    return None


def as_rank(args: argparse.Namespace, topo: Any) -> int:
    """One rank under a launcher (or under our own supervisor).

    Rank 0 reports; if it goes silent, the first rank to notice takes over the gather. The
    verdict is published only once the report is out, and ranks then leave in the order
    :mod:`gpu_preflight.distributed.leave` describes.
    """
    from ..cluster.aggregate import build_cluster_report
    from ..distributed.leave import verdict_text, write_error_file
    from ..distributed.runner import run_rank

    timeout = _timeout(args, topo.num_nodes)
    opts = _options(args, min(timeout, 30.0))
    result_dir = os.environ.get("GPU_PREFLIGHT_RESULT_DIR")
    view = _progress_view(args) if topo.rank == 0 and topo.launcher != "self" else None  # self: the supervisor shows it
    try:
        outcome = run_rank(opts, topo, timeout_s=timeout, result_dir=result_dir, view=view)
    except Exception as exc:  # the job's store cannot be reached: nothing can be reported from here
        if view is not None:
            view.close()
        line = (f"gpu-preflight: rank {topo.rank} on {topo.node_name} could not join the job: "
                f"{type(exc).__name__}: {exc}")
        print(line, file=sys.stderr)
        write_error_file(" ".join(line.split()), EXIT_ERROR)
        return EXIT_ERROR
    localized = (_localize(args, topo, outcome, timeout)
                 if args.localize and topo.num_nodes > 1 and outcome.formed else None)
    if outcome.gathered is None:
        code = outcome.await_verdict()  # None: rank 0 went silent and this rank reports instead
        if code is not None:
            return int(outcome.leave(code))
        localized = None
    assert outcome.gathered is not None  # rank 0, or the rank that took over from it
    outcome.mark("report")
    extra, blocks = ([localized[0]], {"localization": localized[1]}) if localized else ([], {})
    report, code = build_cluster_report(outcome.gathered, outcome.config, fail_on=args.fail_on,
                                        include=args.check, exclude=args.skip, suite=args.suite, timeout_s=timeout,
                                        extra_results=extra, summary_extra=blocks, assess=False)  # emit() scores
    outcome.quiet()
    excluded = True
    if args.localize and not localized and topo.launcher != "self":  # self-launch: the supervisor says it
        excluded = (_localize_not_run(args, ONE_NODE, empty_exclude=True) if topo.num_nodes <= 1 else
                    _localize_not_run(args, "the process group did not form, so no pair of nodes can be tested"))
    if localized and args.exclude_file:
        from ..localize.report import write_exclude_file

        path = write_exclude_file(args.exclude_file, localized[1]["exclude_nodes"], args.exclude_style)
        print(f"gpu-preflight: exclude list written to {path}", file=sys.stderr)
    if topo.launcher == "self" and result_dir:
        from ..outputs.publish import annotate

        annotate(report, args)  # history findings count in the verdict every rank exits with
        code = int(report["cluster_summary"]["exit_code"])
        from ..safeio import atomic_writer

        with atomic_writer(os.path.join(result_dir, "report.json")) as fh:
            json.dump(report, fh)
    else:
        code = emit(report, args, [])
        code = code if excluded else EXIT_ERROR
    outcome.publish(code, verdict_text(report))
    return int(outcome.leave(code))


def _localize(args: argparse.Namespace, topo: Any, outcome: Any, timeout: float) -> tuple[Any, dict[str, Any]] | None:
    """Pairwise/group localisation rounds (every rank takes part); rank 0 returns result and block."""
    from ..distributed import localize_rounds as rounds

    plan = outcome.plan
    nbytes, iters = (plan.sizes[-1], plan.iters) if plan else (4 << 20, 3)
    if outcome.gathered is None:
        rounds.follow(outcome.store, topo, nbytes=nbytes, iters=iters, device=outcome.device, budget_s=timeout * 30)
        return None
    outcome.mark("localize")
    from ..cluster.aggregate import node_names
    from ..localize.report import localization_block, localization_result

    loc, wall = rounds.lead(outcome.store, topo, outcome.gathered, mode=args.localize,
                            floor_gbps=outcome.config.perf.node_link_min_gbps, timeout_s=timeout, nbytes=nbytes,
                            iters=iters, device=outcome.device)
    names = node_names(outcome.gathered)
    return localization_result(loc, names, duration_s=wall), localization_block(loc, names, duration_s=wall)


ONE_NODE = "one node: localisation tests nodes against each other"


def _localize_not_run(args: argparse.Namespace, why: str, *, empty_exclude: bool = False) -> bool:
    """``--localize`` that cannot run says so. With ``empty_exclude`` (one node: nothing can be
    excluded) an asked-for exclude file is written empty, so a job script reading it does not find
    the last run's list. False when that file could not be written (the run then exits 3)."""
    from ..safeio import describe_error

    note, ok = "", True
    if args.exclude_file and empty_exclude:
        from ..localize.report import write_exclude_file

        try:
            note = f"; empty exclude list written to {write_exclude_file(args.exclude_file, [], args.exclude_style)}"
        except (OSError, ValueError) as exc:
            ok = False
            note = f"; exclude list not written to {args.exclude_file}: {describe_error(exc, args.exclude_file)}"
    print(f"gpu-preflight: --localize not run: {why}{note}", file=sys.stderr)
    return ok


def _progress_view(args: argparse.Namespace) -> Any:
    """The view of a distributed run's stages on stderr (:mod:`gpu_preflight.report.progress`),
    or None with ``--quiet`` or ``GPU_PREFLIGHT_PROGRESS=0``."""
    from ..report.progress import stage_view, view_mode

    quiet = bool(getattr(args, "quiet", False))
    return None if view_mode(quiet=quiet) == "off" else stage_view(quiet=quiet)


def self_launched(args: argparse.Namespace, argv: list[str]) -> int:
    from ..distributed.launch import gathered_from_files, local_gpu_count, supervise, torch_available

    if not torch_available():
        return node_only(args, note="distributed workloads not run: torch is not installed")
    gpus = local_gpu_count()
    from ..config import build_config

    config, _ = build_config(config_file=args.config, overrides=args.set)
    workers = gpus or config.workload.cpu_workers
    timeout = _timeout(args, 1)
    budget = timeout * 4 + 120
    sup = supervise(argv, workers, budget_s=budget, timeout_s=timeout, view=_progress_view(args))
    report = sup.report
    if report is None:
        from ..cluster.aggregate import build_cluster_report

        topo = {"launcher": "self", "world_size": workers, "num_nodes": 1, "local_world_size": workers,
                "hostname": os.uname().nodename, "hosts": [os.uname().nodename]}
        gathered = gathered_from_files(sup, workers, topo)
        report, _ = build_cluster_report(gathered, config, fail_on=args.fail_on, include=args.check,
                                         exclude=args.skip, suite=args.suite, timeout_s=timeout, assess=False)
    excluded = not args.localize or _localize_not_run(args, ONE_NODE, empty_exclude=True)
    code = emit(report, args, [])
    code = code if excluded else EXIT_ERROR
    _keep_worker_logs(sup, args.report_dir)
    return code


def _keep_worker_logs(sup: Any, report_dir: str | None) -> None:
    """Worker logs go beside the report (``artifacts/workers/``); the scratch directory goes.

    A report directory that cannot be opened was already named by :func:`emit`; only a
    failure of the copies themselves is reported here.
    """
    import shutil

    from ..safeio import describe_error, open_dir

    try:
        if report_dir:
            with open_dir(report_dir, create=False) as out:
                try:
                    with out.subdir("artifacts/workers") as dest:
                        for rank, log in sup.logs.items():
                            if log.exists():
                                dest.copy_in(f"rank{rank}.log", log)
                except (OSError, ValueError) as exc:
                    print(f"gpu-preflight: worker logs not kept: {describe_error(exc)}", file=sys.stderr)
    except (OSError, ValueError):
        pass
    finally:
        shutil.rmtree(sup.result_dir, ignore_errors=True)
