"""Reporters: every format renders the one report (:mod:`.model`), each registered by name
in :data:`.reporters.reporters`.

The package itself imports only the registry: the CLI reads the format names while it
builds its parser, and the report builders load on first use.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import TYPE_CHECKING, Any

from .reporters import reporters

if TYPE_CHECKING:
    from ..findings.canonical import result_line
    from ..findings.model import ClusterReport
    from .build import build_report
    from .write import write_report

FORMATS = tuple(reporters.names())

__all__ = ["FORMATS", "build_report", "render", "reporters", "result_line", "write_report"]


_LAZY = {"build_report": ".build", "result_line": ".canonical", "write_report": ".write"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def render(report: ClusterReport | Mapping[str, Any], fmt: str) -> str:
    """Render a report (typed, or its JSON dict: read into the typed report here, once) to text
    in a registered format; an unknown format is a ``ValueError`` naming the closest known ones."""
    from ..findings.model import ClusterReport
    from ..registries import UnknownKey

    try:
        renderer = reporters.get(fmt)
    except UnknownKey as exc:
        raise ValueError(str(exc)) from None
    if isinstance(report, Mapping) and getattr(renderer, "typed", True):
        report = ClusterReport.from_dict(report)
    return renderer(report)  # type: ignore[arg-type]  # (a dict only for a renderer that writes the dict)
