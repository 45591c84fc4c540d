"""Upload a report bundle to S3 (optional extra: ``pip install 'gpu-preflight[s3]'``).

``s3://bucket/prefix/`` receives ``prefix/report.json``, ``prefix/report.html`` and
``prefix/artifacts/...``; a URL ending in ``.json`` names the report object itself and
the rest goes beside it, so ``s3://bucket/{job}/metrics/health_check_metrics.json`` puts
the report exactly where the SageMaker health-check tool did. ``{job}`` expands to the
job's name (SageMaker, Slurm, Kubernetes) so one site setting serves every job.

boto3 finds credentials and region the usual way (environment, profile, instance role);
``outputs.s3_endpoint_url`` (or ``$AWS_ENDPOINT_URL_S3``) points it at an S3-compatible
store.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec

from .bundle import REPORT, Bundle

__all__ = ["S3Location", "job_name", "parse_s3_url", "upload_bundle"]

CONTENT_TYPES = {".json": "application/json", ".html": "text/html; charset=utf-8", ".prom": "text/plain",
                 ".txt": "text/plain", ".log": "text/plain", ".xml": "application/xml"}


class S3Location(msgspec.Struct, frozen=True):
    """Where a report goes in S3: the bucket, the key prefix and the report's own key."""

    bucket: str
    prefix: str
    report_key: str

    def key(self, relative: str) -> str:
        return self.report_key if relative == REPORT else self.prefix + relative


def job_name(environ: Mapping[str, str], timestamp: str | None = None) -> str:
    """The job's name: SageMaker, Slurm, Kubernetes (PyTorchJob) — else a name from the run's start time."""
    env = environ
    if env.get("TRAINING_JOB_NAME"):
        return env["TRAINING_JOB_NAME"]
    try:
        sm = json.loads(env.get("SM_TRAINING_ENV") or "{}")
    except json.JSONDecodeError:
        sm = {}
    if isinstance(sm, dict) and isinstance(sm.get("job_name"), str) and sm["job_name"]:
        return str(sm["job_name"])
    if env.get("SLURM_JOB_ID"):
        return f"slurm-{env['SLURM_JOB_ID']}"
    for key in ("PET_JOB_NAME", "JOB_NAME"):
        if env.get(key):
            return env[key]
    try:
        when = datetime.fromisoformat(timestamp or "")
    except ValueError:
        return "run"
    return "run-" + (when.astimezone(UTC) if when.tzinfo else when).strftime("%Y%m%dT%H%M%SZ")


def parse_s3_url(url: str, job: str = "run") -> S3Location:
    """Bucket, key prefix and report key of an ``s3://`` output URL (``{job}`` expanded)."""
    if not url.startswith("s3://"):
        raise ValueError(f"not an S3 URL: {url!r}")
    bucket, _, path = url[len("s3://"):].partition("/")
    path = path.replace("{job}", job)
    if path.endswith(".json"):
        prefix = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
        return S3Location(bucket, prefix, path)
    prefix = path if not path or path.endswith("/") else path + "/"
    return S3Location(bucket, prefix, prefix + REPORT)


def upload_bundle(bundle: Bundle, url: str, *, endpoint_url: str | None = None,
                  environ: Mapping[str, str] | None = None, client: Any = None, timeout_s: float = 5.0) -> list[str]:
    """Upload the bundle; returns the ``s3://`` URLs written. Raises boto3's errors unchanged.

    Connections and reads time out after ``timeout_s`` with one retry (boto3's defaults are a
    minute and several retries); the caller bounds the whole upload.
    """
    env = os.environ if environ is None else environ
    location = parse_s3_url(url, job_name(env, str(bundle.report().get("timestamp") or "")))
    if client is None:
        # optional: boto3 and botocore come with the [s3] extra, not with a node-only install
        import boto3  # type: ignore[import-untyped, import-not-found]  # optional extra, no type stubs
        from botocore.config import Config  # type: ignore[import-untyped, import-not-found]

        limits = Config(connect_timeout=timeout_s, read_timeout=timeout_s,
                        retries={"max_attempts": 2, "mode": "standard"})
        client = boto3.client("s3", endpoint_url=endpoint_url or env.get("AWS_ENDPOINT_URL_S3") or None,
                              config=limits)
    written = []
    for relative, path in bundle.files():
        key = location.key(relative)
        content_type = CONTENT_TYPES.get(path.suffix, "application/octet-stream")
        client.upload_file(str(path), location.bucket, key, ExtraArgs={"ContentType": content_type})
        written.append(f"s3://{location.bucket}/{key}")
    return written
