"""Helpers for the corpus fact tables: read a corpus file, look up dotted paths in a record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpu_preflight.model import jsonable
from gpu_preflight.parsers.detect import parse_text


def parsed(corpus: Path, name: str, kind: str | None = None) -> dict[str, Any]:
    """The JSON form of the record of a corpus file (as `gpu-preflight parse` prints it)."""
    text = (corpus / name).read_bytes().decode("utf-8", errors="replace")
    found, record = parse_text(text, kind)
    data = jsonable(record)
    assert isinstance(data, dict)
    data["_kind"] = found
    return data


def dig(data: Any, path: str) -> Any:
    """``dig(record, "gpus.1.power_draw_w")``: follow keys and list indexes."""
    for part in path.split("."):
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


def check_facts(data: dict[str, Any], facts: dict[str, Any]) -> None:
    mismatches = {path: (dig(data, path), want) for path, want in facts.items() if dig(data, path) != want}
    assert not mismatches, mismatches
