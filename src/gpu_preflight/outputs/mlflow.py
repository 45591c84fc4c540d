"""Log a report to MLflow (optional extra: ``pip install 'gpu-preflight[mlflow]'``).

Teams that track training in MLflow see the preflight of a cluster beside the runs it
gated: one MLflow run per preflight, with the cluster's shape as params, the headline
numbers and every per-GPU measurement as metrics, the verdict as a tag and the report
bundle as artifacts. A run that gates is marked FAILED so it stands out in the run list.

The client is ``MlflowClient(tracking_uri)`` — no global ``mlflow.set_tracking_uri``
and no active-run state, so logging a preflight never disturbs a training script's own
MLflow run in the same process.
"""

from __future__ import annotations

import os
import posixpath
import re
import socket
import urllib.parse
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from ..findings.canonical import failed_checks, verdict_of
from ..findings.model import ClusterReport
from ..history.extract import extract
from .bundle import Bundle

__all__ = ["check_reachable", "check_sqlite_store", "log_report", "metric_key", "metrics_of", "params_of",
           "tracking_uri_of"]

BATCH = 1000  # MLflow's log_batch limit on metrics per call (params: 100)
PARAM_BATCH = 100


def tracking_uri_of(target: str, environ: Mapping[str, str] | None = None) -> str:
    """``mlflow+URI`` → URI; ``mlflow`` → ``$MLFLOW_TRACKING_URI``, which must then be set.

    MLflow's own default without one is a store in the current directory (``./mlflow.db``
    and ``./mlruns``): a preflight started from a job's working directory would leave a
    database there and the report would be in no place anyone looks.
    """
    if target.startswith("mlflow+"):
        return target.split("+", 1)[1]
    uri = (os.environ if environ is None else environ).get("MLFLOW_TRACKING_URI", "")
    if not uri:
        raise ValueError("no MLflow tracking URI: set MLFLOW_TRACKING_URI or name one (--mlflow-uri URI, "
                         "--output mlflow+URI); nothing is created in the current directory")
    return uri


def metric_key(text: str) -> str:
    """A name MLflow accepts: its character set, no path tricks (``a//b``, ``./x``), at most 250 characters."""
    key = posixpath.normpath(re.sub(r"[^/\w.\- ]", "_", text)).lstrip("/.")
    return key[:250] or "_"


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value == value else None


def params_of(report: ClusterReport, cluster: str) -> dict[str, str]:
    """The run's shape: what a reader filters runs by."""
    typed = report
    topo = typed.cluster_info.cluster_topology
    nodes = list(typed.nodes.values())
    gpus = [g for n in nodes for g in n.gpu.values()]
    models = sorted({str(g.get("name")) for g in gpus if g.get("name")})
    drivers = sorted({str(g.get("driver_version")) for g in gpus if g.get("driver_version")})
    profiles = sorted({n.node_info.profile for n in nodes if n.node_info.profile})
    hosts = [n.node_info.current_host or n.node_info.hostname for n in nodes]
    return {"cluster": cluster, "nodes": str(topo.total_nodes or len(nodes)),
            "world_size": str(topo.world_size), "gpus_per_node": str(topo.gpus_per_node),
            "launcher": topo.launcher, "gpu_models": ",".join(models) or "none",
            "driver_versions": ",".join(drivers) or "none", "profiles": ",".join(profiles) or "none",
            "hosts": ",".join(hosts)[:500], "fail_on": typed.run.fail_on, "tool_version": typed.tool.version,
            "schema_version": typed.schema_version, "data_completeness": typed.cluster_info.data_completeness}


def metrics_of(report: ClusterReport) -> dict[str, float]:
    """Headline numbers, health scores and per-GPU/per-node measurements (``metric/subject``)."""
    typed = report
    summary = typed.cluster_summary
    out: dict[str, float] = {"exit_code": float(summary.exit_code)}
    for status, count in summary.counts.items():
        out[f"findings.{str(status).lower()}"] = float(count)
    duration = _num(typed.run.duration_s)
    if duration is not None:
        out["duration_s"] = duration
    for key, value in summary.performance_summary.items():
        if _num(value) is not None:
            out[str(key)] = float(value)
    scores = summary.health_scores
    if scores is not None:
        overall = _num(scores.overall.score)
        if overall is not None:
            out["health_score.overall"] = overall
        for name, comp in scores.components.items():
            score = _num(comp.score)
            if score is not None:
                out[f"health_score.{name}"] = score
    for m in extract(typed).measurements:
        out[metric_key(f"{m.metric.replace('@', '.ranks')}/{m.subject}")] = m.value
    return out


def _millis(timestamp: Any) -> int | None:
    try:
        return int(datetime.fromisoformat(str(timestamp)).timestamp() * 1000)
    except ValueError:
        return None


def check_reachable(tracking_uri: str | None, timeout_s: float = 5.0) -> None:
    """Fail in seconds when an HTTP tracking server does not answer.

    MLflow retries a refused connection with exponential backoff for minutes
    (``MLFLOW_HTTP_REQUEST_MAX_RETRIES``); a preflight must not hold a job that long because
    its tracking server is down. Transient errors later in the upload still get MLflow's retries.
    """
    parsed = urllib.parse.urlsplit(tracking_uri or "")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        socket.create_connection((parsed.hostname, port), timeout=timeout_s).close()
    except OSError as exc:
        raise ConnectionError(f"MLflow tracking server {parsed.hostname}:{port} unreachable: {exc}") from exc


def check_sqlite_store(tracking_uri: str) -> None:
    """Fail at once when a ``sqlite:///`` store can be neither opened nor created.

    MLflow retries creating its database engine with exponential backoff (about 100 s) when
    the file cannot be opened, e.g. on a read-only filesystem or in a missing directory.
    """
    if not tracking_uri.startswith("sqlite:///"):
        return
    path = urllib.parse.unquote(urllib.parse.urlsplit(tracking_uri).path)
    if path.startswith("//"):
        path = path[1:]  # sqlite:////abs/path is the absolute /abs/path
    else:
        path = path.lstrip("/") or "."  # sqlite:///rel/path is relative
    db = Path(path)
    if db.exists():
        if not db.is_file():
            raise ValueError(f"MLflow store {db} is not a file")
        if not os.access(db, os.R_OK | os.W_OK):
            raise PermissionError(f"MLflow store {db} is not writable")
        return
    if not db.parent.is_dir():
        raise FileNotFoundError(f"MLflow store {db}: directory {db.parent} does not exist")
    if not os.access(db.parent, os.W_OK | os.X_OK):
        raise PermissionError(f"MLflow store {db} cannot be created: {db.parent} is not writable")


def log_report(bundle: Bundle, *, tracking_uri: str, experiment: str, cluster: str,
               artifact_location: str | None = None, timeout_s: float = 5.0) -> str:
    """Log the bundle's report as one MLflow run; returns the run id.

    ``timeout_s`` bounds the reachability check of an HTTP server; the caller bounds the
    whole upload (:func:`gpu_preflight.outputs.publish.publish` runs it under a deadline).
    """
    # optional: mlflow comes with the [mlflow] extra, not with a node-only install
    from mlflow import MlflowClient  # type: ignore[import-not-found]  # optional extra
    from mlflow.entities import Metric, Param, RunTag  # type: ignore[import-not-found]
    from mlflow.exceptions import MlflowException  # type: ignore[import-not-found]

    report = ClusterReport.from_dict(bundle.report())  # the saved report.json, read (and checked) once
    if not tracking_uri:
        raise ValueError("no MLflow tracking URI")
    check_reachable(tracking_uri, timeout_s)
    check_sqlite_store(tracking_uri)
    client = MlflowClient(tracking_uri=tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is not None:
        experiment_id = found.experiment_id
    else:
        try:
            experiment_id = client.create_experiment(experiment, artifact_location=artifact_location)
        except MlflowException:  # another process created it in between
            again = client.get_experiment_by_name(experiment)
            if again is None:
                raise
            experiment_id = again.experiment_id
    start = _millis(report.timestamp)
    status = verdict_of(report).status.value  # the run's verdict, as every format says it
    run = client.create_run(experiment_id, start_time=start, run_name=f"preflight {cluster} {status}",
                            tags={"gpu_preflight.verdict": status, "gpu_preflight.cluster": cluster})
    run_id = run.info.run_id
    try:
        stamp = start or 0
        params = [Param(k, v) for k, v in params_of(report, cluster).items()]
        for i in range(0, len(params), PARAM_BATCH):
            client.log_batch(run_id, params=params[i:i + PARAM_BATCH])
        metrics = [Metric(metric_key(k), v, stamp, 0) for k, v in metrics_of(report).items()]
        for i in range(0, len(metrics), BATCH):
            client.log_batch(run_id, metrics=metrics[i:i + BATCH])
        issues = report.cluster_summary.issues
        client.log_batch(run_id, tags=[RunTag("gpu_preflight.issues", "\n".join(issues)[:5000])])
        for relative, path in bundle.files():
            parent = str(PurePosixPath(relative).parent)
            client.log_artifact(run_id, str(path), None if parent == "." else parent)
    except BaseException:
        client.set_terminated(run_id, status="FAILED")
        raise
    duration = report.run.duration_s
    end = stamp + int(float(duration) * 1000) if start and isinstance(duration, (int, float)) else None
    client.set_terminated(run_id, status="FAILED" if failed_checks(report) else "FINISHED", end_time=end)
    return str(run_id)
