"""Settings of the report's assessment: health-score points and bands, and the cost-benefit line.

One section, ``[report]``. The score points are data, like every threshold, so a site that
weighs warnings differently can say so and the report states the numbers it used. The
price of a GPU-hour has no default: a guessed price would print a confident dollar figure
that is wrong for most sites, so until it is set the cost-benefit line counts GPU-hours.
"""

from __future__ import annotations

import msgspec

from .fields import setting

__all__ = ["COMPONENTS", "ReportConfig", "report_config"]

COMPONENTS = ("network_infrastructure", "hardware_health", "resource_management", "software_stack",
              "service_reliability", "performance_consistency")


class ReportConfig(msgspec.Struct):
    """How the report scores health (0-100 per component) and prices what the checks caught."""

    fail_points: float = setting(60.0, "Points a component loses for a FAIL finding (one FAIL makes it CRITICAL).",
                                 "points", min=0, max=100)
    error_points: float = setting(30.0, "Points a component loses for an ERROR finding (could not measure).",
                                  "points", min=0, max=100)
    warn_points: float = setting(10.0, "Points a component loses for a WARN finding.", "points", min=0, max=100)
    repeat_fraction: float = setting(
        0.25, "Each further finding with the same check, code and status costs this share of the first "
              "(eight GPUs with one cause are one problem, not eight).", "ratio", min=0, max=1)
    repeat_max_multiple: float = setting(
        2.0, "A group of findings with the same check, code and status costs at most this many times the first.",
        "ratio", min=1, max=100)
    consistency_ok: float = setting(
        0.02, "Dispersion (max of CV and straggler gap) up to this costs the performance score nothing.", "ratio",
        min=0, max=1)
    consistency_bad: float = setting(
        0.25, "Dispersion at or above this costs a measurement family its full consistency_max_points.", "ratio",
        min=0, max=1)
    consistency_max_points: float = setting(
        40.0, "Points one measurement family (GEMM, node fabric bandwidth, node links) can take at most.",
        "points", min=0, max=100)
    band_excellent: float = setting(90.0, "Scores at or above this are EXCELLENT.", "points", min=0, max=100)
    band_good: float = setting(75.0, "Scores at or above this (below EXCELLENT) are GOOD.", "points", min=0, max=100)
    band_moderate: float = setting(50.0, "Scores at or above this (below GOOD) are MODERATE; lower is CRITICAL.",
                                   "points", min=0, max=100)
    gating_overall_cap: float = setting(
        74.0, "Overall score ceiling when the run's verdict gates (FAIL/ERROR): never better than MODERATE.",
        "points", min=0, max=100)
    weights: dict[str, float] = setting(
        {}, "Weight of each component in the overall score (network_infrastructure, hardware_health, "
            "resource_management, software_stack, service_reliability, performance_consistency); unset "
            "components weigh 1.",
            min=0, max=1000)
    gpu_hour_price: float | None = setting(
        None, "Price of one GPU-hour; unset: the cost-benefit line counts GPU-hours, not money.", "currency/GPU-h",
        min=0, max=10**6)
    currency: str = setting("USD", "Currency of gpu_hour_price, as shown in reports.")
    job_hours: float = setting(24.0, "Length of the training job the cost-benefit line prices failures for.", "h",
        above=0, max=87_600)
    failure_loss_fraction: float = setting(
        0.5, "Share of a job's GPU-hours lost when a caught failure would have struck (on average halfway).",
        "ratio", min=0, max=1)
    detail_max_nodes: int = setting(
        32, "Largest cluster whose report lists every finding. Above it, nodes list only WARN/ERROR/FAIL "
            "findings (PASS and SKIP stay in each node's own report and are counted per check; each cause of a "
            "SKIP is listed once with its node count) and each cluster check's passes become one finding with "
            "the per-subject values: a 10,000-node report stays readable and fits rank 0's memory.",
        "nodes", min=0, max=10**7)
    trend_runs: int = setting(
        5, "A component's trend compares its score with the median of its scores in this many earlier runs of the "
           "same cluster (from the history database).", "runs", min=1, max=1000)
    trend_points: float = setting(
        5.0, "A component whose score moved less than this from that median is STABLE; more up is IMPROVING, "
             "more down DEGRADING.", "points", min=0, max=100)
    target_score: float = setting(
        90.0, "Score every component (and the overall score) should reach within target_days; a component already "
              "above it keeps its score as its target.", "points", min=0, max=100)
    target_days: int = setting(30, "The horizon of the target scores.", "days", min=1, max=3650)
    assessment_interval_days: float = setting(
        7.0, "Days between full assessments (gpu-preflight run --full on every node); the report's next-assessment "
             "date is the run's timestamp plus this.", "days", above=0, max=3650)
    reassess_after_fixes_days: float = setting(
        2.0, "When production readiness is NEEDS FIXES, the next assessment is due this many days after the run "
             "(after the immediate fixes), instead of assessment_interval_days.", "days", above=0, max=3650)


def report_config(config: object) -> ReportConfig:
    """The ``report`` section of a resolved config, or the defaults where none is registered."""
    section = getattr(config, "report", None)
    return section if isinstance(section, ReportConfig) else ReportConfig()
