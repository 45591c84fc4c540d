"""Drain and resume Slurm nodes from gpu-preflight verdicts, safely.

The rules, each there because an automatic drain that gets it wrong takes healthy
capacity away from everyone (draino once cordoned every node of a cluster):

* A failing node is drained with a reason that starts with ``slurm.reason_prefix``
  (``scontrol update NodeName=X State=DRAIN "Reason=gpu-preflight: <failed checks>"``); when
  its findings call for an operator action, the reason names it first
  (``gpu-preflight: action=reset_gpu gpu.memory.remap, dcgm.diag``), one value a hook routes on.
* Only a node drained *with our prefix* is ever resumed, and only by a passing result
  taken after the drain: a result from before the drain says nothing about the fault.
* A drain or a down state set by anyone else is left alone, whatever our result says.
* Circuit breaker: a drain is refused when it would leave more than
  ``slurm.max_drain_fraction`` of the cluster drained, down or failed, counting what
  operators and Slurm itself took out. A refused drain is reported, never queued.
* Dry run is the default: the plan is computed from the live cluster state and the
  ``scontrol update`` commands are printed instead of run.

Planning is pure (:func:`plan_node`, :class:`Breaker`); :func:`execute` is the only
step that changes the cluster.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import msgspec
from msgspec.structs import replace

from ..actions import Action as OperatorAction
from ..config.slurm_schema import SlurmConfig
from .slurm_ctl import Scontrol, ScontrolError
from .slurm_nodes import SlurmNode
from .slurm_result import Verdict

__all__ = ["Action", "Breaker", "Kind", "drain_reason", "execute", "gate", "plan_node"]

MAX_REASON_CHARS = 200
NO_RESULT = "no fresh result"


class Kind(enum.StrEnum):
    """What happens to a node."""

    DRAIN = "drain"
    REASON = "update-reason"  # already drained by us; the failing checks changed
    RESUME = "resume"
    NONE = "none"  # nothing to do
    LEFT_ALONE = "left-alone"  # drained or down by someone else
    REFUSED = "refused"  # the circuit breaker said no
    UNMAPPED = "unmapped"  # a report node that matches no Slurm node


CHANGES = frozenset({Kind.DRAIN, Kind.REASON, Kind.RESUME})


class Action(msgspec.Struct, frozen=True):
    """One node's planned (and, after :func:`execute`, attempted) change."""

    node: str
    kind: Kind
    why: str
    verdict: Verdict | None = None
    args: tuple[str, ...] = ()
    command: str = ""
    done: bool = False
    error: str | None = None

    def line(self) -> str:
        """One human line: node, verdict, what happens and whether it ran."""
        v = self.verdict
        state = "" if v is None else f"{v.state.upper()}" + (f" ({', '.join(v.checks)})" if v.checks else "")
        head = f"{self.node}: {state} -> {self.kind.value}: {self.why}" if state else \
            f"{self.node}: {self.kind.value}: {self.why}"
        if self.command:
            status = "done" if self.done else f"FAILED: {self.error}" if self.error else "dry run, not run"
            head += f"\n  {self.command}   [{status}]"
        return head

    def to_dict(self) -> dict[str, Any]:
        v = self.verdict
        return {"node": self.node, "action": self.kind.value, "why": self.why, "command": self.command or None,
                "done": self.done, "error": self.error,
                "verdict": None if v is None else {
                    "state": v.state, "checks": list(v.checks), "detail": v.detail,
                    "timestamp": v.timestamp.isoformat() if v.timestamp else None,
                    **({"operator_action": v.action.value} if v.action is not OperatorAction.NONE else {})}}


def drain_reason(verdict: Verdict, prefix: str) -> str:
    """``<prefix> [action=<operator action> ]<failed checks>``, shortened to fit ``sinfo -R`` and
    slurmctld's logs.

    The action (``action=reset_gpu``: the strongest the node's findings call for, the value its
    report section's ``summary.operator_action`` holds) comes first, so it is never cut, and a
    hook reads it with one pattern (``action=(\\w+)``); a failure that calls for none reads as it
    always did. Stable for the same failure, so a node that keeps failing is not re-drained (which
    would reset its reason time) on every health check.
    """
    if verdict.state != "fail":
        return f"{prefix} {NO_RESULT}"
    text = f"{prefix} " + (f"action={verdict.action.value} " if verdict.action is not OperatorAction.NONE else "")
    for i, check in enumerate(verdict.checks):
        more = f" +{len(verdict.checks) - i} more"
        piece = check if i == 0 else f", {check}"
        if len(text) + len(piece) + len(more) > MAX_REASON_CHARS and i > 0:
            return text + more
        text += piece
    return text


def plan_node(node: SlurmNode, verdict: Verdict, cfg: SlurmConfig, *, drain_unknown: bool = False) -> Action:
    """What to do with ``node`` given its verdict (before the circuit breaker)."""
    prefix = cfg.reason_prefix
    failing = verdict.state == "fail" or (verdict.state == "unknown" and drain_unknown)
    if failing:
        reason = drain_reason(verdict, prefix)
        why = "node checks failing" if verdict.state == "fail" else \
            f"{verdict.detail} (stale_result_action=drain)"
        if node.drained_by(prefix):
            if node.reason == reason or verdict.state != "fail":  # no fresh result keeps the known cause
                return Action(node.name, Kind.NONE, f"already drained by gpu-preflight ({node.reason})", verdict)
            return Action(node.name, Kind.REASON, f"still failing, reason updated: {why}", verdict,
                          ("update", f"NodeName={node.name}", "State=DRAIN", f"Reason={reason}"))
        if node.drained or node.down:
            by = f" by {node.reason_user}" if node.reason_user else ""
            return Action(node.name, Kind.LEFT_ALONE,
                          f"{node.state}{by} ({node.reason or 'no reason'}): not ours, left alone", verdict)
        return Action(node.name, Kind.DRAIN, why, verdict,
                      ("update", f"NodeName={node.name}", "State=DRAIN", f"Reason={reason}"))
    if verdict.state == "pass" and node.drained_by(prefix):
        if node.reason_time is None or verdict.timestamp is None:
            return Action(node.name, Kind.NONE, "drained by gpu-preflight but the drain time is unknown: "
                                                "resume it by hand once it is fixed", verdict)
        if verdict.timestamp < node.reason_time + timedelta(seconds=1):
            return Action(node.name, Kind.NONE, f"passing result predates our drain at "
                                                f"{node.reason_time.isoformat(timespec='seconds')}: waiting for "
                                                f"a re-check", verdict)
        return Action(node.name, Kind.RESUME, "passing re-check after our drain", verdict,
                      ("update", f"NodeName={node.name}", f"State={cfg.resume_state}"))
    if verdict.state == "pass":
        return Action(node.name, Kind.NONE, "passes", verdict)
    return Action(node.name, Kind.NONE, f"{verdict.detail}; nothing changed (stale_result_action=ignore)", verdict)


class Breaker:
    """The circuit breaker over the whole cluster (FUTURE nodes excluded).

    ``cap`` is how many nodes may be out of service at once: ``max_drain_fraction`` of
    the cluster, rounded down, but never below ``min_drain_nodes``.
    """

    def __init__(self, nodes: Iterable[SlurmNode], cfg: SlurmConfig) -> None:
        members = [n for n in nodes if n.in_cluster]
        self.total = len(members)
        self.out = {n.name for n in members if n.out_of_service}
        self.fraction = cfg.max_drain_fraction
        self.cap = max(cfg.min_drain_nodes, math.floor(cfg.max_drain_fraction * self.total + 1e-9))

    def admit(self, name: str) -> str | None:
        """None when ``name`` may be drained (and counts it from now on), else why not."""
        if name in self.out:
            return None
        if len(self.out) + 1 > self.cap:
            return (f"circuit breaker: {len(self.out)} of {self.total} nodes already drained, down or failed; "
                    f"the cap is {self.cap} (max_drain_fraction {self.fraction:g}): not drained")
        self.out.add(name)
        return None


def gate(actions: list[Action], nodes: Iterable[SlurmNode], cfg: SlurmConfig) -> list[Action]:
    """Pass drains through the breaker, worst first: failures before unknown results, then by name."""
    breaker = Breaker(nodes, cfg)
    order = sorted((a for a in actions if a.kind is Kind.DRAIN),
                   key=lambda a: (a.verdict is None or a.verdict.state != "fail", a.node))
    refused = {}
    for action in order:
        why = breaker.admit(action.node)
        if why:
            refused[action.node] = replace(action, kind=Kind.REFUSED, why=f"{action.why}; {why}", args=())
    return [refused.get(a.node, a) if a.kind is Kind.DRAIN else a for a in actions]


def execute(actions: list[Action], ctl: Scontrol, *, dry_run: bool) -> list[Action]:
    """Run (or, in dry run, only render) each change; an scontrol failure is recorded, not raised."""
    out = []
    for action in actions:
        if action.kind not in CHANGES or not action.args:
            out.append(action)
            continue
        command = ctl.command(action.args)
        if dry_run:
            out.append(replace(action, command=command))
            continue
        try:
            ctl.update(action.args)
        except ScontrolError as exc:
            out.append(replace(action, command=command, error=str(exc)))
        else:
            out.append(replace(action, command=command, done=True))
    return out
