"""Recommendations grouped by urgency, and what the checks cost against what they caught.

Urgency follows the run's own gate, so the report and the exit code never disagree:

- ``immediate``: findings that gate the run (FAIL and ERROR; WARN too under ``--fail-on warn``):
  the job should not start until they are fixed or the node is excluded. A node with no
  usable GPU that was not declared CPU-only (``gpu.inventory.count`` ``no_gpus``) is
  immediate too, although it is a WARN: a GPU job placed on it cannot run at all.
- ``short_term``: the remaining warnings — the job can run, but slower or at risk.
- ``monitoring``: what to keep an eye on — skipped checks that say how to cover them,
  components that were not tested at all, and measurement spreads that cost points.

Findings with the same check, code and advice are one entry listing every subject, so a
cluster-wide cause reads as one action, not a thousand lines.

The cost-benefit line compares the GPU-hours the checks used (run time × GPUs) with the
GPU-hours a job of ``report.job_hours`` would have lost to what they caught: a gating
finding loses ``failure_loss_fraction`` of the job (a failure strikes, on average,
halfway); without one, a measured straggler slows every synchronous step by its gap.
Money appears only where ``report.gpu_hour_price`` is set.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..config.report_schema import ReportConfig
from ..findings.model import Assessment, ClusterReport, CostBenefit, HealthScores, Recommendation, ReportFinding
from ..model import Status, gating_statuses
from .measurements import num
from .scores import BLOCKING, component_of, compute_scores

__all__ = ["URGENCIES", "add_advice", "advise", "cost_benefit", "recommendations_by_urgency"]

URGENCIES = ("immediate", "short_term", "monitoring")
_UNTESTED_HINT = {
    "network_infrastructure": "Run across two or more nodes (torchrun, srun) so collectives and node links are "
                              "measured.",
    "hardware_health": "Run on a GPU node (NVML) so the GPUs themselves are checked.",
    "resource_management": "Run the node checks (system.*, gpu.busy) so memory, disk, /dev/shm, limits and GPU "
                           "occupancy are checked.",
    "software_stack": "Install the torch extra and run the node checks so driver, CUDA and NCCL are checked.",
    "service_reliability": "Run the full check (not --check subsets) so services and completeness are checked.",
    "performance_consistency": "Run with GPUs and the torch extra so GEMM and bandwidth can be compared across "
                               "GPUs and nodes.",
}




def _urgency(status: str, gating: set[str], blocking: bool = False) -> str | None:
    if status in gating or (blocking and status != Status.SKIP.value):
        return "immediate"
    if status == Status.WARN.value:
        return "short_term"
    return None


def recommendations_by_urgency(report: ClusterReport, scores: HealthScores) -> dict[str, list[Recommendation]]:
    """``{"immediate": [...], "short_term": [...], "monitoring": [...]}``, worst and widest first."""
    typed = report
    gating = {s.value for s in gating_statuses(typed.run.fail_on)}
    groups: dict[tuple[str, str, str, str], list[ReportFinding]] = defaultdict(list)
    for f in typed.findings:
        status = f.status.value
        urgency = _urgency(status, gating, (f.check_id, f.code or "") in BLOCKING)
        if urgency is None and f.status is Status.SKIP and f.recommendation:
            urgency = "monitoring"
        if urgency is None:
            continue
        action = f.recommendation or f"Investigate: {f.summary}"
        groups[(urgency, f.check_id, f.code or "", action)].append(f)
    out: dict[str, list[Recommendation]] = {u: [] for u in URGENCIES}
    for (urgency, check_id, code, action), members in groups.items():
        out[urgency].append(Recommendation(
            check_id=check_id, code=code, component=component_of(check_id),
            status=Status.worst(f.status for f in members), recommendation=action,
            subjects=list(dict.fromkeys(str(f.subject) for f in members)), count=len(members),
            summary=members[0].summary))
    for entries in out.values():
        entries.sort(key=lambda e: (-e.status.rank, -e.count, e.check_id or "", e.code))
    for name, comp in scores.components.items():
        if not comp.tested:
            out["monitoring"].append(Recommendation(
                check_id=None, code="not_tested", component=name, status=Status.SKIP,
                recommendation=_UNTESTED_HINT.get(name, "Run the checks of this component."),
                subjects=[], count=0, summary=f"{comp.title}: {comp.reason}"))
    perf = scores.consistency
    for d in (d for d in perf.deductions if d.family is not None) if perf else ():  # spreads; findings above
        out["monitoring"].append(Recommendation(
            check_id=None, code=f"spread_{d.family}", component="performance_consistency", status=Status.PASS,
            recommendation=f"Watch {d.slowest}: compare its clocks, temperature and links with its peers and "
                           f"re-measure; a persistent straggler slows every synchronous step.",
            subjects=[d.slowest] if d.slowest is not None else [], count=1,
            summary=f"{d.series}: dispersion {100 * (d.dispersion or 0.0):.1f}% (slowest {d.slowest})"))
    return out


def _gpu_count(report: ClusterReport) -> int:
    return sum(map(len, report.nodes.blocks("gpu")))


def _money(gpu_hours: float, cfg: ReportConfig) -> float | None:
    return round(gpu_hours * cfg.gpu_hour_price, 4) if cfg.gpu_hour_price is not None else None


def _fmt(gpu_hours: float, cost: float | None, cfg: ReportConfig) -> str:
    text = f"{gpu_hours:,.4g} GPU-h" if gpu_hours == 0 or gpu_hours >= 0.01 else f"{gpu_hours * 3600:.3g} GPU-s"
    if cost is None:
        return text
    return f"{text} = {cost:,.2f} {cfg.currency}" if cost >= 1 or cost == 0 else f"{text} = {cost:.4f} {cfg.currency}"


def cost_benefit(report: ClusterReport, scores: HealthScores | None, cfg: ReportConfig) -> CostBenefit:
    """What the checks cost and what the failures they caught would have cost a job of ``job_hours``."""
    typed = report
    run = typed.run
    wall = num(run.extra.get("wall_s"))
    source = "run.wall_s" if wall is not None else "run.duration_s"
    duration = (wall if wall is not None else num(run.duration_s)) or 0.0
    gpus = _gpu_count(typed)
    gating = {s.value for s in gating_statuses(run.fail_on)}
    caught = sorted({(f.check_id, str(f.subject)) for f in typed.findings if f.status.value in gating})
    measured = scores.measurements if scores is not None else []
    slowdown = max((float(m.straggler_gap) for m in measured if m.counted and m.points > 0), default=0.0)
    check_gpu_hours = duration / 3600.0 * gpus
    job_gpu_hours = cfg.job_hours * gpus
    if caught:
        basis, averted = "failure", job_gpu_hours * cfg.failure_loss_fraction
    elif slowdown > 0:
        basis, averted = "slowdown", job_gpu_hours * slowdown
    else:
        basis, averted = "none", 0.0
    check_cost, averted_cost = _money(check_gpu_hours, cfg), _money(averted, cfg)
    ratio = round(averted / check_gpu_hours, 1) if check_gpu_hours > 0 and averted > 0 else None
    checks = f"The checks used {duration:.1f} s × {gpus} GPU(s): {_fmt(check_gpu_hours, check_cost, cfg)}"
    if gpus == 0:
        line = f"{checks}: no GPU in this run, so there is nothing to price."
    elif basis == "failure":
        line = (f"{checks}; the {len(caught)} gating finding(s) they caught would have cost a {cfg.job_hours:g} h "
                f"job on these GPUs about {_fmt(averted, averted_cost, cfg)} "
                f"({100 * cfg.failure_loss_fraction:.0f}% of {job_gpu_hours:,.4g} GPU-h).")
    elif basis == "slowdown":
        line = (f"{checks}; the slowest member is {100 * slowdown:.1f}% behind its peers, which would cost a "
                f"{cfg.job_hours:g} h job about {_fmt(averted, averted_cost, cfg)}.")
    else:
        line = f"{checks}; nothing they caught would have cost a {cfg.job_hours:g} h job: ready to train."
    return CostBenefit(gpus=gpus, check_duration_s=round(duration, 3), duration_source=source,
                       check_gpu_hours=round(check_gpu_hours, 6), check_cost=check_cost,
                       job_hours=cfg.job_hours, job_gpu_hours=round(job_gpu_hours, 4), basis=basis,
                       gating_findings=len(caught), failure_loss_fraction=cfg.failure_loss_fraction,
                       slowdown_fraction=round(slowdown, 4), averted_gpu_hours=round(averted, 4),
                       averted_cost=averted_cost, benefit_cost_ratio=ratio,
                       gpu_hour_price=cfg.gpu_hour_price, currency=cfg.currency, line=line)


def advise(report: ClusterReport, config: ReportConfig | None = None,
           scores: HealthScores | None = None) -> Assessment:
    """What scoring and advice conclude about ``report`` (typed or its dict), as a value (the
    report is not changed): health scores (``scores``, else the report's own, else computed),
    recommendations by urgency, cost-benefit and the health assessment (:mod:`.assessment`)."""
    from .assessment import assess

    cfg = config or ReportConfig()
    typed = report
    scores = scores or typed.cluster_summary.health_scores or compute_scores(typed, cfg)
    recs = recommendations_by_urgency(typed, scores)
    return Assessment(scores, recs, cost_benefit(typed, scores, cfg), assess(typed, scores, recs, cfg))


def add_advice(report: dict[str, Any], config: ReportConfig | None = None) -> dict[str, Any]:
    """Put :func:`advise`'s blocks into ``cluster_summary`` of a report dict; returns it. Kept
    for callers that hold the dict (``docs/reports.md``); a run advises the typed report by value.

    Uses ``cluster_summary.health_scores`` when present (call :func:`.scores.add_scores`
    first to score with a pair matrix), otherwise scores the report itself.
    """
    summary = report.setdefault("cluster_summary", {})
    advice = advise(ClusterReport.from_dict(report), config)
    summary["recommendations_by_urgency"] = {urgency: [e.to_dict() for e in entries] for urgency, entries
                                             in (advice.recommendations_by_urgency or {}).items()}
    summary["cost_benefit"] = advice.cost_benefit.to_dict() if advice.cost_benefit is not None else None
    summary["assessment"] = advice.assessment.to_dict() if advice.assessment is not None else None
    return report
