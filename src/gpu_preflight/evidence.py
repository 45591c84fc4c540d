"""Judging a saved tool output from its text: parse it, then judge the record.

Parsing lives here, in the engine's layer, so the judges in ``checks/`` stay pure (a
record and thresholds in, findings out) and never import a parser. The ``judge`` command
reads the judges' finding for unreadable input and their titles here too: checks are
plugins only the engine's layer imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .checks.evidence import check_title, judge_record, parse_error_finding
from .config import build_config, find_profile, match_profile
from .parsers.detect import get_parser, parse_text
from .parsers.errors import ParseError

if TYPE_CHECKING:
    from .config import Config
    from .model import Finding

__all__ = ["check_title", "evidence_config", "judge_text", "parse_as", "parse_error_finding"]


def evidence_config(record: Any, *, profile: str | None = None, config_file: str | None = None,
                    overrides: list[str] | None = None) -> tuple[Config, str | None]:
    """The config a saved output is judged with, and the profile used: the one named, else the one
    its GPU names match (an H100 log is judged against the H100 floors, not left unjudged)."""
    gpus = getattr(record, "gpus", None)
    names = [n for g in gpus if isinstance(n := getattr(g, "name", None), str)] if isinstance(gpus, list) else []
    chosen = find_profile(profile) if profile and profile != "auto" else (
        match_profile(names) if record is not None else None)
    config, _ = build_config(profile=chosen, config_file=config_file, overrides=overrides)
    return config, chosen.name if chosen else None


def judge_text(text: str, config: Config, *, kind: str | None = None, source: str = "evidence") -> list[Finding]:
    """Parse ``text`` (kind detected when ``None``) and judge it; a parse failure is an ``ERROR`` finding."""
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
    return get_parser(kind).parse(text)

