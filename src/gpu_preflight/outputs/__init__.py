"""Where reports go after a run: history, Prometheus textfile, SageMaker, S3, MLflow.

Importing this package is cheap; boto3 and mlflow are imported only by the target that
needs them (optional extras ``s3`` and ``mlflow``).
"""

from __future__ import annotations

from .args import add_output_arguments, output_target

# The publishing machinery is imported from ``.publish`` where it is used: ``run`` adds
# these flags on every start and should not pay for what a plain run never calls.
__all__ = ["add_output_arguments", "output_target"]
