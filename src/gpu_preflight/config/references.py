"""The settings a check's documentation names, with the values a run would judge against.

A check's docstring is its user documentation and names its thresholds as ````section.key````
(``gpu.temp_margin_c``). ``gpu-preflight checks explain`` prints each with its current value
from the resolved configuration (defaults, profile, site file, environment, ``--set``), so
"WARN within ``gpu.temp_margin_c``" comes with the number this site uses. Names that are not
settings (another check's id, ````nccl_tests.correctness````) are left alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import msgspec

from .fields import setting_fields
from .load import load_config
from .schema import Config

__all__ = ["NamedSetting", "format_value", "named_settings"]

_REF = re.compile(r"``([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)``")
# Sections a Config may lack (registered by their own modules), read through their accessor.
_OPTIONAL: dict[str, Callable[[object], Any]] = {"load": load_config}


class NamedSetting(msgspec.Struct, frozen=True):
    """``section.key``: its current value, its default, unit and meaning."""

    name: str
    value: Any
    default: Any
    unit: str | None
    doc: str

    @property
    def changed(self) -> bool:
        return bool(self.value != self.default)


def named_settings(doc: str, config: Config) -> list[NamedSetting]:
    """The settings ``doc`` names as ````section.key````, in order of first mention."""
    out: dict[str, NamedSetting] = {}
    for section_name, key in _REF.findall(doc):
        name = f"{section_name}.{key}"
        if name in out:
            continue
        section = _section(config, section_name)
        if section is None:
            continue
        spec = next((f for f in setting_fields(type(section)) if f.name == key), None)
        if spec is None:
            continue
        out[name] = NamedSetting(name, getattr(section, key), getattr(type(section)(), key),
                                 spec.metadata.get("unit"), spec.metadata.get("doc", ""))
    return list(out.values())


def _section(config: Config, name: str) -> Any:
    section = getattr(config, name, None)
    if section is None and name in _OPTIONAL:
        section = _OPTIONAL[name](config)
    return section if isinstance(section, msgspec.Struct) else None


def format_value(value: Any, unit: str | None = None) -> str:
    """As a site file would spell it (``true``, ``"text"``, ``{ "a" = 1 }``), then the unit;
    ``(unset)`` for a setting with no value."""
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, dict):
        text = "{ " + ", ".join(f"{json.dumps(str(k))} = {format_value(v)}" for k, v in value.items()) + " }"
    elif isinstance(value, (list, tuple)):
        text = "[" + ", ".join(format_value(v) for v in value) + "]"
    elif isinstance(value, float):
        text = f"{value:g}"
    else:
        text = json.dumps(value) if isinstance(value, str) else str(value)
    return f"{text} {unit}" if unit and not isinstance(value, (dict, list, tuple, bool)) else text
