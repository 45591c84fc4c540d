"""``gpu-preflight slurm ...``: act on Slurm from gpu-preflight results (parsing and printing only).

* ``slurm healthcheck`` — for ``HealthCheckProgram``: reads this node's last result file,
  drains or resumes; never runs a check, answers in about 0.1 s.
* ``slurm prolog`` / ``slurm epilog`` — run the quick node checks under a time budget,
  write the result file; on failure drain with our reason and exit 1 (Slurm requeues).
* ``slurm drain-report REPORT.json`` — apply a cluster report: drain failed nodes and
  resume our own drains on nodes that passed.

All of them run dry unless ``--apply`` is given (or ``slurm.dry_run = false`` is set): dry
runs print the ``scontrol update`` commands they would run. The logic lives in
:mod:`gpu_preflight.integrations.slurm_modes`. Runnable before it is wired into the main
CLI as ``python -m gpu_preflight.cli.slurm_cmd healthcheck ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from msgspec.structs import replace

from ..config import ConfigError, build_config
from ..config.slurm_schema import SlurmConfig, slurm_config
from .argtypes import count, fraction, gpu_count, seconds
from .exits import EXIT_ERROR, EXIT_USAGE, Parser

if TYPE_CHECKING:
    from ..integrations.slurm_ctl import Scontrol
    from ..integrations.slurm_modes import Outcome


def _common(p: argparse.ArgumentParser) -> None:
    act = p.add_mutually_exclusive_group()
    act.add_argument("--apply", dest="dry_run", action="store_false", default=None,
                     help="run the scontrol commands (default: dry run, print them)")
    act.add_argument("--dry-run", dest="dry_run", action="store_true", help="only print (overrides slurm.dry_run)")
    p.add_argument("--config", metavar="FILE", help="site config file (TOML or YAML); [slurm] holds the policy")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override one setting, e.g. --set slurm.max_drain_fraction=0.05")
    p.add_argument("--reason-prefix", help="drain reason prefix; only drains with it are resumed "
                                           "(default slurm.reason_prefix, 'gpu-preflight:')")
    p.add_argument("--max-drain-fraction", type=fraction(), metavar="F",
                   help="circuit breaker: most of the cluster that may be out at once (default 0.1)")
    p.add_argument("--min-drain-nodes", type=count(0, 1_000_000), metavar="N",
                   help="the breaker always allows this many nodes out (default 1)")
    p.add_argument("--result-file", metavar="PATH", help="this node's last result ('{node}' = Slurm node name)")
    p.add_argument("--max-result-age-s", type=seconds(31_536_000), metavar="S",
                   help="older results are stale (default 3600)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output on stdout")


def _node_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--node", help="Slurm node name (default $SLURMD_NODENAME, else the short host name)")


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``slurm`` and its subcommands on the CLI's subparsers."""
    slurm = sub.add_parser("slurm", help="drain/resume Slurm nodes: HealthCheckProgram, prolog/epilog, reports",
                           description="Drain failing nodes with a 'gpu-preflight:' reason, resume only our own "
                                       "drains after a passing re-check, never exceed the circuit breaker. Dry "
                                       "run unless --apply.")
    cmds = slurm.add_subparsers(dest="slurm_cmd", required=True)

    hc = cmds.add_parser("healthcheck", help="HealthCheckProgram mode: act on the last result, fast",
                         description="Read this node's last result file and drain/resume. Never runs a check. "
                                     "Exit 0 pass, 2 fail, 3 no usable result or scontrol trouble.")
    _node_args(hc)
    _common(hc)
    hc.add_argument("--stale-result", choices=("ignore", "drain"), dest="stale_result",
                    help="missing/stale result: report only (default) or drain")

    for phase in ("prolog", "epilog"):
        p = cmds.add_parser(phase, help=f"Slurm {phase}: quick node checks, drain on failure",
                            description=f"Run the quick node checks (time-limited), write the result file; on "
                                        f"failure drain with our reason and exit 1 so Slurm keeps jobs off the "
                                        f"node{' and requeues the job' if phase == 'prolog' else ''}. Exit 0 "
                                        f"otherwise, and in dry run.")
        _node_args(p)
        _common(p)
        p.add_argument("--timeout-s", type=seconds(),
                       help="budget for all node checks (default slurm.prolog_timeout_s)")
        p.add_argument("--expect-gpus", type=gpu_count, metavar="N", help="GPUs this node must have")
        p.add_argument("--check", action="append", default=[], metavar="ID", help="only these checks (glob)")
        p.add_argument("--skip", action="append", default=[], metavar="ID", help="skip these checks (glob)")
        p.add_argument("--profile", default="auto", help="GPU-model profile (default: auto)")
        p.add_argument("--replay", metavar="FILE", help="judge an NVML snapshot instead of the live GPUs")
        p.add_argument("--kernel-log", metavar="FILE", help="read Xid events from a saved kernel log")

    dr = cmds.add_parser("drain-report", help="apply a cluster report: drain failed nodes (breaker applies)",
                         description="Drain the nodes a report failed and resume our drains on nodes it passed. "
                                     "Exit 0 done, 2 a failure was not acted on (drain refused by the breaker, "
                                     "node matched to no Slurm node, cluster-wide failure), 3 could not act.")
    dr.add_argument("report", metavar="REPORT.json", help="a report.json from `gpu-preflight run`")
    _common(dr)


def _policy(args: argparse.Namespace) -> SlurmConfig:
    """The [slurm] section with the command-line flags on top; raises ConfigError."""
    config, _ = build_config(config_file=args.config, overrides=args.set)
    cfg = slurm_config(config)
    flags = {"reason_prefix": args.reason_prefix, "max_drain_fraction": args.max_drain_fraction,
             "min_drain_nodes": args.min_drain_nodes, "result_file": args.result_file,
             "max_result_age_s": args.max_result_age_s, "dry_run": args.dry_run,
             "stale_result_action": getattr(args, "stale_result", None),
             "prolog_timeout_s": getattr(args, "timeout_s", None)}
    return replace(cfg, **{k: v for k, v in flags.items() if v is not None})


def _node_name(args: argparse.Namespace) -> str:
    return str(args.node or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0])


def run(args: argparse.Namespace) -> int:
    """Run a ``slurm`` subcommand; returns the process exit code."""
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..integrations.slurm_ctl import Scontrol

    job_phase = args.slurm_cmd in ("prolog", "epilog")
    try:
        cfg = _policy(args)
        problems = cfg.problems()
    except ConfigError as exc:
        problems = [f"configuration error: {exc}"]
    if problems:
        for problem in problems:
            print(f"gpu-preflight slurm: {problem}", file=sys.stderr)
        if job_phase:  # an operator's typo must not make every node fail its jobs (and Slurm drain it)
            print(f"gpu-preflight slurm {args.slurm_cmd}: not checking; exiting 0 so jobs still run",
                  file=sys.stderr)
            return 0
        return EXIT_USAGE
    ctl = Scontrol(cfg.scontrol, cfg.command_timeout_s)
    outcome: Outcome | None  # None: a job phase or report that did not get as far as acting
    if args.slurm_cmd == "healthcheck":
        # start-up: --help/--version import every command module; this command's work loads when it runs
        from ..integrations.slurm_modes import healthcheck

        outcome = healthcheck(_node_name(args), cfg, ctl, dry_run=cfg.dry_run)
    elif job_phase:
        outcome = _job_phase(args, cfg, ctl)
        if outcome is None:
            return 0
    else:
        outcome = _drain_report(args, cfg, ctl)
        if outcome is None:
            return EXIT_USAGE
    if args.format == "json":
        print(json.dumps(outcome.to_dict(), indent=1))
    else:
        print(outcome.text())
    return int(outcome.exit_code)


def _job_phase(args: argparse.Namespace, cfg: SlurmConfig, ctl: Scontrol) -> Outcome | None:
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..engine import RunOptions
    from ..integrations.slurm_modes import prolog_check, run_node_checks

    options = RunOptions(suite="quick", include=args.check, exclude=args.skip, profile=args.profile,
                         config_file=args.config, overrides=args.set, expect_gpus=args.expect_gpus,
                         replay=args.replay, kernel_log=args.kernel_log, probe_timeout_s=cfg.prolog_timeout_s,
                         fail_on="warn" if cfg.drain_on == "warn" else "fail")
    try:
        report, problem = run_node_checks(options, cfg.prolog_timeout_s)
    except (ConfigError, KeyError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) else exc
        print(f"gpu-preflight slurm {args.slurm_cmd}: {message}; not checking, exiting 0 so jobs still run",
              file=sys.stderr)
        return None
    return prolog_check(_node_name(args), cfg, ctl, report, problem, dry_run=cfg.dry_run)


def _drain_report(args: argparse.Namespace, cfg: SlurmConfig, ctl: Scontrol) -> Outcome | None:
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..integrations.slurm_modes import apply_report
    from ..integrations.slurm_result import load_report

    try:
        report = load_report(Path(args.report), "report")
    except FileNotFoundError:
        print(f"gpu-preflight slurm drain-report: no such file {args.report}", file=sys.stderr)
        return None
    except ValueError as exc:
        print(f"gpu-preflight slurm drain-report: {exc}", file=sys.stderr)
        return None
    return apply_report(report, cfg, ctl, dry_run=cfg.dry_run)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gpu_preflight.cli.slurm_cmd SUBCOMMAND ...`` (the same as ``gpu-preflight slurm``)."""
    parser = Parser(prog="gpu-preflight")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["slurm", *(sys.argv[1:] if argv is None else argv)])
    try:
        return run(args)
    except BrokenPipeError:
        return EXIT_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
