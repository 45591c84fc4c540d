"""``gpu-preflight checks list|explain``: every id a report can carry, and what a check judges with."""

from __future__ import annotations

import argparse
import sys
import textwrap

from ..config import build_config, find_profile
from ..config.references import format_value, named_settings
from .exits import EXIT_USAGE


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
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


def run(args: argparse.Namespace) -> int:
    """``checks list`` / ``checks explain``: every id a report can carry, checks and declared ids alike."""
    # start-up: --help/--version import every command module; this command's work loads when it runs
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
    # start-up: --help/--version import every command module; this command's work loads when it runs
    import difflib

    close = [k for k in known if k.startswith(wanted + ".")] or difflib.get_close_matches(wanted, known, n=3,
                                                                                         cutoff=0.6)
    return f"; did you mean {', '.join(close[:4])}?" if close else ""
