"""``gpu-preflight parse FILE`` and ``gpu-preflight judge FILE``: make saved tool output useful.

``parse`` prints ``{"kind": K, "record": {...}}`` (JSON, stdout). ``judge`` prints the
findings the same way ``run`` does and exits like ``run`` (0 pass, 1 warn, 2 fail, 3
error). Both detect the kind when ``--kind`` is not given. ``FILE`` may be ``-`` for
standard input.

The input is read in chunks: the kind is detected from the head, and kinds with a
streaming parser (kernel logs, nccl-tests) are parsed chunk by chunk in flat memory up to
:data:`~gpu_preflight.boundedio.STREAM_LIMIT`; the others are read whole, up to
:data:`~gpu_preflight.boundedio.EVIDENCE_LIMIT`. ``parse`` writes one line of compact JSON.

Exit 3 whenever nothing could be judged: the file cannot be read (not a regular file,
over its limit, missing), no parser recognises it
with confidence (a README is not an NCCL log), the given or detected kind does not
parse, or the command line or configuration is wrong. Exit 2 is only ever a FAIL found
in the evidence.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from ..config import ConfigError
from ..report import render
from .exits import EXIT_ERROR, EXIT_USAGE


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``parse`` and ``judge`` on the main parser's subcommands."""
    parse = sub.add_parser("parse", help="parse a saved tool output into a JSON record",
                           description="Print {\"kind\": K, \"record\": {...}} for a saved tool output.")
    parse.add_argument("file", metavar="FILE", nargs="?", help="saved output of a supported tool ('-' for stdin)")
    parse.add_argument("--kind", help="the tool/format (detected when omitted); see --list-kinds")
    parse.add_argument("--list-kinds", action="store_true", help="print the supported kinds and exit")
    parse.set_defaults(command="parse")

    judge = sub.add_parser("judge", help="judge a saved tool output and exit like `run`",
                           description="Judge a saved tool output; exit 0 pass, 1 warn, 2 fail, 3 error.")
    judge.add_argument("file", metavar="FILE", help="saved output of a supported tool ('-' for stdin)")
    judge.add_argument("--kind", help="the tool/format (detected when omitted)")
    judge.add_argument("--format", choices=("console", "json", "md", "junit"), default="console",
                       help="output format (json/md/junit go to stdout alone; console to stderr)")
    judge.add_argument("--fail-on", choices=("warn", "fail"), default="fail",
                       help="'warn' makes warnings fail the run (exit 2)")
    judge.add_argument("--profile", default="auto",
                       help="GPU-model profile name or .toml file (default: auto from GPU names in the input)")
    judge.add_argument("--config", metavar="FILE", help="site config file (TOML or YAML)")
    judge.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                       help="override one setting, e.g. --set evidence.nccl_busbw_min_gbps=180")
    judge.add_argument("--source", help="name used in finding subjects (default: the file name)")
    judge.add_argument("--verbose", "-v", action="store_true", help="show every finding, including passes")
    judge.set_defaults(command="judge")


def run(args: argparse.Namespace) -> int:
    """Run ``parse`` or ``judge`` for parsed arguments; returns the exit code."""
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..parsers.detect import all_kinds

    if getattr(args, "list_kinds", False):
        for spec in all_kinds():
            print(f"{spec.kind:20} {spec.title}")
        return 0
    if args.file is None:
        print(f"gpu-preflight {args.command}: a FILE is required ('-' for stdin)", file=sys.stderr)
        return EXIT_USAGE
    evidence = _open(args.file)
    if evidence is None:
        return EXIT_ERROR
    kind = _kind(args.kind, evidence.head, args.file)
    if kind is None:
        return EXIT_ERROR
    if args.command == "parse":
        return _parse(evidence, kind)
    return _judge(args, evidence, kind)


class _Evidence(msgspec.Struct):
    """An input being read: its decoded head (for detection) and every chunk, the head's included."""

    path: str
    head: str
    chunks: Iterator[bytes]


def _open(path: str) -> _Evidence | None:
    """The input's head, read far enough to detect its kind; the rest is read by the parser."""
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..boundedio import STREAM_LIMIT, InputError, iter_chunks
    from ..parsers.detect import SNIFF_WINDOW

    chunks = iter_chunks(path, limit=STREAM_LIMIT, what="tool output")
    first: list[bytes] = []
    try:
        for chunk in chunks:
            first.append(chunk)
            if sum(map(len, first)) >= SNIFF_WINDOW:
                break
    except InputError as exc:
        print(f"gpu-preflight: {exc}", file=sys.stderr)
        return None
    head = b"".join(first)[:SNIFF_WINDOW].decode("utf-8", errors="replace")
    return _Evidence(path, head, itertools.chain(first, chunks))


def _record(evidence: _Evidence, kind: str) -> Any:
    """Parse the whole input as ``kind``: streamed when the kind can, else read whole under the evidence limit.

    Raises ``ParseError`` (not a readable instance of the kind) or ``InputError`` (the
    input could not be read to its end).
    """
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..boundedio import EVIDENCE_LIMIT, InputError, decode
    from ..parsers.detect import get_parser

    spec = get_parser(kind)
    if spec.stream is not None:
        return spec.stream(evidence.chunks)
    data = bytearray()
    for chunk in evidence.chunks:
        data += chunk
        if len(data) > EVIDENCE_LIMIT:
            raise InputError(f"{evidence.path}: tool output is more than the {EVIDENCE_LIMIT // 2**20} MiB read "
                             f"whole for {kind} (only kernel logs and nccl-tests logs are streamed)")
    return spec.parse(decode(bytes(data), evidence.path, what="tool output", strict=False))


def _kind(kind: str | None, head: str, path: str) -> str | None:
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..parsers.detect import all_kinds, detect_kind, get_parser

    if kind is not None:
        try:
            get_parser(kind)
        except KeyError as exc:
            print(f"gpu-preflight: {exc.args[0]}", file=sys.stderr)
            return None
        return kind
    detected = detect_kind(head)
    if detected is None:
        known = ", ".join(s.kind for s in all_kinds())
        print(f"gpu-preflight: cannot tell which tool printed {path}; pass --kind (one of: {known})",
              file=sys.stderr)
    return detected


def _parse(evidence: _Evidence, kind: str) -> int:
    """Print the record as one line of compact JSON: ``json.dumps`` (the C encoder), not ``json.dump``, whose
    chunked writing goes through the pure-Python one. Streamed records are bounded (first/last rows or
    events and counts), whole-read ones are of the order of the input already in memory."""
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..boundedio import InputError
    from ..model import jsonable
    from ..parsers.errors import ParseError

    try:
        record = _record(evidence, kind)
    except ParseError as exc:
        print(f"gpu-preflight: could not parse as {kind}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except InputError as exc:
        print(f"gpu-preflight: {exc}", file=sys.stderr)
        return EXIT_ERROR
    sys.stdout.write(json.dumps({"kind": kind, "record": jsonable(record)}, separators=(",", ":")) + "\n")
    return 0


def _judge(args: argparse.Namespace, evidence: _Evidence, kind: str) -> int:
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..boundedio import InputError
    from ..engine import judge_evidence
    from ..evidence import parse_error_finding
    from ..parsers.errors import ParseError

    source = args.source or (Path(args.file).name if args.file != "-" else "stdin")
    record: Any = None
    problem: ParseError | None = None
    try:
        record = _record(evidence, kind)
    except ParseError as exc:
        problem = exc
    except InputError as exc:
        print(f"gpu-preflight: {exc}", file=sys.stderr)
        return EXIT_ERROR
    try:
        config, profile = _config(args, record)
    except ConfigError as exc:
        print(f"gpu-preflight: configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    findings = ([parse_error_finding(problem, source)] if problem is not None
                else judge_evidence(kind, record, config, source=source))
    report, exit_code = evidence_report(findings, kind=kind, source=source, record=record, fail_on=args.fail_on,
                                        profile=profile)
    if args.format == "console":
        # start-up: --help/--version import every command module; this command's work loads when it runs
        from ..findings.model import ClusterReport
        from ..report.console import render_console

        render_console(ClusterReport.from_dict(report), verbose=args.verbose)
    else:
        sys.stdout.write(render(report, args.format))
        sys.stdout.flush()
    return exit_code


def _config(args: argparse.Namespace, record: Any) -> tuple[Any, str | None]:
    """The resolved config and the profile used (named, or matched from GPU names in the record)."""
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..evidence import evidence_config

    return evidence_config(record, profile=args.profile, config_file=args.config, overrides=args.set)


def evidence_report(findings: list[Any], *, kind: str, source: str, record: Any, fail_on: str = "fail",
                    profile: str | None = None) -> tuple[dict[str, Any], int]:
    """The canonical report (as ``run`` builds it) for the findings of one piece of evidence, and its exit code.

    The evidence is one "node" named after its source; its parsed record is kept under
    ``facts.evidence`` so the report can be re-rendered and audited without the input.
    """
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..evidence import check_title
    from ..model import CheckResult, NodeReport, jsonable
    from ..report import build_report

    by_check: dict[str, list[Any]] = {}
    for finding in findings:
        by_check.setdefault(finding.check_id, []).append(finding)
    results = [CheckResult(check_id, check_title(check_id, kind), group, 0.0) for check_id, group in by_check.items()]
    node = NodeReport(hostname=source, timestamp=datetime.now(UTC).isoformat(), results=results,
                      facts={"evidence": {"kind": kind, "source": source, "record": jsonable(record)}},
                      profile=profile, config_sources=[], fail_on=fail_on)
    return build_report([node]), node.exit_code
