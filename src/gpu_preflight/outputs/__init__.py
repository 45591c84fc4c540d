"""Where reports go after a run: history, Prometheus textfile, SageMaker, S3, MLflow.

Importing this package is cheap; boto3 and mlflow are imported only by the target that
needs them (optional extras ``s3`` and ``mlflow``).
"""

from __future__ import annotations

from .args import add_output_arguments, output_target
from .publish import Published, annotate, publish

__all__ = ["Published", "add_output_arguments", "annotate", "output_target", "publish"]
