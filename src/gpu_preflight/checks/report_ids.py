"""Ids a report carries that no ``@check`` produces: history, localisation and run bookkeeping.

They are findings all the same: the report groups and scores them, ``checks list`` lists
them and ``checks explain`` explains them, so each is declared here with the same metadata
a check gives its decorator. (Ids of evidence verdicts are declared beside their judges.)
"""

from __future__ import annotations

from ..actions import Action
from ..config.localize import LocalizeSettings
from ..ids import (
    CLUSTER_NODE_REPORT_ID,
    HISTORY_REGRESSION_ID,
    HISTORY_REPEAT_OFFENDER_ID,
    LOCALIZE_SUSPECT_ID,
    RUN_COVERAGE_ID,
    WORKLOADS_ID,
)
from ..registry import declare

__all__ = ["CLUSTER_NODE_REPORT", "HISTORY_REGRESSION", "HISTORY_REPEAT_OFFENDER", "LOCALIZE_SUSPECT",
           "RUN_COVERAGE", "WORKLOADS"]

HISTORY_REGRESSION = declare(
    HISTORY_REGRESSION_ID, "No regression against the run history",
    """A measurement fell against this cluster's own recent runs (``gpu-preflight history``).

    WARN when a pair's or collective's bandwidth fell by more than
    ``history.bandwidth_regression_fraction``, or a GPU's GEMM TFLOP/s by more than
    ``history.tflops_regression_fraction``, against the median of the last
    ``history.baseline_runs`` runs (at least ``history.baseline_min_samples`` samples).
    SKIP without a baseline, on a CPU-only run or when nothing comparable was measured.""",
    group=(), component="performance_consistency",
    settings=("history.bandwidth_regression_fraction", "history.tflops_regression_fraction",
              "history.baseline_runs", "history.baseline_min_samples"))
HISTORY_REPEAT_OFFENDER = declare(
    HISTORY_REPEAT_OFFENDER_ID, "No GPU with a failure record",
    """A GPU (by serial) failed again: the history holds earlier failures of the same GPU.

    WARN for a GPU whose findings of ``history.repeat_offender_checks`` had a status in
    ``history.repeat_offender_statuses`` in earlier runs within
    ``history.repeat_offender_window_days``: a part to replace rather than reset again.""",
    group=(), component="hardware_health",
    settings=("history.repeat_offender_checks", "history.repeat_offender_statuses",
              "history.repeat_offender_window_days"))
LOCALIZE_SUSPECT = declare(
    LOCALIZE_SUSPECT_ID, "No node or link singled out as slow",
    """The localisation rounds (``gpu-preflight localize`` or ``run --localize``) named a slow
    or failing node, GPU or link by testing subsets of the cluster against each other.

    WARN/FAIL per suspect with the rounds that convicted it; PASS when the rounds found none.""",
    group=(), component="network_infrastructure", core=True,
    settings=tuple(f"localize.{name}" for name in LocalizeSettings.__struct_fields__),  # every rule of the rounds
    actions={**dict.fromkeys(("dead", "timeout", "failed", "wrong", "slow", "below_floor", "latency", "flaky",
                              "local", "unresolved"), Action.ISOLATE_NODE),
             **dict.fromkeys(("link_slow", "group_slow"), Action.MONITOR)})
"""The rounds exclude a convicted node (and, to be safe, one they could not clear: ``unresolved``):
it stays out until repaired, so the scheduler hook isolates it. A slow link or group is the path
between nodes, which no one node's isolation repairs: watch it (the same ``monitor`` the fabric
pair checks name for a pair neither node can be blamed for). ``undecided`` excludes nothing and
names no action."""
RUN_COVERAGE = declare(
    RUN_COVERAGE_ID, "Something was judged",
    """The run judged at least one thing: ERROR when every check was skipped or none ran, so a
    report that measured nothing can never read as a pass.""",
    group=(), component="service_reliability")
CLUSTER_NODE_REPORT = declare(
    CLUSTER_NODE_REPORT_ID, "Node report received",
    """Every node of a distributed run sent its node report to rank 0: ERROR for a node whose
    report is missing (its local rank 0 died, hung or could not be reached); that node was not
    checked.""",
    group=(), component="service_reliability")
WORKLOADS = declare(
    WORKLOADS_ID, "Distributed workloads",
    """Whether the torch workloads (GEMM, memory, collectives, training) ran: SKIP with the reason
    when a run could not start them (no torch, a node-only run asked for them).""",
    group=(), component="service_reliability")
