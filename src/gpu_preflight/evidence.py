"""Judging a saved tool output from its text: parse it, then judge the record.

Parsing lives here, in the engine's layer, so the judges in ``checks/`` stay pure (a
record and thresholds in, findings out) and never import a parser. The ``judge`` command
reads the judges' finding for unreadable input and their titles here too: checks are
plugins only the engine's layer imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .checks.evidence import check_title, judge_record, parse_error_finding

if TYPE_CHECKING:
    from .config import Config
    from .model import Finding

__all__ = ["check_title", "judge_text", "parse_as", "parse_error_finding"]


def judge_text(text: str, config: Config, *, kind: str | None = None, source: str = "evidence") -> list[Finding]:
    """Parse ``text`` (kind detected when ``None``) and judge it; a parse failure is an ``ERROR`` finding."""
    from .parsers.detect import parse_text
    from .parsers.errors import ParseError

    try:
        kind, record = parse_text(text, kind)
    except ParseError as exc:
        return [parse_error_finding(exc, source)]
    return judge_record(kind, record, config, source=source)


def parse_as(kind: str, text: str) -> Any:
    """The record ``kind``'s parser reads from ``text``; raises :class:`~gpu_preflight.records.errors.ParseError`.

    For text a rank gathered (a pair's fi_pingpong table): parsed here, so the cluster
    checks and the assessment receive records and never import a parser.
    """
    from .parsers.detect import get_parser

    return get_parser(kind).parse(text)

