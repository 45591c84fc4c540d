"""Where reports go besides ``--report-dir``: S3, MLflow, a Prometheus textfile, SageMaker.

One section, ``[outputs]``, so a site can publish every run without every user
remembering the flags. Command-line flags add to these (``--output`` appends to
``urls``) or replace them (``--prom-textfile``, ``--mlflow-uri``).
"""

from __future__ import annotations

import msgspec

from .fields import setting

__all__ = ["OutputsConfig", "outputs_config"]


class OutputsConfig(msgspec.Struct):
    """Publishing targets for every run's report."""

    urls: list[str] = setting(
        [], "Publish every report to these: 's3://bucket/prefix/', 'mlflow' (needs $MLFLOW_TRACKING_URI) or "
            "'mlflow+URI' (e.g. 'mlflow+http://mlflow:5000', 'mlflow+sqlite:///srv/mlflow.db').")
    prom_textfile: str | None = setting(
        None, "Write Prometheus metrics to this .prom file (node_exporter --collector.textfile.directory).")
    mlflow_experiment: str = setting("gpu-preflight", "MLflow experiment the runs are logged under.")
    mlflow_artifact_location: str | None = setting(
        None, "Artifact root used when the MLflow experiment is first created; unset: the server's default.")
    s3_endpoint_url: str | None = setting(
        None, "S3 endpoint for S3-compatible stores (MinIO, Ceph); unset: AWS (or $AWS_ENDPOINT_URL_S3).")
    timeout_s: float = setting(
        10.0, "Deadline for the S3 and MLflow uploads together (they run side by side, and importing mlflow "
              "alone takes a few seconds); a target not done by then is reported as not published and the run "
              "goes on, so a slow, hung or read-only store never holds the verdict.", "s", above=0, max=3600)
    report_dir_wait_s: float = setting(
        30.0, "How long a run waits for another run that is writing the same --report-dir (each run locks the "
              "directory from its first artifact to its last rename, so a report never names another run's "
              "files); after that the report is not written: one line, exit 3.", "s", min=0, max=3600)
    sagemaker: bool = setting(
        True, "In a SageMaker training job ($SM_OUTPUT_DATA_DIR set) write the report to "
              "$SM_OUTPUT_DATA_DIR/metrics/health_check_metrics.json (uploaded in output.tar.gz), unless "
              "--report-dir is already in a directory SageMaker uploads.")


def outputs_config(config: object) -> OutputsConfig:
    """The ``outputs`` section of a resolved config, or the defaults where none is registered."""
    if isinstance(config, OutputsConfig):
        return config
    section = getattr(config, "outputs", None)
    return section if isinstance(section, OutputsConfig) else OutputsConfig()
