"""The report formats: each renderer registers itself with ``@reporter("md")``.

``FORMATS``, :func:`gpu_preflight.report.render` and the CLI's ``--format`` choices all come
from :data:`reporters`, so a new format is one decorated function (and one ``lazy`` line
here, so that a ``--format json`` run never imports the HTML renderer).

A renderer takes the typed :class:`~gpu_preflight.findings.model.ClusterReport` (``typed=True``);
the one that writes the JSON itself (``json``) takes its dict, which the registered entry
makes from the typed report. :func:`gpu_preflight.report.render` reads a report dict (a saved
``report.json``) into the typed report once, at that edge.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from ..registries import Registry

if TYPE_CHECKING:
    from ..findings.model import ClusterReport

__all__ = ["Renderer", "reporter", "reporters"]

Renderer: TypeAlias = "Callable[[ClusterReport], str]"

F = TypeVar("F", bound=Callable[..., str])

reporters: Registry[Renderer] = Registry("report format")

reporters.lazy("console", "gpu_preflight.report.console:render_console_text")
reporters.lazy("json", "gpu_preflight.report.jsonio:render_json")
reporters.lazy("md", "gpu_preflight.report.markdown:render_markdown")
reporters.lazy("junit", "gpu_preflight.report.junit:render_junit")
reporters.lazy("html", "gpu_preflight.report.html:render_html")
reporters.lazy("prometheus", "gpu_preflight.outputs.textfile:render_textfile")


def _as_dict(report: ClusterReport | Mapping[str, Any]) -> Mapping[str, Any]:
    """The JSON a dict-based renderer writes (the JSON-out edge: a dict is written as it is)."""
    return report if isinstance(report, Mapping) else report.to_dict()


def _as_typed(report: ClusterReport) -> ClusterReport:
    return report


def reporter(name: str, *, typed: bool = False) -> Callable[[F], F]:
    """Register the decorated renderer as format ``name``; ``typed`` when it reads a
    :class:`~.model.ClusterReport` rather than the JSON dict. The function itself is
    returned unchanged."""

    def register(fn: F) -> F:
        convert = _as_typed if typed else _as_dict

        def entry(report: ClusterReport) -> str:
            return fn(convert(report))

        entry.__name__ = entry.__qualname__ = f"render_{name}"
        entry.__doc__ = fn.__doc__
        entry.__wrapped__ = fn  # type: ignore[attr-defined]
        entry.typed = typed  # type: ignore[attr-defined]  # what render() hands it: the typed report, or a dict as it is
        reporters.register(name, entry)
        return fn

    return register
