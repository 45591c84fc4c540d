"""Which tool printed this? The kind registry and content sniffing.

Each parser module registers its kind with :func:`parser`, giving the parse function and
a *sniffer*: a pure function that scores how surely a text is of that kind (0: it is
not; higher: more specific evidence, e.g. an XML root element beats a loose keyword).
:func:`detect_kind` asks every sniffer and takes the best score, so adding a kind touches
only its own module and detection does not depend on import order.

A kind whose files can be far larger than memory (kernel logs, nccl-tests logs) also
registers a *stream* function: it reads an iterable of byte chunks of whole lines (see
:func:`gpu_preflight.boundedio.iter_chunks`) and keeps counts and a bounded set of
examples instead of every line. Its text parser is the same function over one chunk, so
the two cannot drift. Detection only ever needs the head: :data:`SNIFF_WINDOW`.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from ..registries import Registry
from .errors import ParseError

__all__ = ["PARSERS", "SNIFF_WINDOW", "ParserSpec", "all_kinds", "detect_kind", "get_parser", "parse_text", "parser"]

ParseFn = Callable[[str], Any]
SniffFn = Callable[[str], int]
StreamFn = Callable[[Iterable[bytes]], Any]

SNIFF_WINDOW = 256 * 1024  # sniffers look at the head of a file; a 2 GB log must not be scanned twice
# Statements at the start of a line that no diagnostic tool prints but every source file
# does: a module that quotes tool output in its tests must not be "detected" as that tool.
_SOURCE_CODE = re.compile(r"^(?:def |async def |class \w+[(:]|import \w|from [\w.]+ import |#include [<\"]"
                          r"|package \w|func \w|fn \w|#!/)", re.MULTILINE)


class ParserSpec(msgspec.Struct, frozen=True):
    """One registered kind: its parser, its sniffer and a line of documentation."""

    kind: str
    parse: ParseFn
    sniff: SniffFn
    title: str
    stream: StreamFn | None = None




def _discover(scope: str | None = None) -> None:
    """Import every parser module once (they register on import)."""
    if _discovered:
        return
    from .. import parsers

    for mod in pkgutil.walk_packages(parsers.__path__, prefix=f"{parsers.__name__}."):
        importlib.import_module(mod.name)
    _discovered.append(True)


_discovered: list[bool] = []
PARSERS: Registry[ParserSpec] = Registry("kind", _discover)


def parser(kind: str, *, sniff: SniffFn, title: str, stream: StreamFn | None = None) -> Callable[[ParseFn], ParseFn]:
    """Register ``fn`` as the parser of ``kind`` (text → typed record; raises :class:`ParseError`).

    ``stream`` is the same parser over byte chunks, for kinds whose logs can be huge.
    """

    def register(fn: ParseFn) -> ParseFn:
        old = PARSERS.find(kind) if kind in PARSERS else None
        if old is None or old.parse is not fn:  # the same function again: a module imported twice
            PARSERS.register(kind, ParserSpec(kind, fn, sniff, title, stream))
        return fn

    return register


def all_kinds() -> list[ParserSpec]:
    """Every registered kind, sorted by name."""
    return PARSERS.values()


def get_parser(kind: str) -> ParserSpec:
    """The parser of ``kind``; ``KeyError`` naming the known kinds otherwise."""
    return PARSERS.get(kind)


def detect_kind(text: str) -> str | None:
    """The kind whose sniffer is surest about ``text``; ``None`` when none recognises it.

    Never raises: a sniffer that trips over odd input simply does not vote. Binary data
    and source code are nobody's output; guessing there would judge garbage as evidence.
    """
    specs = PARSERS.items()
    head = text[:SNIFF_WINDOW]
    if "\x00" in head or len(_SOURCE_CODE.findall(head)) >= 3:
        return None
    best: tuple[int, str] | None = None
    for kind, spec in specs:
        try:
            score = spec.sniff(head)
        except Exception:  # a sniffer bug must not turn detection into a crash
            score = 0
        if score > 0 and (best is None or score > best[0]):
            best = (score, kind)
    return best[1] if best else None


def parse_text(text: str, kind: str | None = None) -> tuple[str, Any]:
    """Parse ``text`` as ``kind`` (detected when ``None``): ``(kind, record)``.

    Raises ``KeyError`` for an unknown kind, :class:`ParseError` when the kind cannot be
    detected or the text is not a readable instance of it.
    """
    if kind is None:
        kind = detect_kind(text)
        if kind is None:
            raise ParseError("unknown", "cannot tell which tool printed this; pass --kind")
    return kind, get_parser(kind).parse(text)
