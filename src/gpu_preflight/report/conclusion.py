"""The health assessment's judgements: network strengths and concerns, the health-trend
analysis, the error classification, the optimization readiness and the conclusion.

Each is read off what the scores, the assessment (:mod:`.assessment`) and the findings
already say — the same numbers the rest of the report shows, put the way the user's
health-assessment report (spec 002) puts them. A strength needs evidence (a component
rated GOOD or better that was measured, a check whose findings all passed); what was not
measured is a concern that says so, never a strength.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..config.report_schema import ReportConfig
from ..findings.canonical import Verdict
from ..findings.model import ClusterReport, HealthAssessment, HealthScores
from ..model import Status
from .assessment import CAVEATS, DEGRADING, IMPROVING, NEEDS_FIXES, READY, component_order
from .scores import component_of

__all__ = ["conclusion", "error_classes", "network_review", "optimization", "trend_analysis"]

NETWORK = "network_infrastructure"
GOOD_BANDS = ("EXCELLENT", "GOOD")
SEVERITY = {"HIGH": "HIGH", "MEDIUM": "MEDIUM"}
ERROR_STATUS = {Status.FAIL.value: "REQUIRES ATTENTION", Status.ERROR.value: "REQUIRES INVESTIGATION",
                Status.WARN.value: "MONITORING NEEDED"}
MAX_ITEMS = 8


def _who(subjects: Sequence[str], count: int, shown: int = 4) -> str:
    more = max(count, len(subjects)) - min(len(subjects), shown)
    return ", ".join(subjects[:shown]) + (f" and {more} more" if more > 0 else "")


def network_review(report: ClusterReport, scores: HealthScores) -> dict[str, list[str]]:
    """Strengths: network checks whose every judged finding passed, node-pair speeds that agree.
    Concerns: network checks that warned, failed or could not measure, checks that only skipped,
    a spread of node-pair speeds that cost points, and an untested network (its reason)."""
    typed = report
    by_check: dict[str, dict[str, Any]] = {}
    for f in typed.findings:
        if component_of(f.check_id) != NETWORK:
            continue
        entry = by_check.setdefault(f.check_id, {"counts": {}, "first": {}, "subjects": {}})
        status = f.status.value
        entry["counts"][status] = entry["counts"].get(status, 0) + 1
        entry["first"].setdefault(status, f.summary)
        entry["subjects"].setdefault(status, []).append(str(f.subject))
    for check_id, unlisted in (typed.cluster_summary.unlisted or {}).items():
        if component_of(check_id) == NETWORK:
            entry = by_check.setdefault(check_id, {"counts": {}, "first": {}, "subjects": {}})
            for status, n in unlisted.items():
                entry["counts"][status] = entry["counts"].get(status, 0) + int(n)
    strengths, concerns = [], []
    for check_id, entry in sorted(by_check.items()):
        counts = entry["counts"]
        problems = [s for s in (Status.FAIL.value, Status.ERROR.value, Status.WARN.value) if counts.get(s)]
        for status in problems:
            concerns.append(f"{check_id}: {counts[status]} {status} — {entry['first'][status]} "
                            f"({_who(entry['subjects'].get(status, []), counts[status])})")
        if not problems and counts.get(Status.PASS.value):
            first = entry["first"].get(Status.PASS.value)
            strengths.append(f"{check_id}: all {counts[Status.PASS.value]} passed" + (f" ({first})" if first else ""))
        elif not problems and not counts.get(Status.PASS.value) and counts.get(Status.SKIP.value):
            first = entry["first"].get(Status.SKIP.value)
            concerns.append(f"{check_id}: not checked" + (f" ({first})" if first else ""))
    comp = scores.components.get(NETWORK)
    if comp is not None and not comp.tested and comp.reason:
        concerns.append(f"Network infrastructure {comp.reason}")
    for m in scores.measurements:
        if m.family != "node_links":
            continue
        spread = f"{m.series}: {m.n} pairs, dispersion {100 * float(m.dispersion):.1f}%"
        if m.points > 0:
            concerns.append(f"{spread} (slowest {m.slowest})")
        else:
            strengths.append(f"{spread}: the pairs agree")
    return {"strengths": strengths, "concerns": concerns}


def trend_analysis(scores: HealthScores, assessment: HealthAssessment) -> dict[str, str]:
    """Strengths, concerns, potential and priority in one line each (the seed's health trend)."""
    comps = scores.components
    trends = assessment.trends
    good, weak, untested, rising, falling = [], [], [], [], []
    for name in component_order(comps):
        c = comps[name]
        label = f"{c.title} ({c.score:.0f})" if c.score is not None else c.title
        trend = trends.get(name)
        if c.tested and c.rating in GOOD_BANDS:
            good.append(label)
        elif c.score is None or not c.tested:
            untested.append(f"{c.title} ({c.reason or 'not tested'})")
        if c.score is not None and c.rating not in GOOD_BANDS:
            weak.append(f"{label} {c.rating}")
        if trend is not None and trend.trend == IMPROVING:
            rising.append(f"{c.title} {trend.change:+g}")
        elif trend is not None and trend.trend == DEGRADING:
            falling.append(f"{c.title} {trend.change:+g}")
    strengths = ", ".join(good) or "none: no measured component is rated GOOD or better"
    if rising:
        strengths += f"; improving: {', '.join(rising)}"
    concern_parts = list(weak)
    if falling:
        concern_parts.append(f"degrading: {', '.join(falling)}")
    if untested:
        concern_parts.append(f"not measured: {'; '.join(untested)}")
    targets = assessment.targets
    overall = targets.overall
    if overall.target is None:
        potential = "not known: no component was scored"
    elif not overall.change:
        potential = f"at the target already ({overall.score:.0f}/100); keep it there"
    else:
        by = [b for row in targets.components if row.target is not None for b in row.by]
        potential = (f"{overall.score:.0f} → {overall.target:.0f}/100 ({overall.change:+g}) within "
                     f"{targets.days} days" + (f" by fixing {', '.join(list(dict.fromkeys(by))[:4])}"
                                               if by else ""))
    found = assessment.issues
    if found:
        first = found[0]
        priority = (f"{first.priority}: {first.check_id or first.component} on "
                    f"{_who(first.subjects, first.count)}: {first.recommendation or first.summary}")
    else:
        priority = "nothing to fix: keep the monitoring schedule"
    return {"strengths": strengths, "concerns": "; ".join(concern_parts) or "none", "potential": potential,
            "priority": priority}


def error_classes(assessment: HealthAssessment, scores: HealthScores) -> dict[str, Any]:
    """The issues as an error classification: one row per cause (check and code) with how often it
    was found (frequency) and its severity (HIGH: it gates the run; MEDIUM: a warning), the
    components with no error, and the high-risk items (the HIGH ones, with impact and mitigation)."""
    rows: dict[tuple[Any, Any], dict[str, Any]] = {}
    for i in assessment.issues:
        key = (i.check_id or i.component, i.code)
        row = rows.get(key)
        if row is None:
            rows[key] = {"type": f"{key[0]} ({key[1]})" if key[1] else str(key[0]), "component": i.title,
                         "frequency": int(i.count or 0), "severity": SEVERITY.get(i.priority, i.priority),
                         "status": ERROR_STATUS.get(i.status, i.status), "impact": i.impact}
        else:
            row["frequency"] += int(i.count or 0)
    ordered = sorted(rows.values(), key=lambda r: (r["severity"] != "HIGH", -r["frequency"], r["type"]))
    hit = {r["component"] for r in ordered}
    comps = scores.components
    clean = [comps[c].title for c in component_order(comps) if comps[c].tested and comps[c].title not in hit]
    high = [{"title": f"{i.check_id or i.component}: {i.summary}", "impact": f"{i.title}: {i.impact}",
             "mitigation": i.recommendation or "investigate", "subjects": _who(i.subjects, i.count)}
            for i in assessment.issues if i.priority == "HIGH"]
    return {"rows": ordered, "clean": clean, "high_risk": high[:MAX_ITEMS],
            "more_high_risk": max(len(high) - MAX_ITEMS, 0)}


def optimization(scores: HealthScores, cfg: ReportConfig) -> dict[str, str]:
    """How much a job stands to gain by evening out its slowest members: from the performance
    consistency score and the worst counted straggler gap (a synchronous step runs at the slowest
    member's pace). NOT MEASURED where nothing was compared, with the score's reason."""
    perf = scores.consistency
    if perf is None or perf.score is None:
        return {"status": "NOT MEASURED",
                "reason": (perf.reason if perf else None) or "performance consistency was not measured"}
    score = perf.score
    counted = [m for m in perf.measurements or [] if m.counted]
    worst = max(counted, key=lambda m: float(m.straggler_gap), default=None)
    losing = [d for d in perf.deductions if d.points > 0]
    if not losing:
        spread = f"the largest spread is {100 * float(worst.dispersion):.1f}% ({worst.series})" if worst else \
            "no regression against earlier runs"
        return {"status": "TUNED", "reason": f"{spread}: nothing to gain from evening out members"}
    status = "HIGH POTENTIAL" if float(score) < cfg.band_good else "SOME POTENTIAL"
    if worst is not None and worst.straggler_gap > 0:
        reason = (f"the slowest member ({worst.slowest}) is {100 * float(worst.straggler_gap):.1f}% behind "
                  f"its peers in {worst.series}: evening it out gains up to that much per synchronous step")
    else:
        first = losing[0]
        reason = f"{first.cause}: {first.summary or 'lost points'}"
    return {"status": status, "reason": f"performance consistency {float(score):.0f}/100; {reason}"}


def conclusion(scores: HealthScores, assessment: HealthAssessment, optimize: Mapping[str, str],
               verdict: Verdict) -> dict[str, Any]:
    """Current status, strengths, critical issues, the three readiness lines and the decision."""
    comps = scores.components
    score = scores.overall.score
    status = f"{scores.overall.rating or 'NOT TESTED'} HEALTH" + (f" ({score:.0f}/100)" if score is not None else "")
    strengths, critical = [], []
    for name in component_order(comps):
        c = comps[name]
        if c.score is None:
            continue
        line = f"{c.title} ({c.score:.0f}/100, {c.rating})"
        if c.tested and c.rating in GOOD_BANDS:
            strengths.append(line)
        elif c.rating not in GOOD_BANDS:
            critical.append(line)
    for i in assessment.issues:
        if i.priority == "HIGH":
            critical.append(f"{i.check_id or i.component}: {i.summary} ({_who(i.subjects, i.count)})")
    ready = assessment.readiness
    lines = [{"level": "Development/testing", "status": ready.development.status},
             {"level": "Production", "status": ready.production.status},
             {"level": "Optimization", "status": optimize["status"]}]
    production = ready.production.status
    if production == NEEDS_FIXES:
        checks = list(dict.fromkeys(str(i.check_id or i.component) for i in assessment.issues if i.priority == "HIGH"))
        decision = f"Not ready: fix {', '.join(checks[:4]) or 'the immediate issues'} before the next job"
    elif production == CAVEATS:
        decision = f"Ready with caveats: {(ready.production.reasons or ['see the readiness assessment'])[0]}"
    elif production == READY:
        decision = "Ready for distributed training"
    else:
        decision = production
    return {"status": status, "strengths": strengths or ["none measured to a GOOD rating"],
            "critical": critical[:MAX_ITEMS] or ["none"], "readiness": lines,
            "decision": f"{decision} ({verdict.line})"}
