"""The health assessment: readiness, trends, 30-day targets, stability, issues and the schedule.

Pure derivations from the canonical report (and the ``[report]`` settings), shared by the
Markdown and HTML renderers so the two can never say different things. The readiness
follows the run's one verdict (:func:`~.canonical.verdict_of`), never the other way round:

- a verdict that gates the run (FAIL, ERROR, or WARN under ``--fail-on warn``) makes
  production **NEEDS FIXES** — READY is impossible then;
- a WARN verdict makes it **READY WITH CAVEATS**, naming the warnings;
- a PASS whose core components were not measured (no GPU read, no link between two
  nodes: ``health_scores.overall.incomplete``) is **READY WITH CAVEATS** saying what was
  not tested; only a complete PASS is **READY**;
- an immediate recommendation that does not gate the run — a node with no usable GPU that
  was not declared CPU-only (``report.scores.BLOCKING``) — makes both levels **NEEDS FIXES**:
  no GPU job can start there, whatever the exit code says about the host.

Development (one node, interruptions acceptable) needs fixes only for what fails or could
not be measured; warnings, ``--fail-on warn`` and an untested multi-node network are
caveats there, and an untested network alone is no caveat at all.

Trends compare each component's score with the median of its scores in the cluster's
earlier runs (``cluster_summary.earlier_scores``, read from the history database before
the run is filed): ``STABLE`` within ``report.trend_points``, else ``IMPROVING`` or
``DEGRADING``; ``first run`` when the history has no earlier run, ``no history`` when it
was not consulted. The stored block (:func:`assess`, ``cluster_summary.assessment``) is
computed with the run's settings, so ``report render`` says what the run said.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from msgspec.structs import replace

from ..config.report_schema import COMPONENTS, ReportConfig
from ..findings.canonical import verdict_of
from ..findings.model import (
    ClusterReport,
    ComponentTarget,
    EarlierScore,
    HealthAssessment,
    HealthScores,
    Issue,
    NodeSections,
    Number,
    OverallTarget,
    Readiness,
    ReadinessLevels,
    Recommendation,
    ReportFinding,
    Schedule,
    ScheduleItem,
    StabilityRow,
    Targets,
    Trend,
)
from ..ids import PINGPONG_ID
from ..model import Status
from .connectivity import node_names
from .scores import BLOCKING, INCOMPLETE, TITLES, compute_scores, dispersion, rating

__all__ = ["CAVEATS", "NEEDS_FIXES", "READY", "assess", "assessment_of", "component_order",
           "issues", "node_specs",
           "pair_latencies", "readiness", "schedule", "stability", "targets", "trends"]

READY, CAVEATS, NEEDS_FIXES = "READY", "READY WITH CAVEATS", "NEEDS FIXES"
STABLE, IMPROVING, DEGRADING = "STABLE", "IMPROVING", "DEGRADING"
FIRST_RUN, NO_HISTORY, NO_EARLIER, NOT_TESTED = "first run", "no history", "no earlier score", "not tested"
PRIORITY = {"immediate": "HIGH", "short_term": "MEDIUM"}
MAX_REASONS = 6
_UNITS = {"gemm": "TFLOP/s", "node_fabric": "GB/s", "node_links": "GB/s"}
# What a problem in each component does to a training job (the seed's "impact").
IMPACT = {
    "network_infrastructure": "collectives across nodes slow down, hang or time out",
    "hardware_health": "a GPU fault crashes the job or corrupts its results",
    "resource_management": "the job runs out of GPU or host memory, disk or shared memory, or shares GPUs "
                           "with other processes",
    "software_stack": "the job fails to start or runs with mismatched drivers and libraries",
    "service_reliability": "the run could not check everything, or training did not complete",
    "performance_consistency": "every synchronous step runs at the slowest member's speed",
}


def _listed(items: Sequence[str]) -> list[str]:
    return [*items[:MAX_REASONS], f"and {len(items) - MAX_REASONS} more"] if len(items) > MAX_REASONS else list(items)


def _entry_reason(e: Recommendation) -> str:
    where = f" ({e.count} subjects)" if e.count > 1 else ""
    return f"{e.check_id or e.component}: {e.summary}{where}"


def readiness(report: ClusterReport, scores: HealthScores,
              recs: Mapping[str, Sequence[Recommendation]]) -> ReadinessLevels:
    """Development/testing and production readiness (see the module docstring)."""
    verdict = verdict_of(report)
    problems = [_entry_reason(e) for e in [*recs.get("immediate", []), *recs.get("short_term", [])]]
    blocking = any((e.check_id, e.code) in BLOCKING for e in recs.get("immediate", []))
    untested = [f"not tested: {i.missing} ({i.title.lower()})" for i in scores.overall.incomplete or []]
    gpu_untested = [u for u in untested if u.endswith(f"({TITLES['hardware_health'].lower()})")]
    if verdict.exit_code >= Status.FAIL.exit_code or blocking:
        production = Readiness(status=NEEDS_FIXES, reasons=_listed([verdict.line, *problems]))
    elif verdict.exit_code == Status.WARN.exit_code:
        production = Readiness(status=CAVEATS, reasons=_listed([verdict.line, *problems, *untested]))
    elif untested:
        production = Readiness(status=CAVEATS, reasons=_listed(untested))
    else:
        production = Readiness(status=READY, reasons=[f"every core component was measured and nothing gates the run "
                                                      f"({verdict.line})"])
    if verdict.status in (Status.FAIL, Status.ERROR) or blocking:
        development = Readiness(status=NEEDS_FIXES, reasons=_listed([verdict.line, *problems]))
    elif verdict.status is Status.WARN:
        development = Readiness(status=CAVEATS, reasons=_listed([*problems, *gpu_untested]))
    elif gpu_untested:
        development = Readiness(status=CAVEATS, reasons=gpu_untested)
    else:
        development = Readiness(status=READY, reasons=[f"nothing warns, fails or could not be measured "
                                                       f"({verdict.line})"])
    return ReadinessLevels(development=development, production=production)


def trends(scores: HealthScores, earlier: Sequence[EarlierScore] | None,
           cfg: ReportConfig) -> dict[str, Trend]:
    """Per component and ``overall``: its trend against the earlier runs (``earlier``: None, no history)."""
    return {name: _trend(name, score, earlier, cfg) for name, score in scores.by_name().items()}


def _trend(name: str, score: Number | None, earlier: Sequence[EarlierScore] | None,
           cfg: ReportConfig) -> Trend:
    if earlier is None:
        return Trend(trend=NO_HISTORY, baseline=None, change=None, runs=0)
    if not earlier:
        return Trend(trend=FIRST_RUN, baseline=None, change=None, runs=0)
    past = [float(s) for e in earlier[-cfg.trend_runs:] if (s := e.components.get(name)) is not None]
    if score is None or not past:
        return Trend(trend=NOT_TESTED if score is None else NO_EARLIER, baseline=None, change=None, runs=len(past))
    from statistics import median  # only with earlier runs (statistics pulls in fractions and decimal)

    base = median(past)
    change = round(float(score) - base, 1)
    return Trend(trend=STABLE if abs(change) < cfg.trend_points else IMPROVING if change > 0 else DEGRADING,
                 baseline=round(base, 1), change=change, runs=len(past))


def targets(scores: HealthScores, cfg: ReportConfig) -> Targets:
    """The scores to reach within ``target_days``: at least ``target_score``, never below today's.

    Each target names what takes the points today (the biggest deductions), since fixing
    those is how the target is reached; an untested component's target is to test it.
    """
    rows: list[ComponentTarget] = []
    weights = scores.settings.weights
    counted: dict[str, float] = {}
    for name, comp in scores.components.items():
        score = comp.score
        if score is None:
            rows.append(ComponentTarget(component=name, title=comp.title, score=None, target=None, change=None,
                                        by=[comp.reason or NOT_TESTED]))
            continue
        target = max(float(score), cfg.target_score)
        by = list(dict.fromkeys(d.cause for d in comp.deductions))[:3]
        rows.append(ComponentTarget(component=name, title=comp.title, score=score, target=target,
                                    change=round(target - float(score), 1), by=by if target > score else []))
        if float(weights.get(name, 1.0)) > 0:
            counted[name] = target
    overall = scores.overall.score
    goal = None
    if counted:  # the fixes that reach the targets also lift the gating cap
        goal = sum(float(weights.get(c, 1.0)) * t for c, t in counted.items()) / \
            sum(float(weights.get(c, 1.0)) for c in counted)
        goal = round(max(goal, float(overall or 0.0)), 1)
    return Targets(days=cfg.target_days, target_score=cfg.target_score, components=rows,
                   overall=OverallTarget(score=overall, target=goal, rating=rating(goal, cfg),
                                         change=None if goal is None or overall is None else
                                         round(goal - float(overall), 1)))


def pair_latencies(report: ClusterReport) -> list[dict[str, Any]]:
    """Node pairs whose ``fi_pingpong`` client table was kept: latency at the smallest message.

    The client's table is the measurement (the server waits for it). ``status`` is the
    ``fabric.pingpong`` finding's for that pair, ``None`` where the report has none.
    """
    typed = report
    names = node_names(typed)
    judged = {int(f.details["pair"]): f.status.value for f in typed.findings
              if f.check_id == PINGPONG_ID and isinstance(f.details.get("pair"), int)}
    out = []
    for i, network in enumerate(typed.nodes.blocks("network")):
        test = network.efa_communication_test if network is not None else None
        for side in test.pairs if test is not None else []:
            if side.test_role != "client" or not side.raw_output:
                continue
            from ..cluster.pingpong_tables import side_rows  # a node run keeps no fi_pingpong table: no parser import

            rows = [r for r in side_rows(side.raw_output) if r.usec_per_xfer is not None]
            if not rows:
                continue
            first = min(rows, key=lambda r: r.size_bytes)
            peer = side.peer_node
            peer_name = names[peer] if 0 <= peer < len(names) else str(peer)
            out.append({"a": peer_name, "b": names[i], "pair": side.pair, "provider": side.provider,
                        "size_bytes": first.size_bytes, "latency_us": first.usec_per_xfer,
                        "status": judged.get(side.pair)})
    return out


def stability(scores: HealthScores, latencies: Sequence[Mapping[str, Any]] = ()) -> list[StabilityRow]:
    """Mean, range, standard deviation and CV of every measured series (the consistency score's input),
    and of the node-pair latencies (shown, not scored)."""
    rows = [StabilityRow(series=m.series, family=m.family, unit=_UNITS.get(m.family, ""), n=m.n, mean=m.mean,
                         min=m.min, max=m.max, std_dev=round(m.cv * m.mean, 4), cv=m.cv, slowest=m.slowest,
                         points=m.points, counted=m.counted) for m in scores.measurements]
    lat = {f"{p['a']}<->{p['b']}": float(p["latency_us"]) for p in latencies}
    stats = dispersion(lat.values())
    if stats is not None:
        worst = max(lat, key=lat.__getitem__)
        rows.append(StabilityRow(series="fi_pingpong latency across node pairs", family="latency", unit="µs",
                                 n=int(stats["n"]), mean=round(stats["mean"], 4), min=stats["min"], max=stats["max"],
                                 std_dev=round(stats["cv"] * stats["mean"], 4), cv=round(stats["cv"], 4),
                                 slowest=worst, points=0.0, counted=False))
    return rows


def issues(recs: Mapping[str, Sequence[Recommendation]]) -> list[Issue]:
    """The immediate and short-term recommendations as issues with a priority and an impact."""
    out = []
    for urgency, priority in PRIORITY.items():
        for e in recs.get(urgency) or []:
            impact = IMPACT.get(e.component, "the job may not run as expected")
            if e.status is Status.ERROR:
                impact = f"not measured, so unknown whether {impact}"
            out.append(Issue(priority=priority, status=e.status.value, check_id=e.check_id, code=e.code,
                             component=e.component, title=TITLES.get(e.component, e.component), impact=impact,
                             summary=e.summary, subjects=e.subjects[:12], count=e.count,
                             recommendation=e.recommendation))
    return out


def _when(timestamp: Any, days: float) -> str | None:
    try:
        return (datetime.fromisoformat(str(timestamp)) + timedelta(days=days)).date().isoformat()
    except ValueError:
        return None


def schedule(report: ClusterReport, ready: ReadinessLevels, cfg: ReportConfig) -> Schedule:
    """When to check what, and the date of the next full assessment (from ``[report]``)."""
    fixes = ready.production.status == NEEDS_FIXES
    days = cfg.reassess_after_fixes_days if fixes else cfg.assessment_interval_days
    setting = "report.reassess_after_fixes_days" if fixes else "report.assessment_interval_days"
    items = [
        ScheduleItem(when="continuously", what="GPU health (NVML, Xid, ECC) on every node",
                     command="gpu-preflight serve"),
        ScheduleItem(when="before every job", what="node checks in the scheduler's prolog",
                     command="gpu-preflight run --node-only"),
        ScheduleItem(when=f"every {cfg.assessment_interval_days:g} days", what="full assessment across all nodes",
                     command="gpu-preflight run --full"),
    ]
    if fixes:
        items.insert(0, ScheduleItem(when=f"within {cfg.reassess_after_fixes_days:g} days",
                                     what="re-assess after the immediate fixes", command="gpu-preflight run --full"))
    return Schedule(items=items, next_assessment=_when(report.timestamp, days), days=days, setting=setting)


def assess(report: ClusterReport, scores: HealthScores,
           recs: Mapping[str, Sequence[Recommendation]], cfg: ReportConfig) -> HealthAssessment:
    """The ``cluster_summary.assessment`` block."""
    earlier = report.cluster_summary.earlier_scores
    ready = readiness(report, scores, recs)
    return HealthAssessment(readiness=ready, trends=trends(scores, None if earlier is None else list(earlier), cfg),
                            targets=targets(scores, cfg), issues=issues(recs),
                            stability=stability(scores, pair_latencies(report)), schedule=schedule(report, ready, cfg))


def _node_of(finding: ReportFinding, keys: Mapping[str, str], names: Mapping[str, str]) -> str | None:
    """The node key a finding belongs to: its own, or the node its subject names (cluster checks)."""
    if finding.node in keys:
        return str(finding.node)
    return names.get(str(finding.subject).split("/", 1)[0])


def _address(info: Mapping[str, Any]) -> str | None:
    """A node's address: its section's own, else the one it measured toward the job's store (its identity)."""
    identity = info.get("identity")
    own = identity.get("address") if isinstance(identity, Mapping) else None
    return info.get("address") or info.get("ip_address") or own


def node_specs(report: ClusterReport, cfg: ReportConfig) -> dict[str, Any]:
    """Each node's address (where the report has one), GPUs, GPU memory, own score and worst
    judged status, up to ``detail_max_nodes`` nodes; the totals always. A node's score is the
    overall score of its own findings and those of cluster checks that name it, by the
    cluster's formula; its rating is INCOMPLETE where none of its GPUs was read."""
    typed = report
    sections = typed.nodes
    keys = {k: k for k in sections}
    labels = node_names(typed)
    by_name = {name: key for key, name in zip(sections, labels, strict=True)}
    total_gpus, total_mb = 0, 0.0
    for gpus in sections.blocks("gpu"):
        total_gpus += len(gpus)
        total_mb += sum(float(g.get("memory_total_mb") or 0) for g in gpus.values())
    listed = len(sections) <= cfg.detail_max_nodes
    rows = []
    if listed:
        own: dict[str, list[ReportFinding]] = {k: [] for k in sections}
        for f in typed.findings:
            key = _node_of(f, keys, by_name)
            if key is not None:
                own[key].append(f)
        alone = replace(typed.cluster_summary, unlisted=None, extra={})  # no localisation matrix
        for (key, section), name in zip(sections.items(), labels, strict=True):
            gpus = section.gpu
            info = section.node_info.extra
            models = sorted({str(g.get("name")) for g in gpus.values() if g.get("name")})
            sub = replace(typed, findings=own[key], nodes=NodeSections({key: section}),
                                      cluster_summary=alone)
            scored = compute_scores(sub, cfg)
            overall = scored.overall
            # The network's core (a link between two nodes) belongs to the cluster, not to one node:
            # a node is rated on its own GPUs being read.
            band = rating(overall.score, cfg)
            if band in ("EXCELLENT", "GOOD") and not scored.components["hardware_health"].tested:
                band = INCOMPLETE
            judged = [f.status.value for f in own[key] if f.status is not Status.SKIP]
            worst = Status.worst(judged).value if judged else (Status.SKIP.value if own[key] else None)
            rows.append({"node": name, "key": key, "address": _address(info),
                         "gpus": len(gpus), "models": models,
                         "gpu_memory_gb": round(sum(float(g.get("memory_total_mb") or 0) for g in gpus.values())
                                                / 1024, 2),
                         "score": overall.score, "rating": band, "worst": worst})
    return {"nodes": rows, "listed": listed, "total_nodes": len(sections), "total_gpus": total_gpus,
            "total_gpu_memory_gb": round(total_mb / 1024, 2)}


def assessment_of(report: ClusterReport, scores: HealthScores,
                  recs: Mapping[str, Sequence[Recommendation]], cfg: ReportConfig) -> HealthAssessment:
    """The stored assessment, or one derived now for a report saved before it was stored."""
    stored = report.cluster_summary.assessment
    return stored if stored is not None else assess(report, scores, recs, cfg)


def component_order(names: Iterable[str]) -> list[str]:
    """Components in the report's order, unknown ones (from a newer report) after them."""
    known = [c for c in COMPONENTS if c in set(names)]
    return known + sorted(set(names) - set(known))
