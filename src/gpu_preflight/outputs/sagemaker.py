"""Inside a SageMaker training job: make sure the report lands where SageMaker uploads it.

SageMaker uploads two directories when a job ends, failed or not: ``$SM_MODEL_DIR``
(``/opt/ml/model`` → ``model.tar.gz``) and ``$SM_OUTPUT_DATA_DIR`` (``/opt/ml/output/data``
→ ``output.tar.gz``), both under ``<output path>/<job name>/output/``. Anything else in the
container is lost. So when ``--report-dir`` is already inside one of them (the SageMaker
entry script, :mod:`gpu_preflight.cli.sagemaker_entry`, points it at the model
directory, or a run without ``--report-dir`` wrote to ``$SM_OUTPUT_DATA_DIR/metrics`` itself:
:func:`default_report_dir`) nothing more is needed; otherwise the bundle is copied to
``$SM_OUTPUT_DATA_DIR/metrics/`` with the report named ``health_check_metrics.json``, the
SageMaker health-check tool's name, and ``report.html`` and ``artifacts/`` beside it. The
model directory is not written here: deployment steps consume ``model.tar.gz``.

The job's FailureReason file (``$SM_OUTPUT_DIR/failure``) belongs to the entry script,
which knows whether this job is meant to fail on the verdict (``--job-fails-on``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from ..safeio import open_dir

if TYPE_CHECKING:  # the bundle module (tempfile, copies) is only needed when writing
    from .bundle import Bundle

__all__ = ["REPORT_NAME", "SageMakerDirs", "default_report_dir", "sagemaker_dirs", "write_to_sagemaker"]

REPORT_NAME = "health_check_metrics.json"


class SageMakerDirs(msgspec.Struct, frozen=True):
    """The directories SageMaker uploads at the end of the job."""

    output_data: Path
    model: Path | None

    def uploads(self, path: Path) -> bool:
        """Whether a file or directory at ``path`` is uploaded with the job's output."""
        resolved = path.resolve()
        return any(resolved.is_relative_to(d.resolve()) for d in (self.output_data, self.model) if d is not None)


def sagemaker_dirs(environ: Mapping[str, str]) -> SageMakerDirs | None:
    """The job's upload directories, or None outside a SageMaker training job."""
    data = environ.get("SM_OUTPUT_DATA_DIR")
    if not data:
        return None
    model = environ.get("SM_MODEL_DIR")
    return SageMakerDirs(Path(data), Path(model) if model else None)


def default_report_dir(environ: Mapping[str, str]) -> Path | None:
    """Where a run inside a SageMaker job writes when no ``--report-dir`` is given:
    ``$SM_OUTPUT_DATA_DIR/metrics``, the directory the copy below would fill, so the raw outputs
    the run saves (DCGM, NVML dump, kernel log) are written there with their paths in the report.
    None outside a SageMaker job."""
    dirs = sagemaker_dirs(environ)
    return None if dirs is None else dirs.output_data / "metrics"


def write_to_sagemaker(bundle: Bundle, dirs: SageMakerDirs) -> tuple[Path, list[Path]]:
    """Copy the bundle under ``$SM_OUTPUT_DATA_DIR/metrics`` unless it is already uploaded;
    returns where the report is and the files written."""
    # start-up: loads only when this output is asked for
    from .bundle import REPORT

    if dirs.uploads(bundle.root):
        return bundle.report_path, []
    dest = dirs.output_data / "metrics"
    with open_dir(dest) as out:
        written = [out.copy_in(REPORT_NAME if relative == REPORT else relative, path)
                   for relative, path in bundle.files()]
    return dest / REPORT_NAME, written
