"""What a saved gpu-preflight report says about a node: pass, fail (which checks) or unknown.

A saved report is read once, at the edge (:func:`load_report`), into the typed
:class:`~gpu_preflight.findings.model.ClusterReport` (validated: a mistyped file is
"unknown" with the path of the bad value), and everything here reads its attributes. Only
the model is imported, not :mod:`gpu_preflight.report`: HealthCheckProgram mode must
answer in about a tenth of a second, and the reporters package costs more than that to
import. Only the report's stable parts are used: ``timestamp``, ``nodes.<key>.node_info``
and ``findings`` (``node``, ``check_id``, ``status``, ``subject``, ``details``).

"Unknown" is its own answer and never a pass: a missing, unreadable, stale or empty
report cannot resume a node, and drains one only where the site asked for that.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

import msgspec

from ..actions import Action, node_action
from ..boundedio import REPORT_LIMIT, InputError, InputMissing, load_json
from ..config.slurm_schema import SlurmConfig
from ..findings.model import ClusterReport, ReportFinding

__all__ = ["NodeResult", "Verdict", "judge", "node_results", "read_result"]

_RANK = {"FAIL": 0, "ERROR": 1, "WARN": 2}
FUTURE_SKEW = timedelta(minutes=5)


class Verdict(msgspec.Struct, frozen=True):
    """The answer for one node: ``checks`` names what failed, ``detail`` says it in words,
    ``action`` the strongest operator action its findings call for (:func:`~gpu_preflight.actions.node_action`)."""

    state: Literal["pass", "fail", "unknown"]
    checks: tuple[str, ...] = ()
    detail: str = ""
    timestamp: datetime | None = None
    action: Action = Action.NONE


class NodeResult(msgspec.Struct):
    """One node of a report: the names it goes by and its findings."""

    label: str
    names: set[str]
    findings: list[ReportFinding] = []


def judge(findings: Iterable[ReportFinding], cfg: SlurmConfig, timestamp: datetime | None) -> Verdict:
    """Pass, fail or unknown for a node's findings under the drain policy.

    A node where nothing passed (every finding skipped or ignored) is unknown: a report
    that checked nothing is no evidence that the node is healthy.
    """
    gating = {"FAIL", "ERROR"} | ({"WARN"} if cfg.drain_on == "warn" else set())
    counted = [f for f in findings if not any(fnmatch.fnmatchcase(f.check_id, p) for p in cfg.ignore_checks)]
    bad = sorted((f for f in counted if f.status in gating), key=lambda f: (_RANK[f.status], f.check_id))
    if bad:
        checks = tuple(dict.fromkeys(f.check_id for f in bad))
        worst = bad[0].status
        return Verdict("fail", checks, f"{worst}: {', '.join(checks)}", timestamp,
                       node_action(f.details for f in counted))
    if not any(f.status in ("PASS", "WARN") for f in counted):
        return Verdict("unknown", (), "the report checked nothing (every check skipped or ignored)", timestamp)
    return Verdict("pass", (), "no finding gates a drain", timestamp)


def parse_timestamp(value: object) -> datetime | None:
    """The report's ISO timestamp as an aware datetime (naive ones are UTC, as reports write them)."""
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def freshness(timestamp: datetime | None, cfg: SlurmConfig, now: datetime) -> str | None:
    """Why a result is too old (or too new) to act on; None when it is fresh."""
    if timestamp is None:
        return "the report has no valid timestamp"
    age = now - timestamp
    if age < -FUTURE_SKEW:
        return f"the report is dated {-age.total_seconds():.0f} s in the future (clock skew?)"
    if age.total_seconds() > cfg.max_result_age_s:
        return f"the result is {age.total_seconds():.0f} s old (limit {cfg.max_result_age_s:g} s)"
    return None


def node_results(report: ClusterReport) -> tuple[list[NodeResult], list[ReportFinding]]:
    """Split a report's findings by node; also return cluster findings that name no node.

    A single-node report keeps every finding (its cluster checks are about that node). In
    a multi-node report a cluster finding belongs to the node its subject starts with
    (``node3`` or ``node3/gpu1``); group- and cluster-wide findings belong to none.
    """
    nodes: dict[str, NodeResult] = {}
    for key, info in report.nodes.node_infos():
        names = {n for n in (info.current_host, info.hostname) if n}
        label = info.current_host or info.hostname or key
        nodes[key] = NodeResult(label, names or {label})
    if len(nodes) == 1:
        only = next(iter(nodes.values()))
        only.findings = list(report.findings)
        return [only], []
    unattributed = []
    for f in report.findings:
        if f.node in nodes:
            nodes[f.node].findings.append(f)
            continue
        head = f.subject.split("/", 1)[0]
        owner = next((n for n in nodes.values() if head in n.names), None)
        if owner is not None:
            owner.findings.append(f)
        else:
            unattributed.append(f)
    return list(nodes.values()), unattributed


def load_report(path: Path, what: str = "result file") -> ClusterReport:
    """The typed report saved at ``path``; raises ``FileNotFoundError`` when there is none,
    ``ValueError`` saying why the file is not one (the path of a mistyped value included).

    Read through :mod:`gpu_preflight.boundedio`: a result path that names a FIFO would
    otherwise hang the health check until slurmd kills it, and ``/dev/zero`` would end in
    ``MemoryError``; both are "unknown" with a reason, like any unreadable result.
    """
    try:
        data = load_json(path, limit=REPORT_LIMIT, what=what)
    except InputMissing as exc:
        raise FileNotFoundError(str(exc)) from None
    except InputError as exc:
        raise ValueError(f"cannot read {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("findings"), list):
        raise ValueError(f"{path} is not a gpu-preflight report (no findings list)")
    try:
        return ClusterReport.from_dict(data)
    except msgspec.ValidationError as exc:
        raise ValueError(f"{path} is not a readable gpu-preflight report: {exc}") from None


def read_result(path: Path, cfg: SlurmConfig, now: datetime, names: set[str]) -> Verdict:
    """This node's verdict from its last result file (unknown when missing, unreadable or stale)."""
    try:
        report = load_report(path)
    except FileNotFoundError:
        return Verdict("unknown", (), f"no result at {path}: nothing has checked this node yet")
    except ValueError as exc:
        return Verdict("unknown", (), str(exc))
    timestamp = parse_timestamp(report.timestamp)
    stale = freshness(timestamp, cfg, now)
    if stale:
        return Verdict("unknown", (), stale, timestamp)
    nodes, _ = node_results(report)
    mine = nodes[0] if len(nodes) == 1 else next((n for n in nodes if n.names & names), None)
    if mine is None:
        return Verdict("unknown", (), f"{path} has no section for {', '.join(sorted(names))}", timestamp)
    return judge(mine.findings, cfg, timestamp)
