"""The one helper every config section uses to declare a documented setting, and its valid range.

Its own module so that section modules (``schema`` and the sections it registers) can all
import it without importing each other.

A range is part of a setting because the types alone let through values that silently
switch a check off: ``nan`` compares false with everything (so ``value > nan`` never
FAILs), ``inf`` or ``1e23`` as a limit is never reached, and a negative count or timeout
is meaningless. Every numeric setting therefore has a range, checked by the loader on
every value from every source; one that declares none gets its type's default range
(a finite, non-negative number up to ``DEFAULT_FLOAT_MAX``; a whole number from 0 to
``DEFAULT_INT_MAX``).
"""

from __future__ import annotations

import math
from dataclasses import Field, field
from typing import Any

from ..fastclass import dataclass

__all__ = ["DEFAULT_FLOAT_MAX", "DEFAULT_INT_MAX", "ValueRange", "setting", "value_range"]

DEFAULT_INT_MAX = 10**9
DEFAULT_FLOAT_MAX = 1e9
_UNIT_TEXT = {"C": "°C"}


def setting(default: Any, doc: str, unit: str | None = None, *, min: float | None = None,
            max: float | None = None, above: float | None = None) -> Any:
    """A config field with its documentation and valid range (mutable defaults are copied per instance).

    ``min``/``max`` are inclusive bounds, ``above`` an exclusive lower bound (a timeout or a
    floor that must be positive). For ``dict`` settings the range applies to each value.
    """
    meta = {"doc": doc, "unit": unit, "min": min, "max": max, "above": above}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class ValueRange:
    """Where a numeric setting's values must lie; ``integer`` for whole-number settings."""

    low: float
    high: float
    integer: bool
    low_open: bool = False
    unit: str | None = None

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is out of range (one clause), or None when it is fine."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None  # the type check reports it
        finite = self.integer or math.isfinite(value)
        inside = (value > self.low if self.low_open else value >= self.low) and value <= self.high
        return None if finite and inside else f"must be {self.describe()}"

    def describe(self) -> str:
        """``a finite number in (0, 3600] s`` / ``a whole number in [0, 1000000000]``."""
        what = "a whole number" if self.integer else "a finite number"
        unit = _UNIT_TEXT.get(self.unit or "", self.unit)
        return f"{what} in {self.interval()}" + (f" {unit}" if unit else "")

    def interval(self) -> str:
        return f"{'(' if self.low_open else '['}{_num(self.low)}, {_num(self.high)}]"


def value_range(f: Field[Any], kind: type | None) -> ValueRange | None:
    """The range of field ``f`` whose values are ``kind`` (``int``/``float``; None: not numeric)."""
    if kind not in (int, float):
        return None
    meta = f.metadata
    integer = kind is int
    above = meta.get("above")
    low = above if above is not None else meta.get("min")
    high = meta.get("max")
    return ValueRange(low=0 if low is None else low,
                      high=high if high is not None else (DEFAULT_INT_MAX if integer else DEFAULT_FLOAT_MAX),
                      integer=integer, low_open=above is not None, unit=meta.get("unit"))


def _num(x: float) -> str:
    if float(x).is_integer() and abs(x) < 1e16:
        return str(int(x))
    return f"{x:g}"
