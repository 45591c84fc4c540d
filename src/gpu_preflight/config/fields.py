"""The one helper every config section uses to declare a documented setting.

Its own module so that section modules (``schema`` and the sections it registers) can all
import it without importing each other.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any


def setting(default: Any, doc: str, unit: str | None = None) -> Any:
    """A config field with its documentation (mutable defaults are copied per instance)."""
    meta = {"doc": doc, "unit": unit}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)
