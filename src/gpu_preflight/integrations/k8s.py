"""Kubernetes: node labels, an annotation and a taint from a gpu-preflight report.

The scheduler is the only thing that keeps new pods off a bad GPU node, and it reads
labels and taints, not reports. A run therefore ends in:

* ``gpu-preflight.io/health=pass|warn|fail|error|unknown``,
  ``gpu-preflight.io/last-run=<UTC YYYYMMDDTHHMMSSZ>`` and
  ``gpu-preflight.io/action=none|monitor|restart_job|check_mechanicals|reset_gpu|reboot_node|isolate_node``
  labels (selectable: ``kubectl get nodes -l gpu-preflight.io/action=reset_gpu``; label values
  cannot hold ``:``). The action is the strongest the node's findings call for
  (:func:`gpu_preflight.actions.node_action`), written on every run (``none`` included) so a
  value from an earlier run never lingers;
* a ``gpu-preflight.io/summary`` annotation naming the failed checks (free text);
* the taint ``gpu-preflight.io/unhealthy=<status>:NoSchedule`` on FAIL and ERROR (ERROR is
  "could not measure", gated like FAIL: fail closed), removed again by a passing run. Only
  this key is ever touched: an operator's own taints stay as they are.

A report that fails every node is more likely a wrong threshold or a broken fabric than
a cluster of broken GPUs, so a circuit breaker holds new taints when they would cover
more than ``max_taint_fraction`` of the nodes (labels are still written, so the evidence
is visible). The plan is pure data; :func:`kubectl_commands` prints it (the default, dry
run) and :func:`gpu_preflight.integrations.k8s_apply.apply` sends it through the official
Python client (the ``k8s`` extra, imported only there).
"""

from __future__ import annotations

import math
import shlex
import urllib.request
from collections.abc import Iterable
from datetime import UTC, datetime

import msgspec

from ..actions import node_action
from ..boundedio import REPORT_LIMIT, load_json, parse_json
from ..findings.model import ClusterReport, ReportFinding
from .slurm_result import node_results, parse_timestamp

PREFIX = "gpu-preflight.io"
HEALTH_LABEL = f"{PREFIX}/health"
LAST_RUN_LABEL = f"{PREFIX}/last-run"
ACTION_LABEL = f"{PREFIX}/action"
SUMMARY_ANNOTATION = f"{PREFIX}/summary"
TAINT_KEY = f"{PREFIX}/unhealthy"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
HEALTH_VALUES = ("pass", "warn", "fail", "error", "unknown")
DEFAULT_TAINT_ON = ("fail", "error")
SUMMARY_MAX = 1024
_RANK = {"PASS": 0, "SKIP": 0, "WARN": 1, "ERROR": 2, "FAIL": 3}


class ReportSourceError(ValueError):
    """The report source could not be read or is not a gpu-preflight report."""


class Taint(msgspec.Struct, frozen=True):
    """A Kubernetes node taint: key, value and effect (``NoSchedule``, ``NoExecute``)."""

    key: str
    value: str
    effect: str

    def spec(self) -> str:
        """``key=value:effect``, as ``kubectl taint`` writes it."""
        return f"{self.key}={self.value}:{self.effect}"


class NodeAction(msgspec.Struct, frozen=True):
    """What one node gets: labels, annotations, and our taint set (``taint``) or removed (None)."""

    node: str
    health: str
    labels: dict[str, str]
    annotations: dict[str, str]
    taint: Taint | None


class LabelPlan(msgspec.Struct):
    """The actions for every node in a report, and why any taint was held back."""

    actions: list[NodeAction]
    held: list[str] = []
    notes: list[str] = []

    @property
    def tripped(self) -> bool:
        return bool(self.held)


def health_of(findings: Iterable[ReportFinding]) -> str:
    """``pass|warn|fail|error``, or ``unknown`` when nothing was checked (all SKIP): never a pass."""
    statuses = [f.status.value for f in findings]
    if not any(s in ("PASS", "WARN", "FAIL", "ERROR") for s in statuses):
        return "unknown"
    worst = max(statuses, key=lambda s: _RANK.get(s, 0))
    return "pass" if worst in ("PASS", "SKIP") else worst.lower()


def label_time(value: object, now: datetime | None = None) -> str:
    """A label-safe UTC time (``20251203T175441Z``) from the report's ISO timestamp."""
    when = parse_timestamp(value) or now or datetime.now(UTC)
    return when.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def _summary(health: str, findings: list[ReportFinding], when: str) -> str:
    bad = [f for f in findings if f.status in ("FAIL", "ERROR", "WARN")]
    bad.sort(key=lambda f: -_RANK.get(f.status.value, 0))
    checks = list(dict.fromkeys(f"{f.status.value} {f.check_id}" for f in bad))
    text = f"{health} at {when}" + (f": {'; '.join(checks)}" if checks else "")
    return text if len(text) <= SUMMARY_MAX else text[:SUMMARY_MAX - 3] + "..."


def allowed_taints(total_nodes: int, fraction: float) -> int:
    """How many nodes may carry our taint at once: ``fraction`` of the nodes, at least one."""
    return max(1, math.floor(fraction * total_nodes)) if total_nodes > 0 else 0


def plan(report: ClusterReport, *, node: str | None = None, taint_on: Iterable[str] = DEFAULT_TAINT_ON,
         effect: str = "NoSchedule", now: datetime | None = None) -> LabelPlan:
    """Labels, annotation and taint for every node of ``report``.

    ``node`` names the Kubernetes node of a single-node report (the report only knows the
    pod's host name unless ``GPU_PREFLIGHT_NODE_NAME`` was set from ``spec.nodeName``).
    The circuit breaker is not applied here: it needs a node count, which is the report's
    in a dry run and the cluster's when applying (:func:`hold_if_over`).
    """
    if effect not in TAINT_EFFECTS:
        raise ValueError(f"taint effect {effect!r} is not one of {', '.join(TAINT_EFFECTS)}")
    gating = {t.lower() for t in taint_on}
    unknown = gating - set(HEALTH_VALUES)
    if unknown:
        raise ValueError(f"cannot taint on {', '.join(sorted(unknown))} (known: {', '.join(HEALTH_VALUES)})")
    nodes, unattributed = node_results(report)
    if node is not None and len(nodes) != 1:
        raise ValueError(f"--node names one node, but the report has {len(nodes)}")
    when = label_time(report.timestamp, now)
    actions = []
    for result in nodes:
        name = node or result.label
        health = health_of(result.findings)
        taint = Taint(TAINT_KEY, health, effect) if health in gating else None
        action = node_action(f.details for f in result.findings)
        labels = {HEALTH_LABEL: health, LAST_RUN_LABEL: when, ACTION_LABEL: action.value}
        actions.append(NodeAction(name, health, labels,
                                  {SUMMARY_ANNOTATION: _summary(health, result.findings, when)}, taint))
    out = LabelPlan(actions)
    if unattributed:
        out.notes.append(f"{len(unattributed)} cluster-wide finding(s) name no node and taint none "
                         f"(worst: {health_of(unattributed)})")
    return out


def hold_if_over(out: LabelPlan, *, total_nodes: int, already_tainted: set[str], fraction: float) -> None:
    """The circuit breaker: drop every new taint when the total would exceed the allowance.

    All or nothing: which of many failing nodes to taint first would be an arbitrary choice,
    and a partial taint hides that the whole report is suspect. Removals always go through.
    """
    new = {a.node for a in out.actions if a.taint is not None} - already_tainted
    cleared = {a.node for a in out.actions if a.taint is None}
    after = (already_tainted - cleared) | {a.node for a in out.actions if a.taint is not None}
    limit = allowed_taints(total_nodes, fraction)
    if not new or len(after) <= limit:
        return
    out.held = sorted(new)
    out.actions = [NodeAction(a.node, a.health, a.labels, a.annotations, None) if a.node in new else a
                   for a in out.actions]
    out.notes.append(f"circuit breaker: {len(after)} of {total_nodes} nodes would be tainted (limit {limit}, "
                     f"{fraction:g} of the nodes); taints held for {', '.join(out.held)}. Check the report, then "
                     f"taint by hand or raise --max-taint-fraction")


def kubectl_commands(out: LabelPlan) -> list[list[str]]:
    """The plan as ``kubectl`` argv lists (dry run: printed, never executed)."""
    cmds: list[list[str]] = []
    for a in out.actions:
        cmds.append(["kubectl", "label", "node", a.node, "--overwrite", *(f"{k}={v}" for k, v in a.labels.items())])
        cmds.append(["kubectl", "annotate", "node", a.node, "--overwrite",
                     *(f"{k}={v}" for k, v in a.annotations.items())])
        if a.taint is not None:
            cmds.append(["kubectl", "taint", "node", a.node, "--overwrite", a.taint.spec()])
        else:
            cmds.append(["kubectl", "taint", "node", a.node, f"{TAINT_KEY}-"])
    return cmds


def render_commands(out: LabelPlan) -> str:
    """Shell lines; taint removal may find no taint, which kubectl reports as an error, hence ``|| true``."""
    lines = []
    for argv in kubectl_commands(out):
        line = shlex.join(argv)
        lines.append(f"{line} 2>/dev/null || true" if argv[-1] == f"{TAINT_KEY}-" else line)
    return "\n".join(lines) + "\n"


def load_report(source: str, timeout_s: float = 10.0) -> ClusterReport:
    """The typed report from a file, ``-`` (stdin) or a ``gpu-preflight serve`` ``/status`` URL
    (validated: a mistyped value is refused with its path).

    ``/status`` wraps the last report of the health server under ``"report"``; that is how
    the DaemonSet's labeller reads its own node's verdict without running the checks again.
    """
    try:
        if source.startswith(("http://", "https://")):
            with urllib.request.urlopen(source, timeout=timeout_s) as resp:  # noqa: S310 (http(s) only, checked above)
                body = resp.read(REPORT_LIMIT + 1)
            if len(body) > REPORT_LIMIT:
                raise ValueError(f"larger than {REPORT_LIMIT // (1024 * 1024)} MiB")
            data = parse_json(body.decode("utf-8"), source, what="report")
        else:
            data = load_json(source, limit=REPORT_LIMIT, what="report")  # a file or - (stdin), bounded
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ReportSourceError(f"cannot read a report from {source}: {exc}") from exc
    if isinstance(data, dict) and "findings" not in data and "report" in data:
        data = data["report"]
        if data is None:
            raise ReportSourceError(f"{source} has no report yet (the server has not finished a run)")
    if not isinstance(data, dict) or not isinstance(data.get("findings"), list):
        raise ReportSourceError(f"{source} is not a gpu-preflight report (no findings list)")
    try:
        return ClusterReport.from_dict(data)
    except msgspec.ValidationError as exc:
        raise ReportSourceError(f"{source} is not a readable gpu-preflight report: {exc}") from None
