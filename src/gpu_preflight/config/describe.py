"""Print every threshold with its default, unit, valid range and meaning (``config defaults``).

The TOML form is a valid site file: copy it, edit the values you need, pass ``--config``.
The range printed is the one the loader enforces, so the two cannot disagree.
"""

from __future__ import annotations

import json
import typing
from typing import Any

from .fields import setting_fields
from .loader import _hint, field_range
from .schema import SECTIONS


def defaults_json() -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for section, cls in SECTIONS.items():
        instance = cls()
        out[section] = {}
        for f in setting_fields(cls):
            entry: dict[str, Any] = {"default": getattr(instance, f.name), "unit": f.metadata.get("unit"),
                                     "doc": f.metadata.get("doc", "")}
            annotation = _hint(cls, f.name)
            if (bounds := field_range(f, annotation)) is not None:
                each = "each value: " if typing.get_origin(annotation) is dict else ""
                entry["range"] = {"min": bounds.low, "max": bounds.high, "min_exclusive": bounds.low_open,
                                  "integer": bounds.integer, "text": each + bounds.describe()}
            out[section][f.name] = entry
    return out


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def defaults_toml() -> str:
    lines = ["# gpu-preflight thresholds and their defaults. Usable as a site file (--config).", ""]
    for section, entries in defaults_json().items():
        lines.append(f"[{section}]")
        for name, meta in entries.items():
            unit = f" [{meta['unit']}]" if meta["unit"] else ""
            lines.append(f"# {meta['doc']}{unit}")
            if "range" in meta:
                lines.append(f"# valid: {meta['range']['text']}")
            if meta["default"] is None:
                lines.append(f"# {name} =   (unset)")
            else:
                lines.append(f"{name} = {_toml_value(meta['default'])}")
        lines.append("")
    return "\n".join(lines)
