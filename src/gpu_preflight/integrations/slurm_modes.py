"""The three ways gpu-preflight meets Slurm: HealthCheckProgram, prolog/epilog, and a report.

* :func:`healthcheck` — slurmd runs it on every node every ``HealthCheckInterval`` (and
  kills it after 60 s), so it never runs a check: it reads the node's last result file,
  asks slurmctld about this one node, and only when it must drain does it fetch the
  whole node table for the circuit breaker.
* :func:`prolog_check` — runs the quick node checks under a hard time budget, writes the
  result file (so the next health check has a fresh answer), and on failure drains the
  node with our reason *before* exiting non-zero: Slurm then requeues the job and keeps
  our reason instead of writing its own "Prolog error".
* :func:`apply_report` — a cluster report from a multi-node run: drain the nodes that
  failed, resume our drains on nodes that passed, all through one breaker.

Exit codes: healthcheck 0 pass, 2 fail, 3 unknown or scontrol trouble; prolog/epilog 0
let the job run, 1 stop it (Slurm drains and requeues); drain-report 0 all done, 2 a
failure was not acted on (a drain refused, a node matched to no Slurm node, a cluster-wide
failure no single node owns), 3 could not act.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from msgspec.structs import replace

from ..config.slurm_schema import SlurmConfig
from ..findings.model import ClusterReport
from .slurm import Action, Kind, execute, gate, plan_node
from .slurm_ctl import Scontrol, ScontrolError
from .slurm_nodes import SlurmNode
from .slurm_result import Verdict, freshness, judge, node_results, parse_timestamp, read_result

__all__ = ["Outcome", "apply_report", "healthcheck", "prolog_check", "result_path"]

EXIT_OK, EXIT_FAIL, EXIT_UNKNOWN = 0, 2, 3
EXIT_STOP_JOB = 1
_VERDICT_EXIT = {"pass": EXIT_OK, "fail": EXIT_FAIL, "unknown": EXIT_UNKNOWN}


class Outcome(msgspec.Struct):
    """What a mode did: per-node actions, notes for the operator, and the exit code."""

    actions: list[Action] = []
    notes: list[str] = []
    exit_code: int = EXIT_OK

    def text(self) -> str:
        return "\n".join([*(a.line() for a in self.actions), *self.notes])

    def to_dict(self) -> dict[str, Any]:
        return {"actions": [a.to_dict() for a in self.actions], "notes": self.notes, "exit_code": self.exit_code}


def result_path(cfg: SlurmConfig, node: str) -> Path:
    return Path(cfg.result_file.replace("{node}", node))


def _now(now: datetime | None) -> datetime:
    return now or datetime.now(UTC)


def _drain_one(node: SlurmNode, verdict: Verdict, cfg: SlurmConfig, ctl: Scontrol, *, dry_run: bool,
               drain_unknown: bool = False) -> Action:
    """Plan one node, consult the breaker only when a new drain is planned, then execute."""
    action = plan_node(node, verdict, cfg, drain_unknown=drain_unknown)
    if action.kind is Kind.DRAIN:
        try:
            cluster = ctl.nodes()
        except ScontrolError as exc:
            action = Action(node.name, Kind.REFUSED, f"{action.why}; cannot count the cluster for the "
                                                     f"circuit breaker ({exc}): not drained", verdict)
        else:
            action = gate([action], cluster, cfg)[0]
    return execute([action], ctl, dry_run=dry_run)[0]


def healthcheck(node_name: str, cfg: SlurmConfig, ctl: Scontrol, *, dry_run: bool,
                now: datetime | None = None) -> Outcome:
    """HealthCheckProgram mode: act on this node's last result; never runs a check."""
    path = result_path(cfg, node_name)
    verdict = read_result(path, cfg, _now(now), {node_name})
    try:
        node = ctl.node(node_name)
    except ScontrolError as exc:
        return Outcome([], [f"{node_name}: {verdict.state}: {verdict.detail}; cannot act: {exc}"], EXIT_UNKNOWN)
    action = _drain_one(node, verdict, cfg, ctl, dry_run=dry_run,
                        drain_unknown=cfg.stale_result_action == "drain")
    code = EXIT_UNKNOWN if action.error else _VERDICT_EXIT[verdict.state]
    return Outcome([action], [], code)


def write_result(report: ClusterReport, path: Path) -> str | None:
    """Write the report atomically (a health check may read it at any moment); None or why not."""
    # start-up: the periodic healthcheck only reads a result (tests/test_slurm_cluster.py)
    from ..safeio import atomic_writer, describe_error

    try:
        with atomic_writer(path) as fh:
            json.dump(report.to_dict(), fh)
            fh.write("\n")
    except (OSError, ValueError) as exc:
        return f"cannot write the result file {path}: {describe_error(exc)}"
    return None


def run_node_checks(options: Any, budget_s: float) -> tuple[ClusterReport | None, str | None]:
    """The quick node checks as a canonical report, within ``budget_s`` in all.

    Each probe and check gets half the budget (they already time out one by one); the
    whole run is bounded too, because a prolog that hangs holds the job and the node.
    Raises ``ConfigError``/``KeyError`` for a bad configuration or check pattern.
    """
    # start-up: the periodic healthcheck must not load the engine (tests/test_slurm_cluster.py)
    from ..deadline import Timeout, call
    from ..engine import run_checks
    from ..report.build import build

    opts = replace(options, probe_timeout_s=min(options.probe_limit_s, budget_s / 2))
    try:
        node = call(lambda: run_checks(opts), budget_s, "node checks")
    except Timeout as exc:
        return None, f"node checks did not finish within {budget_s:g} s ({exc}): a hung GPU or driver?"
    return build([node]), None


def prolog_check(node_name: str, cfg: SlurmConfig, ctl: Scontrol, report: ClusterReport | None,
                 problem: str | None, *, dry_run: bool) -> Outcome:
    """Prolog/epilog mode, given the node checks' report (or why there is none).

    ``problem`` set and no report means the checks did not finish in their budget: that
    fails closed, like a hung GPU would. Only a failing verdict talks to slurmctld, so a
    healthy node costs the controller nothing (Slurm asks prologs not to call scontrol).
    """
    notes: list[str] = []
    if report is None:
        verdict = Verdict("fail", ("node-checks-timeout",), problem or "node checks did not finish",
                          datetime.now(UTC))
    else:
        nodes, _ = node_results(report)
        verdict = judge(nodes[0].findings if nodes else [], cfg, parse_timestamp(report.timestamp))
        why_not = write_result(report, result_path(cfg, node_name))
        if why_not:
            notes.append(why_not)
    if verdict.state != "fail":
        return Outcome([Action(node_name, Kind.NONE, "job may run", verdict)], notes, EXIT_OK)
    try:
        node = ctl.node(node_name)
    except ScontrolError as exc:
        notes.append(f"cannot reach slurmctld ({exc}): exiting non-zero so Slurm keeps the job off this node")
        return Outcome([Action(node_name, Kind.NONE, verdict.detail, verdict)], notes,
                       EXIT_OK if dry_run else EXIT_STOP_JOB)
    action = _drain_one(node, verdict, cfg, ctl, dry_run=dry_run)
    if dry_run:
        notes.append("dry run: exiting 0, the job runs (use --apply to drain and requeue)")
        return Outcome([action], notes, EXIT_OK)
    if action.kind is Kind.REFUSED:
        notes.append("the circuit breaker is open: exiting 0 so the job runs on this failing node rather "
                     "than taking more of the cluster out; look at the cluster")
        return Outcome([action], notes, EXIT_OK)
    return Outcome([action], notes, EXIT_STOP_JOB)


def apply_report(report: ClusterReport, cfg: SlurmConfig, ctl: Scontrol, *, dry_run: bool,
                 now: datetime | None = None) -> Outcome:
    """Drain the nodes a cluster report failed and resume our drains on the ones it passed."""
    timestamp = parse_timestamp(report.timestamp)
    stale = freshness(timestamp, cfg, _now(now))
    if stale:
        return Outcome([], [f"report not applied: {stale} (raise --max-result-age-s to apply it anyway)"],
                       EXIT_UNKNOWN)
    try:
        cluster = ctl.nodes()
    except ScontrolError as exc:
        return Outcome([], [f"report not applied: {exc}"], EXIT_UNKNOWN)
    index: dict[str, list[SlurmNode]] = {}
    for node in cluster:
        for name in node.names():
            index.setdefault(name, []).append(node)
    nodes, unattributed = node_results(report)
    actions = []
    for result in nodes:
        verdict = judge(result.findings, cfg, timestamp)
        matches = {n.name: n for name in result.names for n in index.get(name, [])}
        if len(matches) != 1:
            why = "matches no Slurm node" if not matches else f"matches several Slurm nodes ({', '.join(matches)})"
            actions.append(Action(result.label, Kind.UNMAPPED, f"{why}: not touched", verdict))
            continue
        actions.append(plan_node(next(iter(matches.values())), verdict, cfg))
    actions = execute(gate(actions, cluster, cfg), ctl, dry_run=dry_run)
    gating = judge(unattributed, cfg, timestamp) if unattributed else None
    notes = []
    if gating is not None and gating.state == "fail":
        notes.append(f"cluster-level failures not attributed to one node ({', '.join(gating.checks)}): "
                     f"no node drained for them; see the report")
    code = EXIT_OK
    if notes or any(a.kind in (Kind.REFUSED, Kind.UNMAPPED) and a.verdict and a.verdict.state == "fail"
                    for a in actions):
        code = EXIT_FAIL  # something failing was not acted on
    if any(a.error for a in actions):
        code = EXIT_UNKNOWN
    return Outcome(actions, notes, code)
