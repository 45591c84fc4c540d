"""Command line: argument parsing and output only; the work is in the library.

argparse (not a framework) keeps ``gpu-preflight run`` fast to start: a node check is
meant to cost well under a second, and most of that is interpreter start-up.
"""

from __future__ import annotations

import argparse
import gc
import signal
import sys
from collections.abc import Callable, Sequence
from importlib import import_module
from typing import Any, NamedTuple, NoReturn

from .. import interrupts
from .._version import __version__
from ..config import ConfigError
from ..outputs.args import add_output_arguments
from .argtypes import gpu_count, seconds
from .exits import EXIT_ERROR, EXIT_USAGE, Parser
from .run_flags import add_acceptance_arguments


def add_run(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
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

    add_acceptance_arguments(p)
    add_output_arguments(p)


class Command(NamedTuple):
    """One ``gpu-preflight`` command: the function that adds its parser to the top-level
    subcommands and the one that runs it, each as ``"module:function"`` in this package.

    Named, not imported: a module is imported only for the command named on the command
    line (or for ``--help``), so a node run does not pay for the Slurm, Kubernetes or history
    command-line code. A module whose ``add_commands`` registers two commands (``parse`` and
    ``judge``, ``history`` and ``baseline``) has a row for each; it is called once.
    """

    name: str
    arguments: str  # adds the command's parser: function(subparsers) -> None
    run: str  # runs it: function(args) -> exit code


# Every command, in the order ``--help`` lists them: the only place a command is named.
COMMANDS = (
    Command("run", "main:add_run", "run_cmd:cmd_run"),
    Command("serve", "serve_cmd:add_commands", "serve_cmd:run"),
    Command("parse", "evidence_cmd:add_commands", "evidence_cmd:run"),
    Command("judge", "evidence_cmd:add_commands", "evidence_cmd:run"),
    Command("slurm", "slurm_cmd:add_commands", "slurm_cmd:run"),
    Command("history", "history_cmd:add_commands", "history_cmd:run"),
    Command("baseline", "history_cmd:add_commands", "history_cmd:run"),
    Command("k8s", "k8s_cmd:add_commands", "k8s_cmd:run"),
    Command("localize", "localize_cmd:add_commands", "localize_cmd:run"),
    Command("checks", "checks_cmd:add_commands", "checks_cmd:run"),
    Command("config", "config_cmd:add_commands", "config_cmd:run"),
    Command("snapshot", "snapshot_cmd:add_commands", "snapshot_cmd:run"),
    Command("report", "report_cmd:add_commands", "report_cmd:run"),
)
COMMAND = {command.name: command for command in COMMANDS}


def function(ref: str) -> Callable[..., Any]:
    """``"module:function"`` (a module of this package) imported."""
    module, _, name = ref.partition(":")
    return getattr(import_module(f".{module}", __package__), name)  # type: ignore[no-any-return]


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line; None when unclear (help, version, typo)."""
    for token in argv:
        if token.startswith("-"):
            return None
        return token if token in COMMAND else None
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
    for adder in dict.fromkeys(c.arguments for c in COMMANDS if only is None or c.name == only):
        function(adder)(sub)
    return parser


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
    try:
        interrupts.install()  # inside: a signal can come between its handler's installation and its return
        code = main()
        interrupts.settle()
    except (interrupts.Interrupted, KeyboardInterrupt) as exc:
        interrupts.stop(exc.signum if isinstance(exc, interrupts.Interrupted) else signal.SIGINT)
    except BaseException:
        # the signal's exception can surface as another: Python 3.11 wraps one raised while a class is
        # made (a descriptor's __set_name__: a record class imported at that instant) in RuntimeError
        if (signum := interrupts.requested()) is not None:
            interrupts.stop(signum)
        raise
    interrupts.exiting()
    if (signum := interrupts.requested()) is not None:  # one that came before the handlers were set aside
        interrupts.stop(signum)
    raise SystemExit(code)


def _command(tokens: list[str]) -> int:
    args = build_parser(_command_of(tokens)).parse_args(tokens)

    try:
        return function(COMMAND[args.command].run)(args)  # type: ignore[no-any-return]
    except ConfigError as exc:
        print(f"gpu-preflight: configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_ERROR


