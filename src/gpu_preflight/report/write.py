"""Writing a report to its directory: ``report.json``, ``report.html`` and the raw artifacts.

The report layer's step after the findings layer has assembled the report
(:mod:`.canonical`): it renders HTML and streams JSON, which the findings never import.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..safeio import open_dir
from .canonical import save_artifacts
from .diagnostic_sections import fill_artifact_paths
from .jsonio import dump_report

if TYPE_CHECKING:
    from ..model import NodeReport
    from .model import ClusterReport

__all__ = ["write_report"]


def write_report(report: dict[str, Any] | ClusterReport, nodes: list[NodeReport], report_dir: str | Path, *,
                 pretty: bool = False, name: str = "report.json") -> Path:
    """Write ``report.json`` (or ``name``, a bare file name) and the raw artifacts beside it; return the report path.

    ``report`` is the typed report or its dict; a dict gets the artifacts' paths filled in
    place (``artifacts`` and every ``raw_output_artifact.path``), as the file has them.

    Artifacts are listed in the report by relative path with size and SHA-256, so the
    report stays small and the raw outputs stay verifiable. Every file goes through
    :mod:`gpu_preflight.safeio` (no symlink followed, nothing half-written); ``report.html``
    and ``report.json`` are renamed into place together once both are complete. The JSON
    is streamed into its file, compact unless ``pretty`` (:mod:`.jsonio`: at 10,000 nodes
    it is hundreds of megabytes). Raises ``OSError``
    (:class:`~gpu_preflight.safeio.UnsafePathError` for a refused directory).
    """
    from .html import render_html  # only a run that writes a report directory pays for the HTML renderer

    if not isinstance(report, dict):
        report = report.to_dict()
    with open_dir(report_dir) as out:
        artifacts = [a for a in report.get("artifacts", []) if a.get("path")]  # saved on their nodes already
        for i, node in enumerate(nodes):
            artifacts += save_artifacts(node, out, f"node_{i}")
        report["artifacts"] = artifacts
        fill_artifact_paths(report.get("nodes") or {}, artifacts)
        with out.batch() as batch:
            with batch.writer("report.html") as fh:
                fh.write(render_html(report))
            with batch.writer(name, binary=True) as fh:
                dump_report(report, fh, pretty=pretty)
    return Path(report_dir) / name
