"""Reporters: every format renders from the canonical JSON report dict."""

from __future__ import annotations

import json
from typing import Any

from .canonical import build_report, result_line, write_report

FORMATS = ("console", "json", "md", "junit", "html")

__all__ = ["FORMATS", "build_report", "render", "result_line", "write_report"]


def render(report: dict[str, Any], fmt: str) -> str:
    """Render a report to text in a file format (``console`` is written by the CLI)."""
    if fmt == "json":
        return json.dumps(report, indent=2) + "\n"
    if fmt == "md":
        from .markdown import render_markdown

        return render_markdown(report)
    if fmt == "junit":
        from .junit import render_junit

        return render_junit(report)
    if fmt == "html":
        from .html import render_html

        return render_html(report)
    raise ValueError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
