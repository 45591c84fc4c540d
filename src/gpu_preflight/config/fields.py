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

A check's thresholds are declared beside the check, as a block of one section
(:func:`settings_block`): ``@settings_block("gpu", order=40)`` on a ``msgspec.Struct`` of
``setting()`` fields in ``checks/gpu_thermal.py``. The section the loader, ``--set`` and
``config defaults`` see (``gpu``) is assembled from its blocks on first use
(:func:`section_class`), so a threshold is still declared once, with its text and range, and
the printed defaults cannot drift from what the checks read; the check reads its block typed
(:func:`settings_of`).
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any, ForwardRef, NamedTuple, TypeVar, cast

import msgspec
from msgspec.structs import replace

__all__ = ["DEFAULT_FLOAT_MAX", "DEFAULT_INT_MAX", "Setting", "ValueRange", "declared_in", "section_class", "setting",
           "setting_fields", "settings_block", "settings_of", "value_range", "with_settings"]

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
    return msgspec.field(default_factory=_Default(default, meta))


class _Default:
    """A setting's default, made per instance (a list or dict copied), carrying what the setting
    documents: a Struct field has no metadata of its own, its default factory is where
    :func:`setting_fields` finds it."""

    __slots__ = ("meta", "value")

    def __init__(self, value: Any, meta: Mapping[str, Any]) -> None:
        self.value = value
        self.meta = meta

    def __call__(self) -> Any:
        value = self.value
        return type(value)(value) if isinstance(value, (list, dict)) else value


class Setting(NamedTuple):
    """One field of a config section: its name, documentation and range (``metadata``: doc, unit,
    min, max, above; empty for a field not declared with :func:`setting`) and default."""

    name: str
    metadata: Mapping[str, Any]
    default: Any


_NO_META: Mapping[str, Any] = {}
_FIELDS: dict[type, tuple[Setting, ...]] = {}


def setting_fields(cls: type) -> tuple[Setting, ...]:
    """The fields of config section (or settings block) ``cls``, in order (kept per class)."""
    found = _FIELDS.get(cls)
    if found is None:
        names: tuple[str, ...] = cls.__struct_fields__  # type: ignore[attr-defined]
        defaults: tuple[Any, ...] = cls.__struct_defaults__  # type: ignore[attr-defined]
        out = []
        for name, default in zip(names[len(names) - len(defaults):], defaults, strict=True):
            made = getattr(default, "factory", None)
            if isinstance(made, _Default):
                out.append(Setting(name, made.meta, made.value))
            else:
                out.append(Setting(name, _NO_META, made() if made is not None else default))
        found = _FIELDS[cls] = tuple(out)
    return found


class ValueRange(msgspec.Struct, frozen=True):
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


def value_range(f: Setting, kind: type | None) -> ValueRange | None:
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


T = TypeVar("T")
_BLOCKS: dict[str, dict[str, tuple[float, int, type]]] = {}  # section -> block's dotted name -> (order, seq, block)
_SECTION_OF: dict[type, str] = {}
_MERGED: dict[str, type] = {}
_DECLARED: dict[type, dict[str, type]] = {}  # assembled section -> field -> the block that declares it
_JOINED: dict[type, frozenset[type]] = {}  # assembled section -> its blocks
_assembling: set[str] = set()


def settings_block(section: str, *, order: float = math.inf) -> Callable[[type[T]], type[T]]:
    """Declare a ``msgspec.Struct`` of ``setting()`` fields as part of config section ``section``.

    Put it beside the code that reads it (a check module's thresholds above its checks). The
    section's fields come out in ``order`` (blocks without one last, in import order), which
    is the order ``config defaults`` prints and a report's config lists. A block must live in
    a module that a node run imports (``checks/*.py`` other than ``cluster_*``, ``probes/``,
    ``config/``): the section is assembled once, from the blocks known after node discovery.
    """

    def register(cls: type[T]) -> type[T]:
        if not issubclass(cls, msgspec.Struct):
            raise TypeError(f"{cls.__qualname__}: a settings block is a msgspec.Struct of setting() fields")
        if section in _MERGED:
            raise RuntimeError(f"{cls.__module__}.{cls.__qualname__}: settings block of [{section}] declared after "
                               "the section was assembled; declare it in a module a node run imports")
        blocks = _BLOCKS.setdefault(section, {})
        blocks[f"{cls.__module__}.{cls.__qualname__}"] = (order, len(blocks), cls)
        _SECTION_OF[cls] = section
        return cls

    return register


def section_class(section: str, base: type[T]) -> type[T]:
    """Section ``section``: ``base`` (its config-layer class, the type ``Config`` declares)
    joined with every block declared for it, built once.

    The check modules are imported first (by name, as :func:`gpu_preflight.registry.discover`
    imports its plugins: the config layer never imports a check). The joined class is a
    subclass of ``base`` (a Struct without fields) holding every block's fields, blocks in
    ``order``: Structs with fields cannot share a subclass, so it does not inherit the blocks;
    :func:`settings_of` checks that the section was joined with the block asked for, and the
    loader reads each field's annotation in the block that declared it (:func:`declared_in`).
    """
    merged = _MERGED.get(section)
    if merged is not None:
        return merged  # type: ignore[return-value]
    if section in _assembling:
        raise RuntimeError(f"config section [{section}] needed while its check modules are being imported")
    _assembling.add(section)
    try:
        importlib.import_module(f"{__package__.rpartition('.')[0]}.registry").discover("node")
    finally:
        _assembling.discard(section)
    blocks = [cls for _, _, cls in sorted(_BLOCKS.get(section, {}).values(), key=lambda b: b[:2])]
    owners: dict[str, type] = {}
    spec: list[tuple[str, Any, Any]] = []
    for block in blocks:
        annotations = inspect.get_annotations(block)
        for name, default in zip(block.__struct_fields__, block.__struct_defaults__, strict=True):  # type: ignore[attr-defined]
            owners[name] = block
            annotation = annotations[name]  # text, evaluated where it was written (typing.get_type_hints too)
            if isinstance(annotation, str):
                annotation = ForwardRef(annotation, module=block.__module__, is_class=True)
            spec.append((name, annotation, default))
    merged = msgspec.defstruct(base.__name__, spec, bases=(base,), module=base.__module__,
                               namespace={"__qualname__": base.__qualname__, "__doc__": base.__doc__})
    _DECLARED[merged] = owners
    _JOINED[merged] = frozenset(blocks)
    _MERGED[section] = merged
    return merged  # type: ignore[return-value]


def declared_in(cls: type, name: str) -> type:
    """The class whose annotation declares field ``name`` of section ``cls`` (a block, for an
    assembled section; else the class in ``cls``'s method-resolution order that annotates it)."""
    owner = _DECLARED.get(cls, {}).get(name)
    if owner is not None:
        return owner
    for klass in cls.__mro__:
        if name in inspect.get_annotations(klass):
            return klass
    raise KeyError(name)


def settings_of(config: object, block: type[T]) -> T:
    """The section of ``config`` that ``block`` is part of, typed as that block (its fields are
    the section's: the section was assembled with it)."""
    section = getattr(config, _SECTION_OF[block])
    if block not in _JOINED.get(type(section), ()) and not isinstance(section, block):
        raise TypeError(f"config section [{_SECTION_OF[block]}] is a {type(section).__qualname__}, "
                        f"not assembled with {block.__qualname__}")
    return cast(T, section)


C = TypeVar("C")


def with_settings(config: C, block: type[Any], **changes: Any) -> C:
    """``config`` with some settings of ``block`` changed (its section replaced, the rest shared)."""
    name = _SECTION_OF[block]
    section = settings_of(config, block)
    return replace(config, **{name: replace(section, **changes)})  # type: ignore[type-var]
