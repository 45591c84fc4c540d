"""A report bundle: ``report.json``, ``report.html`` when rendered, and the raw artifacts.

Every remote target (S3, MLflow, SageMaker's output directory) receives the same files
under the same relative names as ``--report-dir`` holds, so the artifact paths inside
``report.json`` stay valid wherever the bundle lands. Without ``--report-dir`` the bundle
is written to a temporary directory first.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ..boundedio import REPORT_LIMIT, load_json
from ..report.write import write

if TYPE_CHECKING:
    from ..findings.model import ClusterReport

__all__ = ["Bundle", "bundle_of"]

REPORT = "report.json"
HTML = "report.html"


class Bundle(msgspec.Struct, frozen=True):
    """A directory holding a written report and what it references."""

    root: Path
    name: str = REPORT  # the report's file name in ``root`` (``--report-name``); published as ``REPORT``

    @property
    def report_path(self) -> Path:
        return self.root / self.name

    def report(self) -> dict[str, Any]:
        data = load_json(self.report_path, limit=REPORT_LIMIT, what="report")
        if not isinstance(data, dict):
            raise ValueError(f"{self.report_path}: not a gpu-preflight report (a JSON object)")
        return data

    def files(self) -> list[tuple[str, Path]]:
        """(relative name, path) of the report, the HTML if present and every listed artifact that exists.

        Artifacts come from the report's own list, not from a directory walk, so stale files
        of an earlier run in a reused ``--report-dir`` are not published as this run's.
        """
        out = [(REPORT, self.report_path)]
        if (self.root / HTML).is_file():
            out.append((HTML, self.root / HTML))
        root = self.root.resolve()
        for artifact in self.report().get("artifacts") or []:
            rel = str(artifact.get("path") or "") if isinstance(artifact, Mapping) else ""
            path = (self.root / rel).resolve()
            if rel and path.is_file() and path.is_relative_to(root):
                out.append((path.relative_to(root).as_posix(), path))
        return out


@contextmanager
def bundle_of(report: ClusterReport, nodes: Sequence[Any] = (),
              report_dir: str | Path | None = None, name: str = REPORT) -> Iterator[Bundle]:
    """The bundle in ``report_dir`` when the report was written there (as ``name``), else a
    temporary one (``report``, typed or its dict, is not changed)."""
    if report_dir is not None and (Path(report_dir) / name).is_file():
        yield Bundle(Path(report_dir), name)
        return

    with tempfile.TemporaryDirectory(prefix="gpu-preflight-bundle-") as tmp:
        write(report, list(nodes), tmp)
        yield Bundle(Path(tmp))
