"""report.json written streamed: compact by default, indented with ``pretty``.

At 10,000 nodes the report is some 290 MB of JSON. ``json.dump(report, fh, indent=2)``
walks it with the standard library's pure-Python encoder (its C encoder serves only
``json.dumps`` without an indent): ten seconds on rank 0 while the whole job waits. Here
the report's top level and each of its blocks (``nodes``, ``findings``, ...) are written
piece by piece, a batch of :data:`BATCH` entries at a time, each batch encoded at C speed,
so no copy of the whole text is ever held.

The encoder is orjson where it is installed (a dependency, and several times faster than
the standard library's C encoder) and the report holds more than one node, else
:func:`json.dumps`, and the two write the same content: what ``json.loads`` reads back is
equal either way. A one-node report (``run --node-only --format json``, ~120 kB) is
written by the standard library in ~2.5 ms, less than importing orjson costs (~4 ms, with
the uuid and platform modules it loads), in a command meant to start and finish fast.

- A float that is not finite (NaN, infinity) is written as ``null``. orjson does so; the
  standard library would write the bare ``NaN`` token, which is not JSON (``jq``, a
  browser's ``JSON.parse`` and most languages' parsers refuse the file), so the fallback
  encoder replaces such floats with ``None`` before writing.
- A batch orjson refuses (an integer beyond 64 bits, a key that is not a string) is
  written by the standard library instead, which takes both as ``json.dumps`` always did.
- Text is UTF-8 in both (the standard library's ``\\uXXXX`` escapes are the same strings).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import IO, Any

from .reporters import reporter

__all__ = ["BATCH", "dump_report", "dumps_report", "encoder_name", "finite"]

BATCH = 64  # entries of one block encoded at once: node sections are tens of kB each



@functools.cache
def _load_orjson() -> ModuleType | None:
    """The orjson module, or None where it is not installed or not usable; imported on first
    use (it brings uuid and platform, which a node run printing to the console never needs).

    A broken install (seen on a GPU image: an ``orjson`` directory that imports as an empty
    namespace package, no ``dumps``) must not stop a run from writing its report: the
    standard library writes the same JSON, only slower.
    """
    try:
        import orjson
    except ImportError:
        return None
    if not all(hasattr(orjson, name) for name in ("dumps", "OPT_INDENT_2")):
        return None
    return orjson



def encoder_name() -> str:
    """``orjson`` or ``json``: what :func:`dump_report` encodes a report of several nodes with here."""
    return "orjson" if _load_orjson() is not None else "json"


def finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by ``None`` (a copy where one was found)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def _stdlib(pretty: bool) -> Callable[[Any], bytes]:
    def encode(value: Any) -> bytes:
        kwargs: dict[str, Any] = {"indent": 2} if pretty else {"separators": (",", ":")}
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False, **kwargs)
        except ValueError:  # NaN or infinity somewhere: null, as orjson writes it
            text = json.dumps(finite(value), ensure_ascii=False, allow_nan=False, **kwargs)
        return text.encode("utf-8")

    return encode


def _worth_orjson(report: Mapping[str, Any]) -> bool:
    """Whether the report is big enough to pay for importing orjson: more than one node."""
    nodes = report.get("nodes")
    return isinstance(nodes, (Mapping, list)) and len(nodes) > 1


def _encoder(pretty: bool, use_orjson: bool = True) -> Callable[[Any], bytes]:
    fallback = _stdlib(pretty)
    orjson = _load_orjson() if use_orjson else None
    if orjson is None:
        return fallback
    dumps, option = orjson.dumps, orjson.OPT_INDENT_2 if pretty else 0

    def encode(value: Any) -> bytes:
        try:
            return bytes(dumps(value, option=option))
        except TypeError:  # a big integer, a non-string key: the standard library takes them
            return fallback(value)

    return encode


def _key(key: Any) -> bytes:
    """A top-level key as ``json.dumps`` spells it (a non-string key becomes its JSON text)."""
    return json.dumps({key: 0}, ensure_ascii=False)[1:-4].encode("utf-8")


def _batches(block: Mapping[str, Any] | list[Any]) -> list[Any]:
    if isinstance(block, Mapping):
        items = list(block.items())
        return [dict(items[i:i + BATCH]) for i in range(0, len(items), BATCH)]
    return [block[i:i + BATCH] for i in range(0, len(block), BATCH)]


def _write_block(fh: IO[bytes], block: Any, encode: Callable[[Any], bytes], pretty: bool) -> None:
    """One top-level value; a non-empty dict or list goes out a batch at a time.

    Each batch is encoded alone and loses its own brackets. Indented, its entries are one
    level deep where they belong two (the top level's and the block's): every line gets
    two more spaces.
    """
    if not isinstance(block, (dict, list)) or not block:
        text = encode(block)
        fh.write(text.replace(b"\n", b"\n  ") if pretty else text)
        return
    opening, closing = (b"{", b"}") if isinstance(block, dict) else (b"[", b"]")
    fh.write(opening)
    for i, batch in enumerate(_batches(block)):
        text = encode(batch)
        if pretty:
            fh.write(b",\n    " if i else b"\n    ")
            fh.write(text[2:-2].lstrip(b" ").replace(b"\n", b"\n  "))
        else:
            fh.write(b"," if i else b"")
            fh.write(text[1:-1])
    fh.write(b"\n  " + closing if pretty else closing)


def dump_report(report: Mapping[str, Any], fh: IO[bytes], *, pretty: bool = False,
                use_orjson: bool | None = None) -> None:
    """Write ``report`` to the binary file ``fh`` as JSON and a newline.

    Compact (no spaces) by default; ``pretty`` indents by two spaces as ``json.dump(...,
    indent=2)`` does. ``use_orjson`` None picks the encoder by the report's size (orjson for
    more than one node); True or False forces it (for the tests that compare the two).
    """
    encode = _encoder(pretty, _worth_orjson(report) if use_orjson is None else use_orjson)
    if not report:
        fh.write(b"{}\n")
        return
    fh.write(b"{")
    for i, (key, value) in enumerate(report.items()):
        fh.write((b",\n  " if i else b"\n  ") if pretty else (b"," if i else b""))
        fh.write(_key(key) + (b": " if pretty else b":"))
        _write_block(fh, value, encode, pretty)
    fh.write(b"\n}\n" if pretty else b"}\n")


def dumps_report(report: Mapping[str, Any], *, pretty: bool = False, use_orjson: bool | None = None) -> bytes:
    """:func:`dump_report` into bytes (tests, small reports)."""
    import io

    buf = io.BytesIO()
    dump_report(report, buf, pretty=pretty, use_orjson=use_orjson)
    return buf.getvalue()


@reporter("json")
def render_json(report: Mapping[str, Any]) -> str:
    """The report as indented JSON text (``--format json`` on stdout): the bytes ``report.json``
    holds when written with ``pretty``, non-finite floats as ``null`` (valid JSON for ``jq``)."""
    return dumps_report(report, pretty=True).decode("utf-8")
