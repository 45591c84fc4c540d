"""Health scores, 0-100 per component and overall, with what lowered each one.

A score is only as useful as its explanation, so every point taken is listed with the
findings (check, code, subjects) or the measurement that took it. The formula
(``docs/reports.md``):

- Every component is scored from findings. Each check id maps to one component
  (:data:`COMPONENT_RULES`, first match wins). A component starts at 100 and loses
  ``fail_points``/``error_points``/``warn_points`` per group of findings sharing check,
  code and status; each further finding of a group adds ``repeat_fraction`` of the first,
  up to ``repeat_max_multiple`` times it (eight GPUs throttled by one cause are one
  problem, not eight). A component with nothing but SKIPs is not tested: ``score: null``.
- Performance consistency also loses points for spread in measurements (its own findings
  are history regressions: consistency over time): GEMM TFLOP/s across GPUs (per
  precision), node-local bus bandwidth across nodes (per collective) and node-to-node
  exchange speed across pairs. Each family's dispersion is ``max(CV, 1 - min/median)`` —
  the coefficient of variation, or the straggler gap when one slow member hides in a large
  population (a synchronous job runs at its slowest rank) — and costs
  ``consistency_max_points × (d - ok) / (bad - ok)``, clamped to [0, max].
- Overall is the weighted mean of the tested components; when the run's verdict gates
  (FAIL/ERROR) it is capped at ``gating_overall_cap`` (never better than MODERATE).
- Bands: EXCELLENT ≥ 90, GOOD ≥ 75, MODERATE ≥ 50, else CRITICAL (configurable).
- Praise needs evidence. Hardware health and network infrastructure are *core* components
  (:data:`CORE`): they count as tested only when their core was measured — at least one GPU
  read (or a run that deliberately expected no GPUs), a link between two nodes. Two local
  processes talking say nothing about the network; host checks say nothing about the GPUs.
  A core component that was not measured keeps the points its findings took (bad news is
  real) but is rated ``INCOMPLETE`` instead of EXCELLENT or GOOD, and so is the overall
  rating while any core component is unmeasured; ``overall.incomplete`` says what is missing.
"""

from __future__ import annotations

import functools
import math
import operator
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..config.report_schema import COMPONENTS, ReportConfig
from ..findings.model import (
    ClusterReport,
    ComponentScore,
    Connectivity,
    HealthScores,
    MissingCore,
    Number,
    OverallScore,
    ReportFinding,
    ScoreCap,
    ScoreDeduction,
    ScoreMeasurement,
    ScoreSettings,
)
from ..ids import INVENTORY_COUNT_ID
from ..model import Status, gating_statuses, id_matches
from ..registry import blocking_codes, component_rules, core_table, cover
from .connectivity import connectivity
from .measurements import gemm_by_gpu, node_peak_busbw, num

__all__ = ["BLOCKING", "COMPONENT_RULES", "CORE", "INCOMPLETE", "TITLES", "add_scores", "component_of",
           "compute_scores", "dispersion", "rating"]

TITLES = {"network_infrastructure": "Network infrastructure", "hardware_health": "Hardware health",
          "resource_management": "Resource management", "software_stack": "Software stack",
          "service_reliability": "Service reliability",
          "performance_consistency": "Performance consistency"}

# (check id, component), then ("*", service reliability): derived from what each check and
# declared id says (``@check(component=...)``). An id nobody declared counts as service
# reliability ("something stopped the run from being fully checked"); a test fails on it.
# Resource management: what a job needs left free on a node (GPU memory and GPUs no other
# process holds, host memory, CPUs, disk, /dev/shm, locked-memory and open-file limits).
COMPONENT_RULES: Sequence[tuple[str, str]] = component_rules()
MAX_SUBJECTS = 12
INCOMPLETE = "INCOMPLETE"

# Core components: the ids declared ``core=True`` for them, whose PASS/WARN/FAIL findings
# prove the component was measured, and what the report says is missing when none did. gpu.*
# checks other than the inventory only judge (rather than SKIP) when NVML described a GPU;
# nvidia_smi.*/dcgm.* judge GPUs from saved outputs. Node links, fi_pingpong pairs and
# localisation rounds are the only measurements that cross a node boundary (nccl.* also runs
# inside one node).
CORE: Mapping[str, tuple[tuple[str, ...], str]] = core_table({
    "hardware_health": "no GPU was read",
    "network_infrastructure": "no link between two nodes was measured",
})
_MEASURED = frozenset({Status.PASS.value, Status.WARN.value, Status.FAIL.value})
# (check id, code) pairs that block a GPU job whatever their status (``blocking_codes=``): a
# WARN because the run was not told to expect GPUs, but nothing later can make that node
# train. Advice files them as immediate, the assessment as NEEDS FIXES.
BLOCKING = blocking_codes()


@functools.cache
def component_of(check_id: str) -> str:
    """The component a check's findings count against."""
    for pattern, component in COMPONENT_RULES:
        if id_matches(check_id, pattern):
            if pattern == "*" and cover(check_id):  # an id of a scope not imported yet: import it, look again
                return component_of(check_id)
            return component
    return "service_reliability"


def rating(score: float | None, cfg: ReportConfig) -> str | None:
    """EXCELLENT / GOOD / MODERATE / CRITICAL for a score; ``None`` for an untested component."""
    if score is None:
        return None
    if score >= cfg.band_excellent:
        return "EXCELLENT"
    if score >= cfg.band_good:
        return "GOOD"
    if score >= cfg.band_moderate:
        return "MODERATE"
    return "CRITICAL"


def _capped(rating_: str | None, complete: bool) -> str | None:
    """A rating that only praises what was measured: EXCELLENT/GOOD become INCOMPLETE when not."""
    return INCOMPLETE if not complete and rating_ in ("EXCELLENT", "GOOD") else rating_


@functools.cache
def _proves_core(check_id: str, component: str) -> bool:
    return any(id_matches(check_id, p) for p in CORE[component][0])


def _core_measured(component: str, pairs: Iterable[tuple[str, str]], expects_no_gpus: bool) -> bool:
    """Whether a core component's own measurement is among the (check id, status) pairs."""
    if component == "hardware_health" and expects_no_gpus:
        return True
    return any(status in _MEASURED and _proves_core(check_id, component) for check_id, status in pairs)


def _expects_no_gpus(findings: Iterable[ReportFinding]) -> bool:
    """The run was told this is a CPU-only node (``--expect-gpus 0``) and found it so."""
    return any(f.check_id == INVENTORY_COUNT_ID and f.status is Status.PASS and f.expected == 0 for f in findings)


def _points(status: str, cfg: ReportConfig) -> float:
    return {Status.FAIL.value: cfg.fail_points, Status.ERROR.value: cfg.error_points,
            Status.WARN.value: cfg.warn_points}.get(status, 0.0)


def _finding_components(findings: Sequence[ReportFinding], cfg: ReportConfig,
                        unlisted: Mapping[str, Mapping[str, int]]) -> dict[str, ComponentScore]:
    counts: dict[str, dict[str, int]] = {c: dict.fromkeys((s.value for s in Status), 0) for c in COMPONENTS}
    for check_id, by in unlisted.items():  # passes and skips a large cluster's nodes kept to themselves
        for status, n in by.items():
            counts[component_of(check_id)][status] = counts[component_of(check_id)].get(status, 0) + int(n)
    groups: dict[str, dict[tuple[str, str, str], list[ReportFinding]]] = {c: defaultdict(list) for c in COMPONENTS}
    for f in findings:  # one pass: a 10,000-node report holds hundreds of thousands of findings
        component = component_of(f.check_id)
        status = f.status.value
        counts[component][status] = counts[component].get(status, 0) + 1
        if status in _DEDUCTING:
            groups[component][(f.check_id, f.code or "", status)].append(f)
    pairs = {(f.check_id, f.status.value) for f in findings}
    pairs |= {(check_id, status) for check_id, by in unlisted.items() for status, n in by.items() if n}
    no_gpus = _expects_no_gpus(findings)
    out = {}
    for component in COMPONENTS:
        deductions: list[ScoreDeduction] = []
        for (check_id, code, status), members in groups[component].items():
            base = _points(status, cfg)
            if not base:
                continue
            multiple = min(1 + cfg.repeat_fraction * (len(members) - 1), cfg.repeat_max_multiple)
            subjects = list(dict.fromkeys(str(f.subject) for f in members))
            deductions.append(ScoreDeduction(check_id=check_id, code=code, status=status, count=len(members),
                                             points=round(base * max(multiple, 1.0), 2),
                                             subjects=subjects[:MAX_SUBJECTS], summary=members[0].summary))
        deductions.sort(key=lambda d: (-d.points, d.check_id, d.code))
        found = counts[component]
        ran = any(n for status, n in found.items() if status != Status.SKIP.value)
        core = component not in CORE or _core_measured(component, pairs, no_gpus)
        tested = ran and core
        # An unmeasured core keeps the points its findings took (a WARN is real news) but no praise.
        scored = tested or (ran and bool(deductions))
        score = round(max(0.0, 100.0 - sum(d.points for d in deductions)), 1) if scored else None
        reason = None
        if not tested:
            reason = f"not tested: {CORE[component][1]}" if component in CORE and not core \
                else "not tested: no check of this component ran here"
        out[component] = ComponentScore(title=TITLES[component], score=score,
                                        rating=_capped(rating(score, cfg), tested), tested=tested, counts=found,
                                        deductions=deductions, reason=reason)
    return out


_DEDUCTING = frozenset({Status.FAIL.value, Status.ERROR.value, Status.WARN.value})


def dispersion(values: Iterable[float], ordered: list[float] | None = None) -> dict[str, float] | None:
    """Spread statistics of one series; ``None`` below two values.

    ``dispersion = max(cv, straggler_gap)``: for two values both are |a-b|/(a+b); for
    many, the straggler gap (1 - min/median) keeps one slow GPU among a thousand from
    vanishing in the CV. ``ordered``: the values already sorted, when the caller has them.
    """
    xs = ordered if ordered is not None else sorted(map(float, values))
    n = len(xs)
    if n < 2:
        return None
    lo, hi = xs[0], xs[-1]
    median = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    mean = math.fsum(xs) / n
    # Population standard deviation from fsum'd moments at C speed: statistics.pstdev is exact
    # but walks 80,000 values through fractions, a second per report at 10,000 nodes.
    variance = max(math.fsum(map(operator.mul, xs, xs)) / n - mean * mean, 0.0)
    cv = math.sqrt(variance) / mean if mean > 0 else 0.0
    gap = 1.0 - lo / median if median > 0 else 0.0
    return {"n": n, "mean": mean, "median": median, "min": lo, "max": hi, "cv": cv,
            "straggler_gap": max(gap, 0.0), "spread": (hi - lo) / hi if hi > 0 else 0.0,
            "dispersion": max(cv, gap, 0.0)}


def _series(report: ClusterReport, conn: Connectivity | None) -> list[tuple[str, str, dict[str, float]]]:
    """(family, series label, {subject: value}) for every measurement that has peers to compare."""
    out: list[tuple[str, str, dict[str, float]]] = []
    # CPU workers share cores: their spread says nothing about hardware, so GPUs only.
    out += [("gemm", f"{dtype} GEMM TFLOP/s across GPUs", vals) for dtype, vals in sorted(gemm_by_gpu(report).items())]
    out += [("node_fabric", f"{op} node-local bus bandwidth across nodes", vals)
            for op, vals in sorted(node_peak_busbw(report).items())]
    if conn:
        links = {f"{p['a']}<->{p['b']}": float(gbps) for p in conn.pairs if (gbps := num(p["gbps"])) is not None}
        out.append(("node_links", f"node-pair GB/s ({conn.source})", links))
    return out


def _consistency(report: ClusterReport, conn: Connectivity | None, cfg: ReportConfig,
                 from_findings: ComponentScore) -> ComponentScore:
    """Measurement families on top of the component's own findings (history regressions)."""
    measured: list[tuple[str, str, str, dict[str, float], float]] = []
    for family, label, values in _series(report, conn):
        stats = dispersion(values.values())
        if stats is None:
            continue
        span = max(cfg.consistency_bad - cfg.consistency_ok, 1e-9)
        share = min(max((stats["dispersion"] - cfg.consistency_ok) / span, 0.0), 1.0)
        low = min(values.values())  # C speed: a key function over 80,000 GPUs was a tenth of a second
        slowest = next(k for k, v in values.items() if v == low)
        measured.append((family, label, slowest, stats, round(cfg.consistency_max_points * share, 2)))
    worst: dict[str, int] = {}
    for i, (family, _, _, _, points) in enumerate(measured):  # precisions (or collectives) of one family
        if family not in worst or points > measured[worst[family]][4]:  # measure the same GPUs: count the worst
            worst[family] = i
    counted = set(worst.values())
    measurements = [ScoreMeasurement(family=family, series=label, slowest=slowest,
                                     **{k: round(v, 4) for k, v in stats.items()},  # type: ignore[arg-type]
                                     points=points, counted=i in counted)
                    for i, (family, label, slowest, stats, points) in enumerate(measured)]
    tested = bool(measurements) or from_findings.tested
    deductions = [*from_findings.deductions, *(
        ScoreDeduction(family=m.family, series=m.series, points=m.points, slowest=m.slowest, dispersion=m.dispersion)
        for m in (measurements[i] for i in worst.values()) if m.points > 0)]
    score = round(max(0.0, 100.0 - sum(d.points for d in deductions)), 1) if tested else None
    return ComponentScore(
        title=TITLES["performance_consistency"], score=score, rating=rating(score, cfg), tested=tested,
        counts=from_findings.counts, deductions=sorted(deductions, key=lambda d: -d.points),
        measurements=measurements,
        reason=None if tested else "not measured: needs GEMM on two or more GPUs, node-local collectives on two or "
                                   "more nodes, or node-to-node exchanges")


def compute_scores(report: ClusterReport, config: ReportConfig | None = None,
                   matrix: Iterable[Mapping[str, Any]] | None = None) -> HealthScores:
    """The ``health_scores`` block for a report (pure: changes nothing)."""
    cfg = config or ReportConfig()
    findings = report.findings
    components = _finding_components(findings, cfg, report.cluster_summary.unlisted or {})
    conn = connectivity(report, matrix)
    components["performance_consistency"] = _consistency(report, conn, cfg, components["performance_consistency"])
    weights: dict[str, Number] = {c: float(cfg.weights.get(c, 1.0)) for c in COMPONENTS}
    tested = {c: v.score for c, v in components.items() if v.score is not None and weights[c] > 0}
    incomplete = [MissingCore(component=c, title=TITLES[c], missing=CORE[c][1])
                  for c in CORE if not components[c].tested]
    overall: float | None = None
    cap = None
    if tested:
        overall = sum(weights[c] * s for c, s in tested.items()) / sum(weights[c] for c in tested)
        gating = {s.value for s in gating_statuses(report.run.fail_on)} & {f.status.value for f in findings}
        if gating and overall > cfg.gating_overall_cap:
            cap = ScoreCap(at=cfg.gating_overall_cap, mean=round(overall, 1),
                           why=f"the run has {'/'.join(sorted(gating))} findings: not fit for training whatever "
                               "the mean")
            overall = cfg.gating_overall_cap
        overall = round(overall, 1)
    return HealthScores(
        overall=OverallScore(score=overall, rating=_capped(rating(overall, cfg), not incomplete), cap=cap,
                             components_counted=sorted(tested, key=COMPONENTS.index), incomplete=incomplete),
        components=components,
        connectivity=conn,
        settings=ScoreSettings(fail_points=cfg.fail_points, error_points=cfg.error_points,
                               warn_points=cfg.warn_points, repeat_fraction=cfg.repeat_fraction,
                               repeat_max_multiple=cfg.repeat_max_multiple, consistency_ok=cfg.consistency_ok,
                               consistency_bad=cfg.consistency_bad, consistency_max_points=cfg.consistency_max_points,
                               bands={"EXCELLENT": cfg.band_excellent, "GOOD": cfg.band_good,
                                      "MODERATE": cfg.band_moderate}, weights=weights),
        formula="docs/reports.md#health-scores",
    )


def add_scores(report: dict[str, Any], config: ReportConfig | None = None,
               matrix: Iterable[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Put :func:`compute_scores` under ``cluster_summary.health_scores`` of a report dict;
    returns it. Kept for callers that hold the dict (``docs/reports.md``); the run's own
    pipeline scores the typed report by value (``report.with_assessment(advise(...))``)."""
    report.setdefault("cluster_summary", {})["health_scores"] = compute_scores(ClusterReport.from_dict(report), config,
                                                                                      matrix).to_dict()
    return report
