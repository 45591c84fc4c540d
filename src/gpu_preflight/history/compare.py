"""Judge a run against the history: regressions and repeat-offender GPUs.

- ``history.regression``: a GPU's GEMM throughput, or a node's or the cluster's bus or
  memory bandwidth, fell more than ``history.tflops_regression_fraction`` /
  ``history.bandwidth_regression_fraction`` below its baseline. Two baselines are asked:
  the entity's own (the same GPU by UUID/serial, the same node, the same cluster) and
  the GPU model's (every GPU or node of that model in the history). The first catches a
  GPU that got slower; the second one that was always slow. A baseline is the median of
  the last ``history.baseline_runs`` earlier runs, so one noisy run moves it little.
  Numbers of CPU workers (no GPU) are filed for trends but never judged: they share cores
  with everything else on the host, as ``compute.gemm`` already recognises.
- ``history.repeat_offender``: a GPU in this run failed a GPU check in an earlier run —
  matched by UUID or serial, so a GPU that was pulled and moved to another host is still
  recognised. Faults that travel with a GPU are the ones worth an RMA instead of another
  reseat.

Both are WARN: the run's own checks already FAIL what is broken now; history says what
got worse and what has a record.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..config.history import history_config
from ..ids import HISTORY_REGRESSION_ID, HISTORY_REPEAT_OFFENDER_ID
from ..model import Finding, Status
from .extract import Measurement, RunRecord, extract, metric_kind
from .store import Baseline, HistoryStore
from .when import TimestampError, checked

if TYPE_CHECKING:
    from ..findings.model import ClusterReport

__all__ = ["history_findings", "judge_run"]

_LABELS = {"gemm": "GEMM", "memory": "memory", "busbw": "bus bandwidth"}


def history_findings(report: ClusterReport, store: HistoryStore, config: object,
                     cluster: str = "default", *, now: datetime | None = None) -> list[Finding]:
    """Findings (``history.regression``, ``history.repeat_offender``) for a report against the store.

    Only runs filed before this one count: judging a report that is already in the
    history compares it with what came before it, not with itself or later runs.
    ``now``: this machine's clock unless given (a test's fixed clock).
    """
    return list(judge_run(extract(report), store, config, cluster, now=now))


def judge_run(run: RunRecord, store: HistoryStore, config: object, cluster: str, *,
              now: datetime | None = None) -> Iterator[Finding]:
    cfg = history_config(config)
    before = store.run_id(run.key)
    yield from _regressions(run, store, cfg, cluster, before)
    yield from _repeat_offenders(run, store, cfg, before, _window_end(run, now or datetime.now(UTC)))


def _own(m: Measurement, cluster: str) -> dict[str, str | None]:
    """How the entity a measurement belongs to is found again in earlier runs."""
    if m.node is None:
        return {"cluster": cluster, "node": None}
    if m.slot is None:
        return {"cluster": cluster, "node": m.node, "slot": None}
    if m.uuid:
        return {"uuid": m.uuid}
    if m.serial:
        return {"serial": m.serial}
    return {"cluster": cluster, "node": m.node, "slot": m.slot}


def _peers(m: Measurement) -> dict[str, str | None] | None:
    """The GPU model's baseline: GPU-wide numbers of that model, or node-wide numbers of nodes of that model."""
    if m.node is None or not m.model:
        return None
    return {"model": m.model} if m.slot is not None else {"model": m.model, "slot": None}


def _describe(m: Measurement) -> str:
    family, _, rest = m.metric.partition(".")
    if family == "gemm":
        return f"{rest} GEMM"
    if family == "memory":
        return f"{rest.replace('_', ' ')} memory bandwidth"
    scope_op, _, ranks = rest.partition("@")
    scope, _, op = scope_op.partition(".")
    return f"{op} bus bandwidth ({scope.replace('_', '-')}, {ranks} ranks)"


def _regressions(run: RunRecord, store: HistoryStore, cfg: Any, cluster: str,
                 before: int | None) -> Iterator[Finding]:
    judged = flagged = cpu = 0
    cache: dict[tuple[str, tuple[tuple[str, str | None], ...]], Baseline | None] = {}

    def baseline(metric: str, where: dict[str, str | None]) -> Baseline | None:
        key = (metric, tuple(sorted(where.items())))  # the model's baseline is the same for all its GPUs
        if key not in cache:
            cache[key] = store.baseline(metric, runs=cfg.baseline_runs, before=before, **where)
        return cache[key]

    for m in run.measurements:
        kind = metric_kind(m.metric)
        if kind is None:
            continue
        if m.model is None:  # CPU workers share cores: their numbers are trends, not verdicts
            cpu += 1
            continue
        fraction = cfg.tflops_regression_fraction if kind == "tflops" else cfg.bandwidth_regression_fraction
        found: dict[str, Baseline] = {}
        for name, where in (("own", _own(m, cluster)), ("model", _peers(m))):
            if where is None:
                continue
            base = baseline(m.metric, where)
            if base is not None and base.samples >= cfg.baseline_min_samples and base.median > 0:
                found[name] = base
        if not found:
            continue
        judged += 1
        below = {name: b for name, b in found.items() if m.value < b.median * (1 - fraction)}
        if not below:
            continue
        flagged += 1
        worst = min(below.values(), key=lambda b: m.value / b.median)
        parts = []
        for name, b in below.items():
            whose = "its own" if name == "own" else f"the {m.model}"
            parts.append(f"{100 * (1 - m.value / b.median):.1f}% below {whose} baseline {b.median:.4g} "
                         f"(median of {b.samples})")
        yield Finding(
            HISTORY_REGRESSION_ID, Status.WARN, m.subject, f"{kind}_regression",
            f"{_describe(m)} {m.value:.4g} {m.unit}: {'; '.join(parts)}",
            observed=round(m.value, 4), expected=f">= {worst.median * (1 - fraction):.4g}", unit=m.unit,
            recommendation=_advice(m),
            details={"metric": m.metric, "fraction": fraction,
                     "baselines": {n: {"median": b.median, "samples": b.samples} for n, b in found.items()},
                     "uuid": m.uuid, "serial": m.serial})
    if flagged:
        return
    if judged:
        yield Finding(HISTORY_REGRESSION_ID, Status.PASS, "cluster", "ok",
                      f"{judged} measurement(s) within {cfg.tflops_regression_fraction:.0%} (GEMM) / "
                      f"{cfg.bandwidth_regression_fraction:.0%} (bandwidth) of their baselines", observed=judged)
    elif not any(metric_kind(m.metric) for m in run.measurements):
        yield Finding(HISTORY_REGRESSION_ID, Status.SKIP, "cluster", "not_measured",
                      "no GEMM or bandwidth measured in this run (node checks only): nothing to compare")
    elif cpu and not any(m.model for m in run.measurements if metric_kind(m.metric)):
        yield Finding(HISTORY_REGRESSION_ID, Status.SKIP, "cluster", "cpu_only",
                      f"no GPU measured: {cpu} CPU-worker number(s) filed for trends, not judged")
    else:
        yield Finding(HISTORY_REGRESSION_ID, Status.SKIP, "cluster", "no_baseline",
                      "no baseline yet: the history has no earlier measurement of these GPUs, nodes or models")


def _advice(m: Measurement) -> str:
    if m.metric.startswith("gemm."):
        return ("This GPU computes slower than it used to: check clocks and throttling (gpu.clocks, gpu.power, "
                "gpu.thermal), then DCGM targeted stress; compare with `gpu-preflight history trends --gpu`.")
    if m.node is None:
        return ("The job's collectives are slower than on earlier runs: check the network (NICs, switches, "
                "NCCL env) and which nodes were in the job; run --localize to find a slow node or link.")
    return ("This node moves data slower than it used to: check NVLink/PCIe state (gpu.nvlink, gpu.pcie) and "
            "NUMA placement; compare with `gpu-preflight history trends --node`.")


def _window_end(run: RunRecord, now: datetime) -> datetime:
    """Where the repeat-offender window ends: the run's own time, so a report judged later (``history
    import``, a replayed run) looks back from when it ran, as a live run does; ``now`` where the
    run's timestamp is not a sane date by it (the store refuses such a run before filing it)."""
    try:
        return checked(run.timestamp, now)
    except TimestampError:
        return now


def _repeat_offenders(run: RunRecord, store: HistoryStore, cfg: Any, before: int | None,
                      end: datetime) -> Iterator[Finding]:
    since = (end - timedelta(days=cfg.repeat_offender_window_days)).isoformat()
    known = [g for g in run.gpus if g.uuid or g.serial]
    offenders = 0
    for gpu in known:
        past = [p for p in store.past_failures(uuid=gpu.uuid, serial=gpu.serial,
                                               statuses=cfg.repeat_offender_statuses, since=since, before=before,
                                               now=end)
                if any(fnmatch.fnmatchcase(p.check_id, pat) for pat in cfg.repeat_offender_checks)]
        if not past:
            continue
        offenders += 1
        hosts = sorted({p.node for p in past if p.node})
        moved = any(h != gpu.node for h in hosts)
        what = ", ".join(dict.fromkeys(f"{p.check_id} {p.status} on {p.node} ({p.timestamp[:10]})" for p in past))
        ident = gpu.uuid or f"serial {gpu.serial}"
        yield Finding(
            HISTORY_REPEAT_OFFENDER_ID, Status.WARN, f"{gpu.node}/{gpu.slot}",
            "failed_before_elsewhere" if moved else "failed_before",
            f"{gpu.slot} ({ident}) failed before: {what}" + (f"; now in {gpu.node}" if moved else ""),
            observed=len(past), expected=0, unit="failures",
            recommendation="This GPU has a record" + (" that followed it to another host" if moved else "")
                           + ": run DCGM diagnostics level 3 and consider an RMA rather than another reseat or move.",
            details={"uuid": gpu.uuid, "serial": gpu.serial, "hosts": hosts,
                     "runs": sorted({p.run_id for p in past})})
    if offenders:
        return
    if known:
        yield Finding(HISTORY_REPEAT_OFFENDER_ID, Status.PASS, "cluster", "ok",
                      f"none of {len(known)} GPU(s) failed in the last {cfg.repeat_offender_window_days:g} days",
                      observed=len(known))
    else:
        yield Finding(HISTORY_REPEAT_OFFENDER_ID, Status.SKIP, "cluster", "no_gpu_identity",
                      "no GPU UUID or serial in this run: nothing to match against the history")
