"""Prometheus metrics of a report, for node_exporter's textfile collector.

node_exporter reads every ``*.prom`` file in ``--collector.textfile.directory`` at each
scrape, so a preflight run that leaves its verdict there is on the same dashboards and
alerts as the rest of the node, with no server to run. The file is replaced atomically
(written beside it under a name that does not end in ``.prom``, then renamed), because a
scrape that reads half a file drops the whole file.

Names follow the conventions of the health server's ``/metrics``
(:mod:`gpu_preflight.server.metrics`, whose exposition writer this reuses): the
``gpu_preflight_`` prefix, base units (bytes per second, FLOP per second, seconds,
celsius), the ``gpu`` label is the GPU index as in the server's metrics (``rankN`` for a
CPU worker), and state sets for statuses (one series per status, 1 for the current one), so
``gpu_preflight_check_status{status="fail"} == 1`` is an alert rule.

An output, not a renderer of the report layer: it reuses the server's exposition writer and
the history's measurements (:func:`gpu_preflight.history.extract.extract`), both outputs;
the ``prometheus`` format is registered by name in :mod:`gpu_preflight.report.reporters`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from ..findings.canonical import verdict_of
from ..findings.model import ClusterReport, HealthScores, ReportFinding
from ..history.extract import extract
from ..model import Status
from ..report.reporters import reporter
from ..safeio import atomic_writer
from ..server.metrics import STATUSES, Exposition, number

__all__ = ["render_textfile", "write_textfile"]

GB = 1e9
TFLOP = 1e12


def _timestamp(text: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(text)).timestamp()
    except ValueError:
        return None


@reporter("prometheus", typed=True)
def render_textfile(report: ClusterReport, cluster: str | None = None) -> str:
    """The metrics of a report (typed, or its JSON dict) as Prometheus text (format 0.0.4)."""
    typed = report
    out = Exposition()
    summary = typed.cluster_summary
    topo = typed.cluster_info.cluster_topology
    out.add("report_info", "gauge", "The last preflight report (value is always 1).", 1,
            {"version": typed.tool.version, "cluster": cluster or "", "launcher": topo.launcher or "none",
             "schema_version": typed.schema_version})
    stamp = _timestamp(typed.timestamp)
    if stamp is not None:
        out.add("run_timestamp_seconds", "gauge", "Unix time the last preflight run started.", stamp)
    duration = number(typed.run.duration_s)
    if duration is not None:
        out.add("run_duration_seconds", "gauge", "Wall time of the last preflight run.", duration)
    out.add("run_nodes", "gauge", "Nodes in the last preflight run.", topo.total_nodes)
    out.add("run_world_size", "gauge", "Ranks in the last preflight run.", topo.world_size or 1)
    verdict = verdict_of(typed)  # the same verdict and exit code as the run's [RESULT] line
    out.state_set("run_status", "Verdict of the last preflight run (1 for the current status).",
                  verdict.status.value.lower(), STATUSES)
    out.add("run_exit_code", "gauge", "Exit code of the last preflight run (0 pass, 1 warn, 2 fail, 3 error).",
            verdict.exit_code)
    for status, count in summary.counts.items():
        out.add("findings", "gauge", "Findings of the last preflight run by status.", int(count),
                {"status": str(status).lower()})
    _check_statuses(out, typed.findings)
    _scores(out, summary.health_scores)
    _measurements(out, extract(typed).measurements)
    return out.render()


def _check_statuses(out: Exposition, findings: Iterable[ReportFinding]) -> None:
    """Worst status per (check, subject): eight GPUs with the same fault are eight series, not one."""
    worst: dict[tuple[str, str], Status] = {}
    for f in findings:
        key = (f.check_id, f.subject)
        if key not in worst or f.status.rank > worst[key].rank:
            worst[key] = f.status
    for (check_id, subject), status in sorted(worst.items()):
        out.state_set("check_status", "Status of each check per subject in the last run (1 for the current "
                      "status).", status.value.lower(), STATUSES, {"check": check_id, "subject": subject})


def _scores(out: Exposition, scores: HealthScores | None) -> None:
    """Health scores (0-100) where the report has them."""
    if scores is None:
        return
    overall = number(scores.overall.score)
    if overall is not None:
        out.add("health_score", "gauge", "Health score 0-100, overall and per component.", overall,
                {"component": "overall"})
    for name, comp in scores.components.items():
        value = number(comp.score)
        if value is not None:
            out.add("health_score", "gauge", "Health score 0-100, overall and per component.", value,
                    {"component": str(name)})


def _measurements(out: Exposition, measurements: list[Any]) -> None:
    for m in measurements:
        family, _, rest = m.metric.partition(".")
        slot = m.slot or ""
        gpu = {"node": m.node or "", "gpu": slot.removeprefix("gpu") if slot.startswith("gpu") else slot,
               "uuid": m.uuid or ""}
        if family == "gemm":
            out.add("gemm_flops_per_second", "gauge", "Sustained GEMM throughput per GPU (FLOP/s) by precision.",
                    m.value * TFLOP, {**gpu, "dtype": rest})
        elif family == "memory":
            out.add("memory_bandwidth_bytes_per_second", "gauge",
                    "GPU memory bandwidth: device copy (read+write), pinned host-to-device and device-to-host.",
                    m.value * GB, {**gpu, "kind": rest})
        elif family == "busbw":
            scope_op, _, ranks = rest.partition("@")
            scope, _, op = scope_op.partition(".")
            out.add("bus_bandwidth_bytes_per_second", "gauge",
                    "Collective bus bandwidth at the largest message size (nccl-tests busbw), per process group.",
                    m.value * GB, {"node": m.node or "", "scope": scope, "op": op, "ranks": ranks})
        elif family == "temperature":
            out.add("gpu_temperature_celsius", "gauge", "GPU die temperature.", m.value, gpu)
        elif family == "power":
            out.add("gpu_power_draw_watts", "gauge", "GPU board power draw.", m.value, gpu)


def write_textfile(report: ClusterReport, path: str | Path, cluster: str | None = None) -> Path:
    """Replace ``path`` (a ``.prom`` file) atomically with the report's metrics; returns the path.

    The temporary is a dot-file, which the collector skips, and the file is made readable by
    all (node_exporter usually runs as another user) whatever the umask.
    """
    target = Path(path)
    if target.suffix != ".prom":
        raise ValueError(f"{target}: node_exporter's textfile collector reads only files ending in .prom")
    text = render_textfile(report, cluster)
    with atomic_writer(target) as fh:
        os.fchmod(fh.fileno(), 0o644)
        fh.write(text)
    return target
