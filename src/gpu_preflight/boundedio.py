"""Reading files a user names, without blocking or running out of memory.

Every command that takes a path (``judge``, ``parse``, ``--config``, ``--replay``,
``--kernel-log``, ``report render``, ``history import``/``check``, ``baseline capture``,
``slurm healthcheck --result-file``, ``slurm drain-report``, ``k8s``) reads it through
here, because a path may name a FIFO (``open`` blocks until a writer appears, forever in a
script), a character device (``/dev/zero`` never ends, so reading it "whole" ends in
``MemoryError``), a directory, or a regular file far larger than any tool output. So:

- only a regular file, or standard input (``-``), is read; anything else is refused
  before a byte is read. The file is opened with ``O_NONBLOCK`` so that even opening a
  FIFO returns at once, and ``fstat`` on the open descriptor decides (no race between a
  check and the open);
- every read is bounded by a byte limit; a larger input is refused, not truncated, since
  judging half a log would judge the wrong thing. Whole reads (:func:`read_bytes`) hold the
  input in memory, so their limits are memory limits. Streamed reads (:func:`iter_lines`,
  :func:`iter_chunks`) hold one chunk at a time, so :data:`STREAM_LIMIT` only bounds how
  long a read may take (a sparse file can claim terabytes): a 1 GB kernel log streams;
- text must be UTF-8 where a format says so; a UTF-16 file (Windows editors) is named as
  such rather than surfacing as a ``UnicodeDecodeError``;
- JSON is refused when nested deeper than any file this project writes, before the
  decoder recurses (a 10 KB file of 5,000 ``[`` otherwise ends in ``RecursionError``).

The limits are module constants so the documentation (``docs/diagnostics.md``) and the
callers name the same numbers. Every failure is an :class:`InputError` whose text is one
line that names the path.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

__all__ = [
    "CONFIG_LIMIT", "EVIDENCE_LIMIT", "JSON_MAX_DEPTH", "REPORT_LIMIT", "SNAPSHOT_LIMIT", "STREAM_LIMIT", "InputError",
    "InputMissing",
    "decode", "iter_chunks", "iter_lines", "load_json", "nesting_depth", "parse_json", "read_bytes", "read_text",
]

MiB = 1024 * 1024
EVIDENCE_LIMIT = 256 * MiB  # a saved tool output read whole (judge, parse of table/XML/JSON kinds)
STREAM_LIMIT = 4 * 1024 * MiB  # a streamed log (dmesg, nccl-tests, --kernel-log): about a minute of reading
# A gpu-preflight JSON report (report render, history, slurm drain-report): what we write we
# must read back. A 100,000-node report is ~300 MiB as a large run writes it (issue 28) and
# ~1.1 GB with every node's full detail (tests/large_report.py); like every whole read it is
# held in memory once parsed. A file that does not start as JSON is refused at its first
# chunk, so a sparse or zero-filled file of any size costs one read.
REPORT_LIMIT = 2048 * MiB
SNAPSHOT_LIMIT = 64 * MiB  # an NVML snapshot (--replay): a few hundred KB per GPU
CONFIG_LIMIT = 1 * MiB  # a site config file or profile: a few KB in practice
JSON_MAX_DEPTH = 64  # deeper than any file gpu-preflight writes (reports nest about 8 levels)

_CHUNK = 1 * MiB
_WIDE_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
              (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))
_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"))


class InputError(ValueError):
    """A path (or standard input) that cannot be read as the caller needs: one line naming it."""


class InputMissing(InputError):
    """The path does not exist: a caller for which "nothing there yet" is its own answer
    (a Slurm health check before the first result) tells it apart from a bad file."""


def read_bytes(path: str | Path, *, limit: int, what: str = "input") -> bytes:
    """The whole content of a regular file (or of stdin for ``"-"``), at most ``limit`` bytes.

    ``what`` names the input in messages ("config file", "replay file").
    """
    name = str(path)
    if name == "-":
        return _read_capped(sys.stdin.buffer, limit, what, "standard input")
    with _open_regular(name, limit, what) as fh:
        return _read_capped(fh, limit, what, name)


def read_text(path: str | Path, *, limit: int, what: str = "input", strict: bool = True) -> str:
    """:func:`read_bytes` decoded as UTF-8 (a leading BOM dropped).

    ``strict=False`` replaces undecodable bytes instead of refusing them: right for tool
    logs, where one damaged byte must not hide the rest; wrong for config and JSON, where
    it would change a value.
    """
    return decode(read_bytes(path, limit=limit, what=what), str(path), what=what, strict=strict)


def decode(data: bytes, name: str, *, what: str = "input", strict: bool = True) -> str:
    """UTF-8 text of ``data``; a UTF-16/32 file is named as such (they are common from Windows editors)."""
    _refuse_wide(data, name, what)
    try:
        return data.decode("utf-8-sig", errors="strict" if strict else "replace")
    except UnicodeDecodeError as exc:
        raise InputError(f"{_label(name)}: {what} is not UTF-8 text (invalid byte at offset {exc.start})") from None


def iter_lines(path: str | Path, *, limit: int, what: str = "input") -> Iterator[str]:
    """The lines of a regular file (or stdin), decoded leniently, without holding the file in memory.

    The total is still bounded by ``limit`` (a regular file can be sparse and huge), and so
    is each line, so that a file with no newline cannot become one giant string. Lines
    keep no trailing newline.
    """
    name = str(path)
    if name == "-":
        yield from _lines(sys.stdin.buffer, limit, what, "standard input")
        return
    with _open_regular(name, limit, what) as fh:
        yield from _lines(fh, limit, what, name)


def iter_chunks(path: str | Path, *, limit: int, what: str = "input", size: int = _CHUNK) -> Iterator[bytes]:
    """The bytes of a regular file (or stdin) in chunks of whole lines, without holding the file in memory.

    Each chunk ends with a newline except perhaps the last, so a line is never split
    between chunks and a chunk can be searched and decoded on its own (UTF-8 never puts a
    newline byte inside a character). A leading UTF-8 BOM is dropped and a UTF-16/32 one
    refused, as :func:`decode` does. The total is bounded by ``limit`` and a line by 16 MiB,
    as in :func:`iter_lines`.
    """
    name = str(path)
    if name == "-":
        yield from _chunks(sys.stdin.buffer, limit, what, "standard input", size)
        return
    with _open_regular(name, limit, what) as fh:
        yield from _chunks(fh, limit, what, name, size)


def load_json(path: str | Path, *, limit: int, what: str = "JSON file", max_depth: int = JSON_MAX_DEPTH) -> Any:
    """A JSON file read as :func:`read_text` reads it and decoded by :func:`parse_json`.

    Its first chunk must start as JSON text does (after a BOM and white space: an object,
    array, string, number or literal): a file of zeros or binary data is refused there,
    before the rest of a file of up to ``limit`` bytes is read into memory.
    """
    name = str(path)
    if name == "-":
        data = _read_capped(sys.stdin.buffer, limit, what, "standard input", json_start=True)
    else:
        with _open_regular(name, limit, what) as fh:
            data = _read_capped(fh, limit, what, name, json_start=True)
    return parse_json(decode(data, name, what=what), name, what=what, max_depth=max_depth)


def parse_json(text: str, name: str = "input", *, what: str = "JSON", max_depth: int = JSON_MAX_DEPTH) -> Any:
    """``json.loads`` that refuses nesting deeper than ``max_depth`` before decoding.

    The depth is measured on the text (brackets outside strings), so neither the decoder
    nor any later walk over the value can recurse past ``max_depth``.
    """
    if text.count("[") + text.count("{") > max_depth and (depth := nesting_depth(text)) > max_depth:
        raise InputError(f"{_label(name)}: {what} nests {depth} levels deep (at most {max_depth} accepted)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{_label(name)}: {what} is not valid JSON: {exc}") from None
    except RecursionError:  # pragma: no cover - max_depth is far below the interpreter's limit
        raise InputError(f"{_label(name)}: {what} nests too deeply") from None


_SPECIAL = re.compile(r'[\[\]{}"\\]')


def nesting_depth(text: str) -> int:
    """The deepest bracket nesting of JSON text, ignoring brackets inside strings.

    One pass over the structural characters only (found at C speed), linear in the
    text whatever it holds: unterminated strings and stray backslashes included.
    """
    depth = deepest = 0
    in_string = False
    escaped_at = -1
    for m in _SPECIAL.finditer(text):
        pos = m.start()
        if pos == escaped_at:
            continue
        c = text[pos]
        if in_string:
            if c == "\\":
                escaped_at = pos + 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


def _label(name: str) -> str:
    return "standard input" if name == "-" else name


def _open_regular(name: str, limit: int, what: str) -> BinaryIO:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as exc:
        raise InputMissing(f"{name}: cannot read {what}: {exc.strerror or exc}") from None
    except OSError as exc:
        raise InputError(f"{name}: cannot read {what}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((label for test, label in _KINDS if test(st.st_mode)), "not a regular file")
            raise InputError(f"{name}: {what} is {kind}; only a regular file or '-' (stdin) is read")
        if st.st_size > limit:
            raise InputError(f"{name}: {what} is {_size(st.st_size)}, more than the {_size(limit)} accepted")
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


_JSON_START = frozenset(b'{["-0123456789tfn')


def _refuse_non_json(chunk: bytes, name: str, what: str) -> None:
    """Refuse a first chunk that cannot begin a JSON text (a UTF-16/32 one is left to :func:`decode`)."""
    if any(chunk.startswith(bom) for bom, _ in _WIDE_BOMS):
        return
    text = chunk.removeprefix(codecs.BOM_UTF8).lstrip(b" \t\r\n")
    if text and text[0] not in _JSON_START:
        raise InputError(f"{_label(name)}: {what} is not valid JSON: it starts with byte 0x{text[0]:02x}")


def _read_capped(fh: BinaryIO, limit: int, what: str, name: str, *, json_start: bool = False) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        try:
            chunk = fh.read(min(_CHUNK, limit + 1 - total))
        except BlockingIOError:
            raise InputError(f"{name}: {what} would block (not a plain file)") from None
        except OSError as exc:
            raise InputError(f"{name}: cannot read {what}: {exc.strerror or exc}") from None
        if not chunk:
            return b"".join(chunks)
        if json_start and not chunks:
            _refuse_non_json(chunk, name, what)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise InputError(f"{name}: {what} is more than the {_size(limit)} accepted")


def _lines(fh: BinaryIO, limit: int, what: str, name: str) -> Iterator[str]:
    total = 0
    max_line = min(limit, 16 * MiB)
    while True:
        try:
            raw = fh.readline(max_line + 1)
        except BlockingIOError:
            raise InputError(f"{name}: {what} would block (not a plain file)") from None
        except OSError as exc:
            raise InputError(f"{name}: cannot read {what}: {exc.strerror or exc}") from None
        if not raw:
            return
        total += len(raw)
        if total > limit:
            raise InputError(f"{name}: {what} is more than the {_size(limit)} accepted")
        if len(raw) > max_line:
            raise InputError(f"{name}: {what} has a line longer than {_size(max_line)}")
        yield raw.decode("utf-8", errors="replace").rstrip("\r\n")


def _chunks(fh: BinaryIO, limit: int, what: str, name: str, size: int) -> Iterator[bytes]:
    total = 0
    max_line = min(limit, 16 * MiB)
    carry = b""
    head = True
    while True:
        try:
            block = fh.read(size)
        except BlockingIOError:
            raise InputError(f"{name}: {what} would block (not a plain file)") from None
        except OSError as exc:
            raise InputError(f"{name}: cannot read {what}: {exc.strerror or exc}") from None
        total += len(block)
        if total > limit:
            raise InputError(f"{name}: {what} is more than the {_size(limit)} accepted")
        if head:
            carry += block
            if len(carry) < 4 and block:
                continue  # a pipe may hand over a byte at a time: the BOM test needs four
            head = False
            _refuse_wide(carry, name, what)
            carry, block = b"", carry.removeprefix(codecs.BOM_UTF8)
        if not block:
            if carry:
                yield carry
            return
        cut = block.rfind(b"\n") + 1
        if cut == 0:
            carry += block
            if len(carry) > max_line:
                raise InputError(f"{name}: {what} has a line longer than {_size(max_line)}")
            continue
        yield carry + block[:cut] if carry else block[:cut]
        carry = block[cut:]


def _refuse_wide(data: bytes, name: str, what: str) -> None:
    for bom, encoding in _WIDE_BOMS:
        if data.startswith(bom):
            raise InputError(f"{_label(name)}: {what} is {encoding} text; save it as UTF-8")


def _size(n: int) -> str:
    return f"{n / MiB:.0f} MiB" if n >= MiB else f"{n} bytes"
