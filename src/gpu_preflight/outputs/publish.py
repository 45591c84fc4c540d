"""After a run: judge it against the history, then file and publish the report.

Two entry points for :func:`gpu_preflight.run.finish` (or a library user's own run), both
taking the run's :class:`~gpu_preflight.outputs.options.OutputOptions` and its resolved config:

- :func:`annotate` before the report is written: the ``history.regression`` and
  ``history.repeat_offender`` findings and the earlier scores the history store holds for
  it, as a value (:class:`HistoryNotes`) that makes the new report (the verdict refreshed).
- :func:`publish` after it is written: appends the run to the history, writes the
  Prometheus textfile, copies the bundle into a SageMaker job's output directory, and
  uploads to S3 and MLflow.

A target that fails (bucket unreachable, database locked, MLflow down) is reported on
stderr and in the returned list, and the others still run: the verdict is about the
cluster, and a broken upload must not turn a healthy cluster into a failed job or hide a
failed one. Nor may a slow one hold it: the history waits ``history.lock_timeout_s`` for a
lock, and the S3 and MLflow uploads run side by side under one deadline
(``outputs.timeout_s``), after which the run goes on without them. What is printed about a
target passes through :mod:`gpu_preflight.redact` (a tracking URI may carry a password).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ..config import build_config
from ..config.history import history_config
from ..config.outputs import outputs_config
from ..config.report_schema import report_config
from ..deadline import Job, run_all
from ..redact import redact_text
from .options import OutputOptions
from .sagemaker import sagemaker_dirs, write_to_sagemaker

if TYPE_CHECKING:
    from ..findings.model import ClusterReport, EarlierScore
    from ..model import Finding

__all__ = ["HistoryNotes", "Published", "annotate", "cluster_name", "history_path", "publish"]


class Published(msgspec.Struct, frozen=True):
    """What happened to one target."""

    target: str
    ok: bool
    detail: str


def _config(config: object | None) -> object:
    """The run's resolved config; without one (a caller that resolved none), the defaults and environment."""
    if config is not None:
        return config

    return build_config()[0]


def cluster_name(options: OutputOptions, config: object, environ: Mapping[str, str]) -> str:
    """``--cluster-name``, else ``history.cluster``, else ``$SLURM_CLUSTER_NAME``, else ``default``."""
    return (options.cluster_name or history_config(config).cluster
            or environ.get("SLURM_CLUSTER_NAME") or "default")


def history_path(options: OutputOptions, config: object, environ: Mapping[str, str]) -> Path:
    """``--history-db``, else ``history.path``, else the default location."""
    # start-up: a --no-history run never loads the history package
    from ..history.store import default_path

    chosen = options.history_db or history_config(config).path
    return Path(chosen).expanduser() if chosen else default_path(dict(environ))


def _history_on(options: OutputOptions, config: object, replayed: bool) -> bool:
    """``--history``/``--no-history`` win; otherwise the config, except for replays of other nodes' data."""
    if options.history is not None:
        return options.history
    return history_config(config).enabled and not replayed


def _say(message: str) -> None:
    print(f"gpu-preflight: {message}", file=sys.stderr)


class HistoryNotes(msgspec.Struct, frozen=True):
    """What the history says about a run before it is filed: its ``history.regression`` and
    ``history.repeat_offender`` findings, and the cluster's earlier health scores (the
    assessment's trends: ``()`` on a first run, None when the history was not consulted)."""

    findings: tuple[Finding, ...] = ()
    earlier_scores: tuple[EarlierScore, ...] | None = None

    def applied(self, report: ClusterReport) -> ClusterReport:
        """``report`` with these notes: ``cluster_summary.earlier_scores`` and the findings,
        the verdict worked out again over them (a new value)."""
        if self.earlier_scores is not None:
            report = report.with_summary(earlier_scores=list(self.earlier_scores))
        if self.findings:
            # start-up: a --no-history run never loads the history package
            from ..history.merge import add_findings

            report = add_findings(report, self.findings)
        return report


def annotate(report: ClusterReport, options: OutputOptions, *, config: object | None = None,
             replayed: bool = False, environ: Mapping[str, str] | None = None) -> HistoryNotes:
    """What the history says about ``report`` (typed or its dict, which is not changed): its
    findings and the cluster's earlier scores, for :meth:`HistoryNotes.applied`. Never raises
    for a bad store; a report already judged (rank 0 before sharing its verdict) gets nothing."""

    env = os.environ if environ is None else environ
    typed = report
    if any(f.check_id.startswith("history.") for f in typed.findings):
        return HistoryNotes()  # already judged: once is enough
    config = _config(config)
    if not _history_on(options, config, replayed):
        return HistoryNotes()
    path = history_path(options, config, env)
    try:
        first = not path.is_file()
    except OSError as exc:  # a name too long to look up (history.path from a site file): no history, no crash
        _say(f"history not consulted: {exc.strerror or exc}")
        return HistoryNotes()
    if first:
        return HistoryNotes(earlier_scores=())  # a first run: nothing to compare with, no reason to create the file
    from ..history import HistoryStore  # only when there is history to read
    from ..history.compare import judge_run
    from ..history.extract import extract

    try:
        with HistoryStore(path, timeout_s=history_config(config).lock_timeout_s, readonly=True) as store:
            cluster = cluster_name(options, config, env)
            run = extract(typed)
            found = tuple(judge_run(run, store, config, cluster))
            earlier = store.earlier_scores(cluster, report_config(config).trend_runs, before=store.run_id(run.key))
    except Exception as exc:  # a corrupt, locked or refused store must not stop the report
        _say(f"history not consulted ({path}): {type(exc).__name__}: {exc}")
        return HistoryNotes()
    return HistoryNotes(found, tuple(earlier))


def publish(report: ClusterReport, options: OutputOptions, nodes: Sequence[Any] = (), *,
            config: object | None = None, replayed: bool = False, environ: Mapping[str, str] | None = None
            ) -> list[Published]:
    """File and publish a written report; returns one entry per target (also printed to stderr).

    ``options.report_dir`` is where the report was written (None when it was not: the
    bundle is then written to a temporary directory)."""
    env = os.environ if environ is None else environ
    config = _config(config)
    out_cfg = outputs_config(config)
    cluster = cluster_name(options, config, env)
    results: list[Published] = []
    if _history_on(options, config, replayed):
        wait = history_config(config).lock_timeout_s
        results.append(_guard("history", lambda: _record(report, history_path(options, config, env), cluster,
                                                         options.report_dir, wait)))
    textfile = options.prom_textfile or out_cfg.prom_textfile
    if textfile:
        results.append(_guard(f"prometheus textfile {textfile}", lambda: _textfile(report, textfile, cluster)))
    targets = [*out_cfg.urls, *options.outputs]
    if options.mlflow_uri:
        targets.append(f"mlflow+{options.mlflow_uri}")
    sm = sagemaker_dirs(env) if out_cfg.sagemaker else None
    if targets or sm is not None:
        # start-up: loads only when this output is asked for
        from .bundle import bundle_of

        with bundle_of(report, nodes, options.report_dir, options.report_name) as bundle:
            if sm is not None:
                results.append(_guard(f"SageMaker output {sm.output_data}", lambda: _sagemaker(bundle, sm)))
            results += _side_by_side([(t, functools.partial(_remote, bundle, t, out_cfg, cluster, env))
                                      for t in dict.fromkeys(targets)], out_cfg.timeout_s)
    for r in results:
        _say(f"{r.target}: {r.detail}" if r.ok else f"could not publish to {r.target}: {r.detail}")
    return results


def _side_by_side(jobs: Sequence[tuple[str, Callable[[], str]]], deadline_s: float) -> list[Published]:
    """Run each target's upload in its own thread and wait for all of them ``deadline_s`` in all.

    A target still running then is reported as not published and left behind
    (:mod:`gpu_preflight.deadline`): its client's retries (MLflow retries a read-only store
    for minutes) end with the process instead of holding the verdict.
    """
    done = run_all([Job(t, functools.partial(_guard, t, a), deadline_s) for t, a in jobs], side_by_side=True)
    return [got if isinstance(got, Published) else
            Published(_shown(t), False, f"not done within {deadline_s:g} s (outputs.timeout_s): "
                                        "gave up waiting, the upload may be incomplete")
            for (t, _), got in zip(jobs, done, strict=True)]


def _shown(target: str) -> str:
    return redact_text(target)


def _guard(target: str, action: Callable[[], object]) -> Published:
    shown = _shown(target)
    try:
        return Published(shown, True, redact_text(str(action())))
    except ImportError as exc:
        extra = "s3" if "boto" in str(exc) else "mlflow" if "mlflow" in str(exc) else None
        hint = f" (pip install 'gpu-preflight[{extra}]')" if extra else ""
        return Published(shown, False, redact_text(f"{exc}{hint}"))
    except Exception as exc:  # every failure is reported; none stops the other targets
        return Published(shown, False, redact_text(f"{type(exc).__name__}: {exc}"))


def _record(report: ClusterReport, path: Path, cluster: str, source: str | None,
            lock_timeout_s: float) -> str:
    # start-up: a --no-history run never loads the history package
    from ..history import HistoryStore, extract

    with HistoryStore(path, timeout_s=lock_timeout_s) as store:
        run_id, new = store.record(extract(report), cluster, str(source) if source else "run")
    return f"run #{run_id} {'recorded' if new else 'already'} in {path} (cluster {cluster})"


def _sagemaker(bundle: Any, dirs: Any) -> str:
    where, written = write_to_sagemaker(bundle, dirs)
    if not written:
        return f"report at {where}, already uploaded by SageMaker with the job's output"
    return f"report at {where} ({len(written)} file(s)), uploaded by SageMaker in output.tar.gz"


def _textfile(report: ClusterReport, path: str, cluster: str) -> str:
    # start-up: loads only when this output is asked for
    from .textfile import write_textfile

    return f"written ({write_textfile(report, path, cluster)})"


def _remote(bundle: Any, target: str, out_cfg: Any, cluster: str, env: Mapping[str, str]) -> str:
    if target.startswith("s3://"):
        # start-up: loads only when this output is asked for
        from .s3 import upload_bundle

        written = upload_bundle(bundle, target, endpoint_url=out_cfg.s3_endpoint_url, environ=env,
                                timeout_s=out_cfg.timeout_s)
        return f"{len(written)} object(s) uploaded, report at {written[0]}"
    # start-up: loads only when this output is asked for
    from .mlflow import log_report, tracking_uri_of

    run_id = log_report(bundle, tracking_uri=tracking_uri_of(target, env), experiment=out_cfg.mlflow_experiment,
                        cluster=cluster, artifact_location=out_cfg.mlflow_artifact_location,
                        timeout_s=out_cfg.timeout_s)
    return f"MLflow run {run_id} in experiment {out_cfg.mlflow_experiment!r}"
