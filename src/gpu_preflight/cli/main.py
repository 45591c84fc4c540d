"""Command line: argument parsing and output only; the work is in the library.

argparse (not a framework) keeps ``gpu-preflight run`` fast to start: a node check is
meant to cost well under a second, and most of that is interpreter start-up.
"""

from __future__ import annotations

import argparse
import gc
import signal
import sys
from collections.abc import Sequence
from importlib import import_module
from typing import NoReturn

from .._version import __version__
from .argtypes import gpu_count, seconds
from .exits import EXIT_ERROR, EXIT_USAGE, Parser


def _add_run(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("run", help="check this node and print a verdict",
                       description="Run the node checks; exit 0 pass, 1 warn, 2 fail, 3 error (could not measure "
                                   "or judge anything, or a usage error).")
    suite = p.add_mutually_exclusive_group()
    suite.add_argument("--quick", dest="suite", action="store_const", const="quick", help="quick suite (default)")
    suite.add_argument("--full", dest="suite", action="store_const", const="full", help="full suite")
    p.set_defaults(suite="quick")
    p.add_argument("--check", action="append", default=[], metavar="ID",
                   help="run only checks matching this id or glob (repeatable), e.g. 'gpu.*'")
    p.add_argument("--skip", action="append", default=[], metavar="ID", help="skip checks matching this id or glob")
    p.add_argument("--profile", default="auto",
                   help="GPU-model profile name or .toml file (default: auto from the GPU name)")
    p.add_argument("--config", metavar="FILE", help="site config file (TOML or YAML)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override one setting, e.g. --set gpu.temp_margin_c=8")
    p.add_argument("--expect-gpus", type=gpu_count, metavar="N", help="GPUs this node must have (missing ones FAIL)")
    p.add_argument("--report-dir", metavar="DIR", help="write DIR/report.json and raw artifacts")
    p.add_argument("--pretty", action="store_true", help="with --report-dir: report.json indented (default: compact)")
    p.add_argument("--format", choices=import_module("..report.reporters", __package__).reporters.names(),
                   default="console",
                   help="output format (json/md/junit go to stdout alone; console to stderr)")
    p.add_argument("--fail-on", choices=("warn", "fail"), default="fail",
                   help="'warn' makes warnings fail the run (exit 2)")
    p.add_argument("--timeout-s", type=seconds(), default=None,
                   help="time limit per probe, check and collective (s; else $GPU_PREFLIGHT_TIMEOUT_S); "
                        "default 30 for node checks, "
                        "60 per collective on one node, 180 across nodes (x3 with --full)")
    p.add_argument("--node-only", action="store_true",
                   help="only the node checks: no workers, no torch workloads")
    p.add_argument("--localize", nargs="?", const="quick", choices=("quick", "full", "group"),
                   help="find bad nodes with pairwise/group rounds after the all-node tests (multi-node runs)")
    p.add_argument("--exclude-file", metavar="FILE", help="with --localize: write the nodes to exclude to FILE")
    p.add_argument("--exclude-style", choices=("lines", "hostlist"), default="lines",
                   help="exclude file format: one host per line (sbatch --exclude=./FILE) or a Slurm hostlist")
    p.add_argument("--replay", metavar="FILE", help="judge an NVML snapshot instead of the live GPUs")
    p.add_argument("--kernel-log", metavar="FILE", help="read Xid events from a saved kernel log")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="show every finding, including passes, and the acceptance suite's [ENV]/[COMPUTE]/[TRAIN]/"
                        "[DDP] lines on stderr")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress while a distributed run works (default: a progress line on a terminal, "
                        "one log line per stage elsewhere); the verdict is printed as always")
    from ..outputs.args import add_output_arguments
    from .run_flags import add_acceptance_arguments

    add_acceptance_arguments(p)
    add_output_arguments(p)


# Commands whose parsers live in their own modules (imported only when needed: a node run
# should not pay for the Slurm, Kubernetes or history command-line code).
PLUGINS = {"serve": "serve_cmd", "parse": "evidence_cmd", "judge": "evidence_cmd", "slurm": "slurm_cmd",
           "history": "history_cmd", "baseline": "history_cmd", "k8s": "k8s_cmd", "localize": "localize_cmd"}


def _plugin_modules(only: str | None) -> list[str]:
    """Every plugin module, or none when the command is a built-in one (``run``, ``checks``...)."""
    if only is not None and only not in PLUGINS:
        return []
    wanted = [PLUGINS[only]] if only in PLUGINS else list(PLUGINS.values())
    return list(dict.fromkeys(wanted))


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line; None when unclear (help, version, typo)."""
    for token in argv:
        if token.startswith("-"):
            return None
        return token if token == "run" or token in BUILTINS or token in PLUGINS else None
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line; with ``only`` (the command named on it) just that command's parser.

    A node run is meant to start in well under a second: building the other commands'
    parsers (argparse formats and translates every help text as it goes) is time spent on
    arguments that cannot appear after ``run``. ``only=None`` builds every command, for
    ``--help``, ``--version`` and a mistyped command.
    """
    parser = Parser(prog="gpu-preflight", description="Is this GPU node/cluster fit for distributed training?")
    parser.add_argument("--version", action="version", version=f"gpu-preflight {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    if only is None or only == "run":
        _add_run(sub)
    for module in _plugin_modules(only):
        import_module(f".{module}", __package__).add_commands(sub)
    for name, add in BUILTINS.items():
        if only is None or only == name:
            add(sub)
    return parser


def _add_checks(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    checks = sub.add_parser("checks", help="list or explain checks").add_subparsers(dest="checks_cmd", required=True)
    checks.add_parser("list", help="list every check: id, suites, title")
    explain = checks.add_parser("explain", help="what a check does, and its thresholds with their current values",
                                description="Print a check's documentation, then each setting it names with the "
                                            "value a run would use (defaults, --profile, --config, environment, "
                                            "--set). An unknown id exits 3 with the nearest ids.")
    explain.add_argument("id", metavar="ID", help="check id, e.g. gpu.thermal (see 'gpu-preflight checks list')")
    explain.add_argument("--profile", help="GPU-model profile name or .toml file whose thresholds to show "
                                           "(default: none, the built-in defaults)")
    explain.add_argument("--config", metavar="FILE", help="site config file (TOML or YAML)")
    explain.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                         help="override one setting, as for 'run'")


def _add_config(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    config = sub.add_parser("config", help="show configuration").add_subparsers(dest="config_cmd", required=True)
    defaults = config.add_parser("defaults", help="every threshold with its default and meaning")
    defaults.add_argument("--format", choices=("toml", "json"), default="toml",
                          help="toml (default; a valid site file to edit) or json")
    config.add_parser("profiles", help="the shipped GPU-model profiles")


def _add_snapshot(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    snap = sub.add_parser("snapshot", help="record the raw NVML readings of this node as JSON (stdout or --output)",
                          description="Record this node's NVML readings, host facts and kernel-log Xid lines as "
                                      "JSON on stdout (or --output FILE), for 'run --replay' on any machine. Exit 3 "
                                      "when NVML cannot be read (no library, no driver): nothing is written.")
    snap.add_argument("--output", "-o", metavar="FILE",
                      help="write the snapshot to FILE, complete or not at all (a shell redirection leaves an "
                           "empty file when the snapshot fails)")
    snap.add_argument("--timeout-s", type=seconds(3600), default=30.0,
                      help="time limit for reading all GPUs (s, default 30); a GPU that does not answer in time "
                           "is recorded as such")


def _add_report(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    report = sub.add_parser("report", help="work with saved reports").add_subparsers(dest="report_cmd", required=True)
    render = report.add_parser("render", help="re-render a saved report.json")
    render.add_argument("path", metavar="REPORT", help="a report.json (from --report-dir or --format json)")
    render.add_argument("--format", choices=import_module("..report.reporters", __package__).reporters.names(),
                        default="md",
                        help="output format (default md; console goes to stderr, the others to stdout)")
    render.add_argument("--verbose", "-v", action="store_true",
                        help="console: every finding with observed and expected values, not the compact view")


# The commands defined here besides ``run``, in the order ``--help`` lists them.
BUILTINS = {"checks": _add_checks, "config": _add_config, "snapshot": _add_snapshot, "report": _add_report}


# The collector's first threshold while the program runs (CPython's default is 700): above
# what a live node check on 8 GPUs leaves alive (~30,000 objects), so it collects nothing.
GC_YOUNG_THRESHOLD = 50_000


def main(argv: Sequence[str] | None = None) -> int:
    """The program (``argv`` None: the console script, ``python -m gpu_preflight``), or one
    command run in the caller's process (``argv`` given: tests, wrappers).

    As the program it tunes the garbage collector for a short-lived process. A node check
    imports ~200 modules whose objects all live until exit: with the default threshold
    the collector ran ~60 times walking them (5-10 ms of a ~150 ms check); at 10,000 it
    still ran 3 times (4-6 ms of ~110 ms); at :data:`GC_YOUNG_THRESHOLD` not at all. Cycles
    are still collected, in bigger batches: a long-running ``serve`` or monitor holds at
    most a few MB more. What is left is frozen at the end, so that the interpreter's exit
    does not walk it once more. A caller's process keeps its own settings.
    """
    if argv is not None:
        return _command(list(argv))
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    try:
        return _command(sys.argv[1:])
    finally:
        gc.freeze()


def program() -> NoReturn:
    """The program's entry point (the ``gpu-preflight`` script, ``python -m gpu_preflight``):
    :func:`main`, its code the process's exit status.

    SIGINT and SIGTERM are caught from the first line (:mod:`gpu_preflight.interrupts`): a run
    they stop ends with one line and exit 130 or 143 (:data:`.exits.EXIT_SIGINT`,
    :data:`.exits.EXIT_SIGTERM`), never a traceback or a verdict's code, and leaves none of its
    temporaries. A signal that a command swallowed on the way (a probe's error) still ends it so.
    """
    from .. import interrupts

    interrupts.install()
    try:
        code = main()
        interrupts.settle()
    except (interrupts.Interrupted, KeyboardInterrupt) as exc:
        interrupts.stop(exc.signum if isinstance(exc, interrupts.Interrupted) else signal.SIGINT)
    if (signum := interrupts.requested()) is not None:
        interrupts.stop(signum)
    raise SystemExit(code)


def _command(tokens: list[str]) -> int:
    args = build_parser(_command_of(tokens)).parse_args(tokens)
    from ..config import ConfigError

    try:
        if args.command == "run":
            from .run_cmd import cmd_run

            return cmd_run(args)
        if args.command == "localize":
            from .localize_cmd import run as run_localize

            return run_localize(args)
        if args.command == "k8s":
            from .k8s_cmd import run as run_k8s

            return run_k8s(args)
        if args.command in ("history", "baseline"):
            from .history_cmd import run as run_history

            return run_history(args)
        if args.command == "slurm":
            from .slurm_cmd import run as run_slurm

            return run_slurm(args)
        if args.command in ("parse", "judge"):
            from .evidence_cmd import run as cmd_evidence

            return cmd_evidence(args)
        if args.command == "serve":
            from .serve_cmd import run as cmd_serve

            return cmd_serve(args)
        if args.command == "checks":
            return cmd_checks(args)
        if args.command == "config":
            return cmd_config(args)
        if args.command == "snapshot":
            return cmd_snapshot(args)
        if args.command == "report":
            return cmd_report(args)
    except ConfigError as exc:
        print(f"gpu-preflight: configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_ERROR
    raise AssertionError(args.command)


def cmd_checks(args: argparse.Namespace) -> int:
    """``checks list`` / ``checks explain``: every id a report can carry, checks and declared ids alike."""
    from ..registry import described

    specs = described()
    if args.checks_cmd == "list":
        for listed in specs:
            print(f"{listed.id:28} {','.join(listed.suites) or listed.scope:11} {listed.title}")
        return 0
    spec = next((s for s in specs if s.id == args.id), None)
    if spec is None:
        print(f"gpu-preflight: no check {args.id!r}{_did_you_mean(args.id, [s.id for s in specs])} "
              "('gpu-preflight checks list' lists every check)", file=sys.stderr)
        return EXIT_USAGE
    import textwrap

    from ..config import build_config, find_profile
    from ..config.references import format_value, named_settings

    profile = find_profile(args.profile) if args.profile else None
    config, sources = build_config(profile=profile, config_file=args.config, overrides=args.set)
    if spec.suites:
        print(f"{spec.id}  (needs: {', '.join(spec.needs)}; suites: {', '.join(spec.suites)})\n")
    else:
        print(f"{spec.id}  ({spec.title}; reported by gpu-preflight, not a selectable check)\n")
    print(spec.doc)
    groups = ", ".join(spec.groups or ()) or "none"
    print(f"\nReport group: {groups}; score component: {spec.component or 'undeclared'}")
    named = named_settings(" ".join([spec.doc, *(f"``{s}``" for s in spec.settings)]), config)
    if named:
        print(f"\nThresholds (current values from: {', '.join(sources)}):")
        width = max(len(n.name) for n in named)
        for n in named:
            default = f"  (default: {format_value(n.default, n.unit).strip('()')})" if n.changed else ""
            print(f"  {n.name:<{width}} = {format_value(n.value, n.unit)}{default}")
            if n.doc:
                indent = " " * (width + 5)
                print(textwrap.fill(n.doc, width=max(100, width + 40), initial_indent=indent, subsequent_indent=indent))
    return 0


def _did_you_mean(wanted: str, known: list[str]) -> str:
    """``; did you mean gpu.thermal?`` for a near miss, or the ids under a prefix (``gpu.ecc``)."""
    import difflib

    close = [k for k in known if k.startswith(wanted + ".")] or difflib.get_close_matches(wanted, known, n=3,
                                                                                         cutoff=0.6)
    return f"; did you mean {', '.join(close[:4])}?" if close else ""


def cmd_config(args: argparse.Namespace) -> int:
    from ..config import shipped_profiles
    from ..config.describe import defaults_json, defaults_toml

    if args.config_cmd == "profiles":
        for profile in shipped_profiles():
            print(f"{profile.name:12} {profile.title:28} match: {', '.join(profile.patterns)}")
        return 0
    if args.format == "json":
        import json

        print(json.dumps(defaults_json(), indent=2))
    else:
        sys.stdout.write(defaults_toml())
    return 0


def cmd_snapshot(args: argparse.Namespace) -> int:
    """NVML readings plus the host facts and kernel-log Xid lines, so a replay judges this node only."""
    import json

    from ..backends.nvml import NvmlUnavailable, collect
    from ..config import build_config
    from ..model import jsonable
    from ..snapshots import snapshot_host

    try:
        dump = collect(device_timeout_s=args.timeout_s)
    except NvmlUnavailable as exc:
        print(f"gpu-preflight: cannot snapshot: {exc.message} ({exc.name}); nothing written"
              f"{_redirect_hint(args.output)}", file=sys.stderr)
        return EXIT_ERROR
    dump["host"] = snapshot_host(build_config()[0])
    text = json.dumps(jsonable(dump), indent=1) + "\n"
    if not args.output:
        sys.stdout.write(text)
        return 0
    from ..safeio import describe_error, write_text

    try:
        write_text(args.output, text)
    except (OSError, ValueError) as exc:
        print(f"gpu-preflight: cannot write the snapshot to {args.output}: {describe_error(exc, args.output)}",
              file=sys.stderr)
        return EXIT_ERROR
    print(f"gpu-preflight: snapshot written to {args.output}", file=sys.stderr)
    return 0


def _redirect_hint(output: str | None) -> str:
    """Where stdout is a file the shell just created (``snapshot > node.json``), that file is left
    empty and a later ``--replay`` of it fails: say so, and what writes only complete snapshots."""
    import os
    import stat

    if output:
        return ""
    try:
        fd = sys.stdout.fileno()
        st = os.fstat(fd)
    except (OSError, ValueError, AttributeError):
        return ""
    if not stat.S_ISREG(st.st_mode) or st.st_size:
        return ""
    try:
        name = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        name = "the file stdout goes to"
    return (f" ({name} is left empty by the shell's redirection: use --output FILE, which writes only a "
            "complete snapshot)")


def cmd_report(args: argparse.Namespace) -> int:
    from ..boundedio import REPORT_LIMIT, InputError, load_json
    from ..report import render
    from ..report.console import render_console

    try:
        report = load_json(args.path, limit=REPORT_LIMIT, what="report")
    except InputError as exc:
        print(f"gpu-preflight: cannot read report: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not isinstance(report, dict) or "findings" not in report or "cluster_summary" not in report:
        print(f"gpu-preflight: {args.path} is not a gpu-preflight report (no findings/cluster_summary)",
              file=sys.stderr)
        return EXIT_USAGE
    if args.format == "console":
        render_console(report, verbose=args.verbose)
    else:
        sys.stdout.write(render(report, args.format))
    return 0
