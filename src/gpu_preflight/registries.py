"""One registry type for everything that registers itself: checks, probes, evidence judges,
parsers, probe budgets and report renderers.

Each kind of plugin used to keep its own module-level dict with its own duplicate rule,
its own discovery and its own hand-written save/restore in tests. :class:`Registry` is
the one place those rules live:

- ``register(key, value)``: a second, different value under a key is an error (two
  modules claiming ``gpu.ecc`` is a bug); registering the same object again is a no-op
  (a module imported twice under reload).
- ``lazy(key, "module:attr")``: an entry whose module is imported only when it is used,
  so a ``--format json`` run never imports the HTML renderer.
- ``get(key)``: a :class:`KeyError` whose message names the closest known keys.
- ``discover``: a callable that imports the modules that register (once per scope), run
  before any lookup, so a lookup never depends on import order.
- ``scoped()``: a context manager for tests; what is registered inside is gone after.

No I/O and no imports of the plugin packages here: the registry sits on the lowest floor.
"""

from __future__ import annotations

import fnmatch
import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar, cast

__all__ = ["Registry", "UnknownKey"]

T = TypeVar("T")


class UnknownKey(KeyError):
    """A lookup of a key nobody registered; the message names the close matches."""

    def __str__(self) -> str:  # KeyError quotes its argument; a user reads a sentence
        return str(self.args[0]) if self.args else ""


class Registry(Generic[T]):
    """Keys (ids, kinds, names) to registered values of one kind."""

    def __init__(self, kind: str, discover: Callable[[str | None], None] | None = None) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._lazy: dict[str, str] = {}
        self._discover = discover
        self.generation = 0  # bumped on every change: tables derived from the entries know when to rebuild

    # -- registering -----------------------------------------------------------------
    def register(self, key: str, value: T) -> T:
        """Add ``value`` under ``key``; a different value under a taken key is an error."""
        old = self._entries.get(key)
        if old is not None and old is not value:
            raise ValueError(f"{self.kind} {key!r} registered twice")
        self._lazy.pop(key, None)
        if old is None:
            self._entries[key] = value
            self.generation += 1
        return value

    def lazy(self, key: str, target: str) -> None:
        """Register ``"package.module:attr"``, imported on first use of ``key``."""
        if key in self._entries or (key in self._lazy and self._lazy[key] != target):
            raise ValueError(f"{self.kind} {key!r} registered twice")
        self._lazy[key] = target
        self.generation += 1

    def decorator(self, key: str, wrap: Callable[[T], T] | None = None) -> Callable[[T], T]:
        """``@registry.decorator("id")``: registers the decorated object (or ``wrap(obj)``)
        and returns the object itself, so the function stays callable as written."""

        def register(obj: T) -> T:
            self.register(key, wrap(obj) if wrap is not None else obj)
            return obj

        return register

    # -- looking up ------------------------------------------------------------------
    def discover(self, scope: str | None = None) -> None:
        if self._discover is not None:
            self._discover(scope)

    def _resolve(self, key: str) -> T:
        target = self._lazy.pop(key)
        module, _, attr = target.partition(":")
        value = cast(T, getattr(importlib.import_module(module), attr))
        self._entries.setdefault(key, value)
        return self._entries[key]

    def get(self, key: str, scope: str | None = None) -> T:
        """The value under ``key``; an unknown key names the closest known ones."""
        if key not in self._entries and key not in self._lazy:
            self.discover(scope)
        if key in self._entries:
            return self._entries[key]
        if key in self._lazy:
            return self._resolve(key)
        import difflib  # only for a name that was not found

        close = difflib.get_close_matches(key, self.names(), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else f" (known: {', '.join(self.names()) or 'none'})"
        raise UnknownKey(f"unknown {self.kind} {key!r}{hint}")

    def find(self, key: str, scope: str | None = None) -> T | None:
        """The value under ``key`` or ``None``."""
        try:
            return self.get(key, scope)
        except UnknownKey:
            return None

    def __contains__(self, key: object) -> bool:
        return key in self._entries or key in self._lazy

    def names(self, scope: str | None = None) -> list[str]:
        """Every key, sorted (lazy entries included, not imported)."""
        self.discover(scope)
        return sorted({*self._entries, *self._lazy})

    def items(self, scope: str | None = None) -> list[tuple[str, T]]:
        """Every entry, sorted by key; lazy entries are imported."""
        return [(key, self.get(key, scope)) for key in self.names(scope)]

    def values(self, scope: str | None = None) -> list[T]:
        return [value for _, value in self.items(scope)]

    def match(self, pattern: str, scope: str | None = None) -> list[str]:
        """Keys matching a glob (``gpu.*``), sorted."""
        return [key for key in self.names(scope) if fnmatch.fnmatchcase(key, pattern)]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    # -- tests -----------------------------------------------------------------------
    @contextmanager
    def scoped(self) -> Iterator[Registry[T]]:
        """Everything registered (or removed) inside the block is undone on exit."""
        self.discover(None)
        entries, lazy = dict(self._entries), dict(self._lazy)
        try:
            yield self
        finally:
            self._entries.clear()
            self._entries.update(entries)
            self._lazy.clear()
            self._lazy.update(lazy)
            self.generation += 1

    def unregister(self, key: str) -> None:
        """Remove ``key`` (tests, inside :meth:`scoped`)."""
        self._entries.pop(key, None)
        self._lazy.pop(key, None)
        self.generation += 1
