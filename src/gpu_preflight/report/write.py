"""Writing a report to its directory: ``report.json``, ``report.html`` and the raw artifacts.

The report layer's step after the findings layer has assembled the report
(:mod:`.canonical`): it renders HTML and streams JSON, which the findings never import.
The report goes in as a value and comes out as a new one that lists every artifact written
and names it wherever a section refers to it (``raw_output_artifact.path``); nothing the
caller holds is changed (:func:`write`). :func:`write_report` is the older form, for callers
that hold the report's dict.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ..findings.canonical import save_artifacts
from ..findings.diagnostic_sections import fill_artifact_paths
from ..findings.model import ClusterReport, NodeSections
from ..safeio import open_dir
from .jsonio import dump_report

if TYPE_CHECKING:
    from ..model import NodeReport

__all__ = ["Written", "write", "write_report"]


class Written(NamedTuple):
    """What :func:`write` wrote: the report's path, the files beside it, and the report as written."""

    path: Path
    artifacts: tuple[Path, ...]
    report: ClusterReport


REPORT_DIR_WAIT_S = 30.0  # outputs.report_dir_wait_s's default, for callers without a config


def write(report: ClusterReport, nodes: Sequence[NodeReport], report_dir: str | Path, *,
          pretty: bool = False, name: str = "report.json", wait_s: float = REPORT_DIR_WAIT_S) -> Written:
    """Write ``report.json`` (or ``name``, a bare file name), ``report.html`` and the nodes' raw
    artifacts into ``report_dir``; return what was written and the report as written (a new value).

    Artifacts are listed in the report by relative path with size and SHA-256, so the
    report stays small and the raw outputs stay verifiable. Every file goes through
    :mod:`gpu_preflight.safeio` (no symlink followed, nothing half-written); ``report.html``
    and ``report.json`` are renamed into place together once both are complete. The JSON
    is streamed into its file, compact unless ``pretty`` (:mod:`.jsonio`: at 10,000 nodes
    it is hundreds of megabytes).

    The directory is locked from the first artifact to the last rename
    (:meth:`~gpu_preflight.safeio.SafeDir.lock`): two runs writing one directory at once each
    left their report naming the other's NVML dump, with their own checksum, until a second
    run waited. It waits ``wait_s`` (``outputs.report_dir_wait_s``) for another run, then
    writes nothing. Raises ``OSError`` (:class:`~gpu_preflight.safeio.UnsafePathError` for a
    refused directory, ``BlockingIOError`` for one still held after ``wait_s``).
    """
    from .html import render_html  # only a run that writes a report directory pays for the HTML renderer

    typed = report
    with open_dir(report_dir) as out:
        out.lock(wait_s, setting="outputs.report_dir_wait_s")
        artifacts = [a for a in typed.artifacts if a.get("path")]  # saved on their nodes already
        for i, node in enumerate(nodes):
            artifacts += save_artifacts(node, out, f"node_{i}")
        typed = typed.with_artifacts(artifacts, fill_artifact_paths(typed.nodes, artifacts))
        data = typed.to_dict()
        with out.batch() as batch:
            with batch.writer("report.html") as fh:
                fh.write(render_html(typed))
            with batch.writer(name, binary=True) as fh:
                dump_report(data, fh, pretty=pretty)
    root = Path(report_dir)
    return Written(root / name, tuple(root / str(a["path"]) for a in artifacts), typed)


def write_report(report: dict[str, Any] | ClusterReport, nodes: Sequence[NodeReport], report_dir: str | Path, *,
                 pretty: bool = False, name: str = "report.json") -> Path:
    """:func:`write`, returning the report's path; a report dict gets the artifacts' paths filled
    in place (``artifacts`` and every ``raw_output_artifact.path``), as the file has them."""
    written = write(ClusterReport.of(report), nodes, report_dir, pretty=pretty, name=name)
    if isinstance(report, dict):
        report["artifacts"] = list(written.report.artifacts)
        for key in fill_artifact_paths(NodeSections(report.get("nodes") or {}), report["artifacts"]):
            report["nodes"][key] = written.report.nodes.raw(key)
    return written.path
