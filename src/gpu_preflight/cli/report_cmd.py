"""``gpu-preflight report render``: a saved report.json in another format."""

from __future__ import annotations

import argparse
import sys
from importlib import import_module

from ..report import render
from .exits import EXIT_USAGE


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    report = sub.add_parser("report", help="work with saved reports").add_subparsers(dest="report_cmd", required=True)
    render = report.add_parser("render", help="re-render a saved report.json")
    render.add_argument("path", metavar="REPORT", help="a report.json (from --report-dir or --format json)")
    render.add_argument("--format", choices=import_module("..report.reporters", __package__).reporters.names(),
                        default="md",
                        help="output format (default md; console goes to stderr, the others to stdout)")
    render.add_argument("--verbose", "-v", action="store_true",
                        help="console: every finding with observed and expected values, not the compact view")


def run(args: argparse.Namespace) -> int:
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..boundedio import REPORT_LIMIT, InputError, load_json
    from ..findings.model import ClusterReport
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
    try:
        typed = ClusterReport.from_dict(report)  # read (and checked) once: every format renders the typed report
    except ValueError as exc:
        print(f"gpu-preflight: {args.path} is not a gpu-preflight report ({exc})", file=sys.stderr)
        return EXIT_USAGE
    if args.format == "console":
        render_console(typed, verbose=args.verbose)
    else:
        sys.stdout.write(render(typed, args.format))
    return 0
