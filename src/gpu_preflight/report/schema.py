"""The report's JSON Schema, generated from the typed model (:mod:`.model`).

The schema is not written by hand: it is read off the ``msgspec.Struct``\\ s' fields and
types, so it cannot drift from what ``to_dict`` writes. The package ships the generated file
(``gpu_preflight/data/report.schema.json``); a test fails when it differs from what this
module generates. Regenerate it after changing the model (and bump
``model.SCHEMA_VERSION`` when the layout changes)::

    python -m gpu_preflight.report.schema --write

A small generator over the few type forms the model uses (no dependency): ``str``,
``int``, ``float``, ``bool``, ``None``, ``Any``, :class:`~gpu_preflight.model.Status`,
unions (``int | float`` is a JSON "number"), ``dict[str, X]``, ``list[X]``, ``tuple[X, ...]``,
structs and ``TypedDict``\\ s. A field of a struct that omits defaults and has one is optional
(left out when ``None``); the :data:`~gpu_preflight.findings.model.EXTRA` field opens the object to further keys.
"""

from __future__ import annotations

import enum
import json
import sys
import types
import typing
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec

from ..findings.model import EXTRA, ClusterReport
from ..model import SCHEMA_VERSION

__all__ = ["SCHEMA_ID", "generate", "shipped", "shipped_path"]

SCHEMA_ID = "https://github.com/gpu-preflight/gpu-preflight/report.schema.json"
_SIMPLE: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


def _type(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    if tp is Any:
        return {}
    if tp in _SIMPLE:
        return {"type": _SIMPLE[tp]}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"type": "string", "enum": [m.value for m in tp]}
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        parts = [_type(a, defs) for a in args]
        if {"type": "integer"} in parts and {"type": "number"} in parts:  # a JSON number may be an integer
            parts.remove({"type": "integer"})
            if len(parts) == 1:
                return parts[0]
        if all(set(p) == {"type"} for p in parts):
            return {"type": [p["type"] for p in parts]}
        return {"anyOf": parts}
    if origin in (dict, Mapping):
        value = _type(args[1], defs) if args else {}
        return {"type": "object", "additionalProperties": value} if value else {"type": "object"}
    if origin in (list, tuple):
        return {"type": "array", "items": _type(args[0], defs)} if args and args[0] is not Any else {"type": "array"}
    if isinstance(tp, type) and (issubclass(tp, msgspec.Struct) or typing.is_typeddict(tp)):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # placeholder: a type that refers to itself ends here
            defs[name] = _object(tp, defs)
        return {"$ref": f"#/$defs/{name}"}
    if isinstance(tp, type) and issubclass(tp, Mapping) and hasattr(tp, "__orig_bases__"):
        return _type(tp.__orig_bases__[0], defs)  # a Mapping[str, X] subclass: its JSON is the mapping
    raise TypeError(f"no JSON Schema form for {tp!r}")


def _object(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    open_ = False
    if issubclass(cls, msgspec.Struct):
        omits = cls.__struct_config__.omit_defaults
        for f in msgspec.structs.fields(cls):
            if f.encode_name == EXTRA:
                open_ = True
                continue
            hint = f.type
            args = typing.get_args(hint)
            if msgspec.UnsetType in args:  # no key when unset; a null stays one
                hint = typing.Union[tuple(a for a in args if a is not msgspec.UnsetType)]  # noqa: UP007
            elif omits and not f.required:  # left out when None: present means a value
                hint = typing.Union[tuple(a for a in args if a is not type(None))]  # noqa: UP007
            else:
                required.append(f.encode_name)
            properties[f.encode_name] = _type(hint, defs)
    else:
        for name, hint in typing.get_type_hints(cls).items():
            properties[name] = _type(hint, defs)
            required.append(name)
    out: dict[str, Any] = {"type": "object"}
    doc = (cls.__doc__ or "").strip()
    if doc:
        out["description"] = " ".join(doc.split("\n\n")[0].split())
    out.update(properties=properties, required=required, additionalProperties=open_)
    return out


def generate() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``report.json`` at this ``schema_version``."""
    defs: dict[str, Any] = {}
    root = _object(ClusterReport, defs)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
            "title": f"gpu-preflight report, schema_version {SCHEMA_VERSION}", **root, "$defs": defs}


def text() -> str:
    """The schema as the shipped file holds it."""
    return json.dumps(generate(), indent=2, ensure_ascii=False) + "\n"


def shipped_path() -> Path:
    return Path(str(resources.files("gpu_preflight") / "data" / "report.schema.json"))


def shipped() -> dict[str, Any]:
    """The schema the package ships (``gpu_preflight/data/report.schema.json``)."""
    data: dict[str, Any] = json.loads(shipped_path().read_text(encoding="utf-8"))
    return data


def main(argv: list[str] | None = None) -> int:
    """Print the schema, or with ``--write`` regenerate the shipped file."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--write"]:
        shipped_path().write_text(text(), encoding="utf-8")
        print(f"wrote {shipped_path()}", file=sys.stderr)
        return 0
    if args:
        print("usage: python -m gpu_preflight.report.schema [--write]", file=sys.stderr)
        return 3
    sys.stdout.write(text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
