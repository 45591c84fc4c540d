"""``gpu-preflight localize simulate``: the real scheduler against a simulated cluster.

It answers "how many rounds, and would it have drained the right nodes?" for a cluster
size, fault mix and noise level before anyone spends GPU hours on it, and it is how the
targets in ``bench/bench_localize.py`` are reproduced by hand. Prints ``rounds``,
``found``, ``false_positives`` and ``missed`` (host names), the suspects and the exclude
hostlist; ``--format json`` prints one JSON object alone on stdout.

Exit codes: 0 when the suspects are exactly the injected faults, 1 when something was
missed or wrongly accused, 3 for bad arguments (one line on stderr), a cluster larger than
the simulator holds (``MAX_NODES``) among them.

A long simulation (full mode at 1,024 nodes is a thousand rounds) shows where it is on
stderr, never on stdout: a transient bar at a terminal, at most about ``LOG_LINES`` plain
lines anywhere else, nothing with ``--quiet`` or ``GPU_PREFLIGHT_PROGRESS=0``.

The localisation rules (repeat, fail ratio, slow fraction, pairing, extra rounds...) are the
``[localize]`` section's GPU values, from the defaults, a site file (``--config``) and
``--set localize.KEY=VALUE``, as a real run would use them; ``--mode``, ``--rails``,
``--floor-gbps`` and ``--cover-passes`` override them for the simulation.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from msgspec.structs import replace

from ..config import build_config
from ..config.localize import localize_settings
from .argtypes import count, fraction, number
from .exits import EXIT_USAGE, Parser

if TYPE_CHECKING:
    from ..localize.model import LocalizeConfig, RoundProgress
    from ..progress import Tracker

EXIT_MISMATCH = 1
MAX_NODES = 1_000_000  # every test of every round stays in memory: 100,000 nodes took 0.3 GB
LOG_LINES = 20  # off a terminal: about this many progress lines at most, however many rounds


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``localize simulate`` on the main parser's subcommands."""
    loc = sub.add_parser("localize", help="find the bad node: pairwise and group localisation",
                         description="Localise bad nodes, links and rails with rounds of disjoint pair/group tests.")
    cmds = loc.add_subparsers(dest="localize_cmd", required=True)
    sim = cmds.add_parser("simulate", help="run the real scheduler against a simulated cluster",
                          description="Run the localisation scheduler against a simulated cluster and score it.")
    sim.add_argument("--nodes", type=count(2, MAX_NODES), required=True, metavar="N", help="number of nodes (>= 2)")
    sim.add_argument("--bad", type=count(0, MAX_NODES), default=1, metavar="K",
                     help="number of faulty nodes (default 1)")
    sim.add_argument("--fault", choices=("slow", "dead", "flaky", "rail", "mixed"), default="slow",
                     help="what is wrong with the bad nodes (default slow; mixed cycles slow, dead, flaky)")
    sim.add_argument("--slow-factor", type=fraction(above=True), default=0.3,
                     help="speed of a slow node, rail or link as a fraction of healthy (default 0.3)")
    sim.add_argument("--flaky-p", type=fraction(), default=0.7, help="chance a test with a flaky node fails")
    sim.add_argument("--slow-link", action="append", default=[], metavar="A,B",
                     help="a slow link between nodes A and B (indices; repeatable)")
    sim.add_argument("--noise", type=number(0, 10), default=0.0,
                     help="measurement noise, relative standard deviation (e.g. 0.1)")
    sim.add_argument("--seed", type=count(0, 2**63 - 1), default=0,
                     help="seed for the faults, the noise and the pairing")
    sim.add_argument("--mode", choices=("quick", "full", "group"), default="quick",
                     help="quick: one pair round + second passes; full: round-robin; group: bisection")
    sim.add_argument("--rails", type=count(1, 64), default=1, help="rails (GPU/NIC pairs) per node tested rail-aligned")
    sim.add_argument("--cover-passes", type=count(1, 100), default=None,
                     help="quick mode: first-round pairings (extra ones re-pair at random, for flaky nodes; "
                          "default localize.cover_passes)")
    sim.add_argument("--config", metavar="FILE", help="site config file (TOML or YAML) whose [localize] rules apply")
    sim.add_argument("--set", action="append", default=[], metavar="localize.KEY=VALUE",
                     help="override one setting, e.g. --set localize.repeat_k=3")
    sim.add_argument("--floor-gbps", type=number(0, 100_000, above=True, unit="GB/s"),
                     help="bandwidth floor: below it a test fails outright")
    sim.add_argument("--dead-unknown", action="store_true",
                     help="do not tell the scheduler which nodes died in round 0: find them from timeouts")
    sim.add_argument("--star", action="store_true", help="round 0 includes node 0's exchange with each node")
    sim.add_argument("--exclude-file", metavar="FILE", help="write the hosts to exclude to FILE")
    sim.add_argument("--exclude-style", choices=("lines", "hostlist"), default="lines",
                     help="FILE format: one host per line (default) or one Slurm hostlist")
    sim.add_argument("--format", choices=("console", "json"), default="console",
                     help="json: one object alone on stdout; console: a summary on stderr")
    sim.add_argument("--quiet", action="store_true",
                     help="no progress on stderr (a bar at a terminal, a few log lines elsewhere)")
    loc.set_defaults(command="localize")


def _links(raw: list[str]) -> list[tuple[int, int]]:
    out = []
    for item in raw:
        a, sep, b = item.partition(",")
        if not sep or not a.strip().isdigit() or not b.strip().isdigit():
            raise ValueError(f"--slow-link wants A,B (two node indices), not {item!r}")
        out.append((int(a), int(b)))
    return out


def simulated_config(args: argparse.Namespace) -> LocalizeConfig:
    """The scheduler's settings: the ``[localize]`` section (GPU values) with the flags on top."""
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..localize.settings import localize_config

    cfg, _ = build_config(config_file=args.config, overrides=list(args.set))
    config = localize_config(localize_settings(cfg), mode=args.mode, floor_gbps=args.floor_gbps, rails=args.rails)
    return config if args.cover_passes is None else replace(config, cover_passes=args.cover_passes)


def run(args: argparse.Namespace) -> int:
    """Run ``localize simulate``; returns the exit code."""
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..localize.report import localization_block, write_exclude_file
    from ..localize.simulate import make_scenario, simulate

    try:
        if args.nodes < 2:
            raise ValueError("--nodes must be at least 2")
        if args.nodes > MAX_NODES:
            raise ValueError(f"--nodes {args.nodes} is more than the simulator can hold in memory "
                             f"(at most {MAX_NODES:,})")
        config = simulated_config(args)
        scenario = make_scenario(args.nodes, args.bad, fault=args.fault, slow_factor=args.slow_factor,
                                 flaky_p=args.flaky_p, slow_links=_links(args.slow_link),
                                 link_factor=args.slow_factor, noise=args.noise, rails=args.rails, seed=args.seed)
    except ValueError as exc:
        print(f"gpu-preflight localize: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        with ExitStack() as stack:
            watch = RoundWatch(stack, progress_mode(quiet=args.quiet))
            result = simulate(scenario, config, seed=args.seed, dead_known=not args.dead_unknown, star=args.star,
                              on_round=watch)
    except MemoryError:
        print(f"gpu-preflight localize: out of memory simulating {args.nodes:,} nodes: try fewer", file=sys.stderr)
        return EXIT_USAGE
    width = max(4, len(str(args.nodes - 1)))
    names = [f"node{i:0{width}d}" for i in range(args.nodes)]
    block = localization_block(result.outcome, names)
    out: dict[str, Any] = {
        "nodes": args.nodes, "mode": args.mode, "seed": args.seed, "noise": args.noise,
        "rounds": result.outcome.rounds, "rounds_to_find": result.rounds_to_find, "tests": result.outcome.tests,
        "found": [names[n] for n in result.found],
        "false_positives": [names[n] for n in result.false_positives],
        "missed": [names[n] for n in result.missed],
        "links_found": [[names[a], names[b]] for a, b in result.links_found],
        "links_missed": [[names[a], names[b]] for a, b in result.links_missed],
        "suspects": block["suspects"],
        "exclude_hostlist": block["exclude_hostlist"],
        "localization": block,
    }
    if args.exclude_file:
        write_exclude_file(args.exclude_file, block["exclude_nodes"], args.exclude_style)
    if args.format == "json":
        print(json.dumps(out, indent=1))
    else:
        _console(out)
    return 0 if result.exact else EXIT_MISMATCH


def progress_mode(*, quiet: bool) -> str:
    """``off`` (``--quiet``, ``GPU_PREFLIGHT_PROGRESS=0``), ``bar`` (a terminal, or ``=1``), else ``log``."""
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..progress import ENV, should_show

    if quiet or os.environ.get(ENV, "").strip().lower() in ("0", "false", "no", "off"):
        return "off"
    return "bar" if should_show(sys.stderr) else "log"


class RoundWatch:
    """Shows a simulation's rounds on stderr: rounds done, tests run, nodes resolved.

    The bar is :func:`gpu_preflight.progress.progress`, opened at the first round, when the
    scheduler knows how many rounds it may take; its total is that upper bound. Off a
    terminal a line is printed every ``rounds_at_most / LOG_LINES`` rounds, so a thousand
    rounds make about twenty lines in a CI log (and one when nodes are first judged), a
    two-round run two.
    """

    def __init__(self, stack: ExitStack, mode: str) -> None:
        self.stack, self.mode = stack, mode
        self.bar: Tracker | None = None
        self.done = 0
        self.every = 1
        self.judged = False  # the first round after which nodes were judged gets a line too

    def __call__(self, st: RoundProgress) -> None:
        if self.mode == "off":
            return
        note = f"round {st.round} of at most {st.rounds_at_most}, {st.tests:,} tests"
        if st.resolved is not None:
            note += f", {st.resolved:,}/{st.nodes:,} nodes resolved"
        if self.mode == "bar":
            if self.bar is None:
                # start-up: --help/--version import every command module; this command's work loads when it runs
                from ..progress import progress

                self.bar = self.stack.enter_context(progress("localize", total=st.rounds_at_most, enabled=True))
            self.bar.advance(note, step=st.round - self.done)
        else:
            if self.done == 0:
                self.every = max(1, math.ceil(st.rounds_at_most / LOG_LINES))
            first_verdicts = st.resolved is not None and not self.judged
            if st.round == 1 or st.round % self.every == 0 or first_verdicts:
                print(f"gpu-preflight localize: {note}", file=sys.stderr, flush=True)
        self.judged = self.judged or st.resolved is not None
        self.done = st.round


def _console(out: dict[str, Any]) -> None:
    err = sys.stderr
    print(f"localize simulate: {out['nodes']} nodes, mode {out['mode']}, noise {out['noise']:g}, seed {out['seed']}",
          file=err)
    print(f"rounds {out['rounds']} (all faults found by round {out['rounds_to_find']}), tests {out['tests']}",
          file=err)
    for key in ("found", "false_positives", "missed"):
        print(f"{key:16} {len(out[key]):4}  {' '.join(out[key])}", file=err)
    for s in out["suspects"]:
        print(f"  {s['kind']:5} {s['node']:14} {s['reason']:11} conf {s['confidence']:.3f}  {s['summary']}", file=err)
    print(f"exclude: {out['exclude_hostlist'] or '(none)'}", file=err)


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (``python -m gpu_preflight.cli.localize_cmd localize simulate ...``)."""
    parser = Parser(prog="gpu-preflight")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
