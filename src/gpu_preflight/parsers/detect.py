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
import itertools
import pkgutil
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec

from ..registries import Registry
from .errors import ParseError
from .text import PasteReader

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
    fn: ParseFn | None = None  # the module's own parse function (``parse`` reads past a paste's decorations first)




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
        if old is None or old.fn is not fn:  # the same function again: a module imported twice
            PARSERS.register(kind, ParserSpec(kind, _past_paste(fn, sniff), sniff, title,
                                              _stream_past_paste(stream, sniff) if stream else None, fn))
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

    The sniffers read the text as the tool printed it: a paste's decorations (colour codes,
    Markdown fences, quoting, a tag on every line: see :class:`~.text.PasteReader`) are
    learnt once, for all of them. Each kind is scored on every reading of the text (every
    tag removed, then one fewer...: the tool's own line start may look like a tag, a kernel
    log's ``NVRM: `` like a host's), and the surest score wins; of equal scores, the reading
    that removed most. A tag on every line is no evidence of any tool. Colours, fences and
    quoting are no tool's at all: the text as given is asked only when no reading past them
    is recognised.
    Never raises: a sniffer that trips over odd input simply does not vote. Binary data
    and source code are nobody's output; guessing there would judge garbage as evidence.
    """
    head = text[:SNIFF_WINDOW]
    if "\x00" in head:
        return None
    readings = list(dict.fromkeys(reader.read(head) for reader in PasteReader.of(head).peeled()))
    if any(len(_SOURCE_CODE.findall(reading)) >= 3 for reading in (*readings, head)):
        return None
    found = _surest(readings)
    if found is None and readings[-1] is not head:
        found = _surest([head])  # as given: only when no reading past what no tool prints is recognised
    return found


def _surest(readings: list[str]) -> str | None:
    """The kind surest of any of ``readings`` (of equal scores, the one found first), ``None`` when none is."""
    best: tuple[int, str] | None = None
    for reading in readings:
        for kind, spec in PARSERS.items():
            score = _score(spec.sniff, reading)
            if score > 0 and (best is None or score > best[0]):
                best = (score, kind)
    return best[1] if best else None


def _score(sniff: SniffFn, head: str) -> int:
    """The sniffer's score, 0 when it raises."""
    try:
        return sniff(head)
    except Exception:  # a sniffer bug must not turn detection into a crash
        return 0


def _readers(sniff: SniffFn, head: str) -> list[PasteReader | None]:
    """The ways to read a text whose head is ``head`` as the kind ``sniff`` recognises, to try in turn
    (``None``: as given): the one its sniffer is surest of first, then the others it recognises.

    Past what no tool prints (colours, fences, quoting) always; past a tag on every line (a
    date, a rank, a host, a container) or the tabs only when that makes the sniffer surer,
    and of readings it is as sure of, the one that removes least first: a tag that a kind's
    own parser reads (torch's ``[rank3]:`` in a job log, journalctl's date) is that kind's
    evidence, and so are the tabs ``topo -m`` separates its columns with. A text read as
    given before is thus read as given first, byte for byte."""
    reader = PasteReader.of(head)
    if reader.idle:
        return [None]
    *tagged, base = reader.peeled()
    scored = [(_score(sniff, reader.read(head)), None if reader.idle else reader)
              for reader in (base, *reversed(tagged))]  # the fewest removed first
    order = [reader for score, reader in sorted(scored, key=lambda pair: -pair[0]) if score > 0]
    if not base.idle and _score(sniff, head) > 0:
        order.append(None)  # what only the text as given is recognised as
    return [reader.fresh() if reader is not None else None for reader in order] or [None]


def _past_paste(fn: ParseFn, sniff: SniffFn) -> ParseFn:
    """``fn`` reading what :func:`detect_kind` read: the text without the paste's decorations that hide
    the tool's lines, so a parser states only its tool's format. When the parser cannot read the
    text so, the next reading is tried (a quoted table as given: the sniffer finds ``NVIDIA-SMI``
    anywhere in a line, the parser needs the rows' ``|`` at the line start); the first refusal is
    the one raised."""

    def parse(text: str) -> Any:
        first: ParseError | None = None
        for reader in _readers(sniff, text[:SNIFF_WINDOW]):
            try:
                return fn(text if reader is None else reader.read(text))
            except ParseError as exc:
                first = first or exc
        assert first is not None
        raise first

    parse.__doc__ = fn.__doc__
    return parse


def _stream_past_paste(stream: StreamFn, sniff: SniffFn) -> StreamFn:
    """``stream`` reading past the paste's decorations that the head shows (see :func:`_past_paste`).

    A stream cannot be read twice: when there is more than one way to read it, each is tried
    on the head alone, and the whole is read the first way whose head the parser reads."""

    def scan(chunks: Iterable[bytes]) -> Any:
        it = iter(chunks)
        first: list[bytes] = []
        for chunk in it:
            first.append(chunk)
            if sum(map(len, first)) >= SNIFF_WINDOW:
                break
        head = b"".join(first)[:SNIFF_WINDOW].decode("utf-8", errors="replace")
        readers = _readers(sniff, head)
        chosen = readers[0]
        for reader in readers if len(readers) > 1 else ():
            try:
                stream(iter(first) if reader is None else _read_chunks(reader.fresh(), first))
            except ParseError:
                continue
            chosen = reader
            break
        whole = itertools.chain(first, it)
        return stream(whole if chosen is None else _read_chunks(chosen, whole))

    scan.__doc__ = stream.__doc__
    return scan


def _read_chunks(reader: PasteReader, chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Each chunk of whole lines past the paste's decorations (decoded as the streams decode a log)."""
    for chunk in chunks:
        yield reader.read(chunk.decode("utf-8", errors="replace")).encode()


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
