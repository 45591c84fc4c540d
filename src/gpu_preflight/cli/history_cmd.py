"""``gpu-preflight history`` and ``gpu-preflight baseline``: the run history on the command line.

- ``history [runs]``: the runs filed, newest last.
- ``history trends``: each number per node and GPU over the last runs, with its change
  against the median of the earlier ones.
- ``history gpu ID``: where a GPU (UUID, UUID prefix or serial) has been and what it failed.
- ``history check REPORT``: a saved report judged against the history (regressions,
  repeat offenders); exit code as for ``run``.
- ``history import REPORT...``: file saved reports (backfill; a report already filed is skipped).
- ``history prune --older-than-days N``.
- ``baseline capture [REPORT | --from-history]``: a profile with performance floors from a
  known-good run or node.

Only argparse is imported here; the work is imported when a command runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ..config import ConfigError, build_config
from ..config.history import history_config
from ..config.profiles import load_profile_file
from ..outputs.args import database_path
from ..safeio import SQLITE_MAX_PATH, length_problem, write_text
from .argtypes import count, fraction, number
from .exits import EXIT_USAGE

if TYPE_CHECKING:
    from ..findings.model import ClusterReport

__all__ = ["add_commands", "run"]


def _common() -> argparse.ArgumentParser:
    """Options accepted before and after the subcommand (``SUPPRESS``: a subcommand's parser does
    not overwrite what was given before it)."""
    common = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    common.add_argument("--db", metavar="PATH", type=database_path, help="history database (default: history.path, "
                        "$GPU_PREFLIGHT_HISTORY or ~/.local/share/gpu-preflight/history.sqlite)")
    common.add_argument("--config", metavar="FILE", help="site config file (TOML or YAML): [history] settings")
    common.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE",
                        help="override one setting, e.g. --set history.tflops_regression_fraction=0.03")
    return common


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``history`` and ``baseline`` on the top-level subparsers."""
    common = _common()
    h = sub.add_parser("history", parents=[common], help="runs, trends and GPU records from the run history",
                       description="The local run history: every run's findings and measurements.")
    hs = h.add_subparsers(dest="history_cmd")
    runs = hs.add_parser("runs", parents=[common], help="the runs filed, newest last")
    runs.add_argument("--cluster", help="only this cluster's runs")
    runs.add_argument("--last", type=count(1, 1_000_000), default=30, metavar="N",
                      help="the newest N runs (default 30)")
    runs.add_argument("--format", choices=("text", "json"), default="text")
    trends = hs.add_parser("trends", parents=[common], help="each number per node and GPU over the last runs")
    trends.add_argument("--cluster", help="only this cluster's runs")
    trends.add_argument("--node", help="only this node's numbers")
    trends.add_argument("--gpu", metavar="ID", help="only this GPU (UUID, UUID prefix or serial), on any host")
    trends.add_argument("--metric", default="*", metavar="GLOB", help="e.g. 'gemm.*', 'busbw.*all_reduce*'")
    trends.add_argument("--last", type=count(1, 1_000_000), default=20, metavar="N",
                        help="runs to look back (default 20)")
    trends.add_argument("--format", choices=("text", "json"), default="text")
    gpu = hs.add_parser("gpu", parents=[common], help="where a GPU has been and what it failed")
    gpu.add_argument("id", help="GPU UUID (or a prefix of it) or board serial")
    gpu.add_argument("--format", choices=("text", "json"), default="text")
    check = hs.add_parser("check", parents=[common], help="judge a saved report against the history")
    check.add_argument("report", help="report.json")
    check.add_argument("--cluster-name", metavar="NAME", help="cluster the report belongs to")
    check.add_argument("--format", choices=("console", "json"), default="console")
    imp = hs.add_parser("import", parents=[common], help="file saved reports in the history")
    imp.add_argument("reports", nargs="+", metavar="REPORT")
    imp.add_argument("--cluster-name", metavar="NAME", help="cluster the reports belong to")
    prune = hs.add_parser("prune", parents=[common], help="forget old runs")
    prune.add_argument("--older-than-days", type=number(0, 36_500, unit="days"), required=True, metavar="N")

    b = sub.add_parser("baseline", help="capture performance floors from a known-good run")
    bs = b.add_subparsers(dest="baseline_cmd", required=True)
    cap = bs.add_parser("capture", parents=[common], help="write a GPU-model profile with measured floors",
                        description="Write a profile (TOML, for --profile) whose [perf] floors are a fraction of "
                                    "what a known-good report or the history measured.")
    src = cap.add_mutually_exclusive_group(required=True)
    src.add_argument("report", nargs="?", help="report.json of a known-good run")
    src.add_argument("--from-history", action="store_true", help="use the history's recent runs instead")
    cap.add_argument("--cluster", help="history: only this cluster's runs")
    cap.add_argument("--node", help="only this node's numbers (a known-good node)")
    cap.add_argument("--run", type=count(1, 2**63 - 1), metavar="ID", help="history: only this run")
    cap.add_argument("--runs", type=count(1, 1_000_000), default=10, metavar="N",
                     help="history: the last N runs (default 10)")
    cap.add_argument("--model", help="GPU model to capture where several are present")
    cap.add_argument("--name", help="profile name (default baseline-<model>)")
    cap.add_argument("--match", action="append", metavar="REGEX", help="GPU-name pattern (default: the model)")
    cap.add_argument("--fraction", type=fraction(above=True), help="bandwidth floors at this fraction of the median "
                     "(default history.capture_floor_fraction)")
    cap.add_argument("--gemm-fraction", type=fraction(above=True), help="expected GEMM at this fraction of the median "
                     "(default history.capture_gemm_fraction)")
    cap.add_argument("--no-inherit", action="store_true", help="do not carry over the shipped profile's settings")
    cap.add_argument("-o", "--output", metavar="FILE", help="write the profile here (default: stdout)")


def run(args: argparse.Namespace) -> int:
    """Run a ``history`` or ``baseline`` command; returns the exit code.

    A database SQLite cannot use (not a database, damaged, locked past the timeout, a newer
    schema) is one line naming the file and exit 3: nothing could be judged from it.
    """
    # start-up: --help/--version import every command module; this command's work loads when it runs
    import sqlite3

    config, _ = build_config(config_file=getattr(args, "config", None), overrides=getattr(args, "set", None))
    path = _db(args, config)
    problem = length_problem(path, limit=SQLITE_MAX_PATH)  # history.path or $GPU_PREFLIGHT_HISTORY: not argparse's
    if problem:
        print(f"gpu-preflight: history database {str(path)[:60]}...: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return _dispatch(args, config, path)
    except (sqlite3.Error, RuntimeError) as exc:
        damaged = isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError)
        hint = " (damaged or not a gpu-preflight history: move it aside and a new one is started)" if damaged else ""
        print(f"gpu-preflight: history database {path}: {str(exc).removeprefix(f'{path}: ')}{hint}", file=sys.stderr)
        return EXIT_USAGE


def _dispatch(args: argparse.Namespace, config: Any, path: Path) -> int:
    if args.command == "baseline":
        return _capture(args, config)
    command = getattr(args, "history_cmd", None) or "runs"
    if command == "import":
        return _import(args, config, path)
    if command == "check":
        return _check(args, config, path)
    if not path.is_file():
        print(f"gpu-preflight: no history at {path} (gpu-preflight run files every run there)", file=sys.stderr)
        return EXIT_USAGE
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..history import HistoryStore

    with HistoryStore(path) as store:
        if command == "runs":
            return _runs(args, store)
        if command == "trends":
            return _trends(args, store)
        if command == "gpu":
            return _gpu(args, store)
        removed = store.prune(args.older_than_days)
        print(f"gpu-preflight: {removed.old} run(s) older than {args.older_than_days:g} days removed from {path}",
              file=sys.stderr)
        if removed.implausible:
            print(f"gpu-preflight: {removed.implausible} run(s) dated in the future or not dated removed from {path}",
                  file=sys.stderr)
        return 0


def _db(args: argparse.Namespace, config: Any) -> Path:
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..history.store import default_path

    chosen = getattr(args, "db", None) or history_config(config).path
    return Path(chosen).expanduser() if chosen else default_path()


def _cluster(args: argparse.Namespace, config: Any) -> str:
    return (getattr(args, "cluster_name", None) or history_config(config).cluster
            or os.environ.get("SLURM_CLUSTER_NAME") or "default")


def _load(path: str) -> ClusterReport | None:
    """The report at ``path`` as the history reads it, or None after one line saying why not.

    Read through :mod:`gpu_preflight.boundedio` like every file a command is given (a FIFO,
    a device, a directory or a file beyond :data:`~gpu_preflight.boundedio.REPORT_LIMIT` is
    refused before it is read), and typed once: every later step takes the typed report.
    """
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..boundedio import REPORT_LIMIT, InputError, load_json
    from ..findings.model import ClusterReport

    try:
        report = load_json(path, limit=REPORT_LIMIT, what="report")
    except InputError as exc:
        print(f"gpu-preflight: cannot read report: {exc}", file=sys.stderr)
        return None
    if not isinstance(report, dict) or "findings" not in report or "nodes" not in report:
        print(f"gpu-preflight: {path} is not a gpu-preflight report (no findings/nodes)", file=sys.stderr)
        return None
    try:
        return ClusterReport.from_dict(report)  # what the history reads it as: a report it cannot type is refused here
    except ValueError as exc:  # msgspec.ValidationError: what is missing or mistyped, and where
        print(f"gpu-preflight: {path} is not a gpu-preflight report ({exc})", file=sys.stderr)
        return None


def _runs(args: argparse.Namespace, store: Any) -> int:
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..history.trends import render_runs

    runs = store.runs(getattr(args, "cluster", None), getattr(args, "last", 30))  # bare `history` has no options
    if getattr(args, "format", "text") == "json":
        print(json.dumps([msgspec.structs.asdict(r) for r in runs], indent=1))
    else:
        sys.stdout.write(render_runs(runs))
    return 0


def _trends(args: argparse.Namespace, store: Any) -> int:
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..history.trends import render_trends, trends

    found = trends(store, cluster=args.cluster, node=args.node, gpu=args.gpu, metric=args.metric, last=args.last)
    if args.format == "json":
        print(json.dumps([t.to_dict() for t in found], indent=1))
    else:
        sys.stdout.write(render_trends(found))
    return 0


def _gpu(args: argparse.Namespace, store: Any) -> int:
    """A GPU's record; an id the history has never seen is exit 3 (nothing to show is not a pass)
    with the nearest known UUIDs or serials."""
    rows = store.gpu_timeline(args.id)
    keys = ("run", "timestamp", "cluster", "node", "slot", "uuid", "serial", "model", "worst", "flagged_checks")
    if not rows:
        if args.format == "json":
            print("[]")  # stdout stays JSON for a script; the exit code and stderr say why
        print(f"gpu-preflight: no GPU {args.id!r} in the history{_nearest_gpus(store, args.id)}", file=sys.stderr)
        return EXIT_USAGE
    if args.format == "json":
        print(json.dumps([dict(zip(keys, r, strict=True)) for r in rows], indent=1))
        return 0
    hosts = list(dict.fromkeys(r[3] for r in rows))
    print(f"{rows[-1][5] or args.id} (serial {rows[-1][6] or '?'}, {rows[-1][7] or '?'}): {len(rows)} run(s) on "
          f"{len(hosts)} host(s): {', '.join(hosts)}")
    for r in rows:
        flagged = f"  {', '.join(r[9])}" if r[9] else ""
        print(f"  run {r[0]:<5} {r[1][:19]}  {r[2]}  {r[3]}/{r[4]}  {r[8]}{flagged}")
    return 0


def _nearest_gpus(store: Any, wanted: str) -> str:
    """``; did you mean GPU-1a2b...?``: known UUIDs and serials whose start is close to ``wanted``
    (an id may be given as a UUID prefix, so each is compared over the length given)."""
    # start-up: --help/--version import every command module; this command's work loads when it runs
    import difflib

    known = {str(v) for row in store.db.execute("SELECT DISTINCT uuid, serial FROM gpus") for v in row if v}
    matcher = difflib.SequenceMatcher(None, "", wanted.lower())  # wanted is seq2: its index is built once
    scored = []
    for k in known:
        matcher.set_seq1(k[:len(wanted)].lower())
        if matcher.quick_ratio() >= 0.75 and (score := matcher.ratio()) >= 0.75:
            scored.append((score, k))
    close = [k for _, k in sorted(scored, reverse=True)[:3]]
    return f"; did you mean {', '.join(close)}?" if close else ""


def _import(args: argparse.Namespace, config: Any, path: Path) -> int:
    """File each report; one that cannot be read, typed or dated is refused in one line naming it,
    files nothing (a run is filed in one transaction) and makes the exit code 3."""
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..history import HistoryStore, extract
    from ..history.when import TimestampError

    code = 0
    with HistoryStore(path) as store:
        for name in args.reports:
            report = _load(name)
            if report is None:
                code = EXIT_USAGE
                continue
            try:
                run_id, new = store.record(extract(report), _cluster(args, config), name)
            except TimestampError as exc:
                print(f"gpu-preflight: {name}: not filed: {exc}", file=sys.stderr)
                code = EXIT_USAGE
                continue
            print(f"gpu-preflight: {name}: run #{run_id} {'filed' if new else 'already filed'}", file=sys.stderr)
    return code


def _check(args: argparse.Namespace, config: Any, path: Path) -> int:
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..history import HistoryStore, history_findings
    from ..model import Status, gated_exit_code

    report = _load(args.report)
    if report is None:
        return EXIT_USAGE
    if path.is_file():
        with HistoryStore(path) as store:
            found = history_findings(report, store, config, _cluster(args, config))
    else:
        print(f"gpu-preflight: no history at {path}: nothing to compare with", file=sys.stderr)
        found = []
    if args.format == "json":
        print(json.dumps([f.to_dict() for f in found], indent=1))
    else:
        for f in found:
            print(f"{f.status.value:5} {f.check_id:24} {f.subject:20} {f.summary}")
            if f.recommendation and f.status.value not in ("PASS", "SKIP"):
                print(f"      -> {f.recommendation}")
    fail_on = report.run.fail_on
    # The worst history finding, not a run verdict: nothing to compare with is not an error here.
    return gated_exit_code(Status.worst(f.status for f in found), fail_on)


def _capture(args: argparse.Namespace, config: Any) -> int:
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..history.baseline import CaptureError, capture, render_toml

    cfg = history_config(config)
    if args.from_history:
        # start-up: --help/--version import every command module; this command's work loads when it runs
        from ..history import HistoryStore

        path = _db(args, config)
        if not path.is_file():
            print(f"gpu-preflight: no history at {path}", file=sys.stderr)
            return EXIT_USAGE
        with HistoryStore(path) as store:
            measurements = store.measurements(cluster=args.cluster, node=args.node, run=args.run, last=args.runs)
        where = f"run {args.run}" if args.run else f"the last {args.runs} run(s)"
        source = f"history {path}, {where}" + (f", cluster {args.cluster}" if args.cluster else "")
    else:
        # start-up: --help/--version import every command module; this command's work loads when it runs
        from ..history import extract

        report = _load(args.report)
        if report is None:
            return EXIT_USAGE
        measurements = extract(report).measurements
        source = f"report {args.report} ({report.timestamp or '?'})"
    if args.node:
        measurements = [m for m in measurements if m.node == args.node]
        source += f", node {args.node}"
    try:
        captured = capture(measurements, source=source, model=args.model, name=args.name, match=args.match,
                           floor_fraction=args.fraction if args.fraction is not None else cfg.capture_floor_fraction,
                           gemm_fraction=args.gemm_fraction if args.gemm_fraction is not None
                           else cfg.capture_gemm_fraction, inherit=not args.no_inherit)
    except CaptureError as exc:
        print(f"gpu-preflight: cannot capture a baseline: {exc}", file=sys.stderr)
        return EXIT_USAGE
    text = render_toml(captured)
    with tempfile.TemporaryDirectory() as tmp:  # what we write must load as a profile
        probe = Path(tmp) / "profile.toml"
        probe.write_text(text, encoding="utf-8")
        try:
            load_profile_file(probe)
        except ConfigError as exc:
            print(f"gpu-preflight: internal error: the captured profile does not load: {exc}", file=sys.stderr)
            return 3
    if args.output:
        write_text(args.output, text)
        print(f"gpu-preflight: profile {captured.name!r} written to {args.output} "
              f"(use: gpu-preflight run --profile {args.output})", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
