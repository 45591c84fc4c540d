"""``dataclass`` as the standard library makes it, with ``__repr__``, ``__eq__`` and ``__hash__`` shared.

Why: a node check is a short-lived process, and on Python 3.11 every dataclass compiles its
generated methods from source text when its module is imported (one ``exec`` each). A
live node check creates ~90 dataclasses (config sections, registry specs, node records,
the report model) and spent 40-60 ms of its ~200 ms doing so; ``__repr__``, ``__eq__`` and
(frozen) ``__hash__`` were half of that. Here they are made once, from closures over the
class's field names: no source is compiled per class.

What stays the standard library's: the class itself, ``__init__``, frozen ``__setattr__``,
``__match_args__``, ``slots``, ``fields()``, ``replace()``, ``asdict()``, the type checker's
view (mypy reads this name as :func:`dataclasses.dataclass`). What the shared methods do is
what the generated ones do (tests/test_fastclass.py compares them on the same classes):

* ``__repr__``: ``Name(a=1, b='x')`` over the fields with ``repr=True``, ``...`` on recursion;
* ``__eq__``: same class, then the tuples of the fields with ``compare=True``; otherwise
  ``NotImplemented``;
* ``__hash__``: the standard table: frozen (or ``unsafe_hash``) hashes the tuple of the
  fields whose ``hash`` (else ``compare``) is true; a mutable class with ``eq`` is unhashable;
  a ``__hash__`` or ``__eq__``/``__repr__`` the class body defines is kept.

What the standard library still generates (``__init__``, frozen ``__setattr__`` and
``__delattr__``) is compiled once per installation, not once per run: the compiled code is
kept beside the bytecode by :mod:`gpu_preflight.bytecache` (a further ~20 ms of a node
check). While one of our classes is made, ``dataclasses._create_fn`` is that cache's for the
thread making it; any other thread's classes, in the same moment, get the standard
library's own.

``order=True`` (unused here) is left to the standard library, which needs its own ``__eq__``.
``__dataclass_params__`` records ``repr=False, eq=False`` (what the standard library was
asked for); the methods on the class are what count, and they are the ones described here.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from operator import attrgetter
from reprlib import recursive_repr
from typing import TYPE_CHECKING, Any

from .bytecache import METHODS

__all__ = ["dataclass"]

_MAKING = threading.RLock()  # one class at a time swaps dataclasses._create_fn


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A function from an instance to the tuple of those attributes (a tuple even for one name,
    as the generated methods compare and hash tuples: ``(nan,) == (nan,)`` holds for one NaN)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        name = names[0]
        return lambda obj: (getattr(obj, name),)
    return lambda obj: ()


def _put(cls: type, method: Callable[..., Any]) -> None:
    """Set ``method`` on the class under its own name, named as a method of that class."""
    method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
    setattr(cls, method.__name__, method)


def _share(cls: type, *, repr_: bool, eq: bool, frozen: bool, unsafe_hash: bool) -> type:
    """Install the shared methods on the class ``dataclasses.dataclass`` returned."""
    fields = dataclasses.fields(cls)
    body = cls.__dict__
    shown = tuple(f.name for f in fields if f.repr)

    if repr_ and "__repr__" not in body:
        @recursive_repr()
        def __repr__(self: Any) -> str:
            return f"{type(self).__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in shown)})"

        _put(cls, __repr__)
    if not eq:
        return cls
    compared = _getter(tuple(f.name for f in fields if f.compare))
    if "__eq__" not in body:
        def __eq__(self: Any, other: object) -> Any:
            if other.__class__ is self.__class__:
                return compared(self) == compared(other)
            return NotImplemented

        _put(cls, __eq__)
    # the standard table: a __hash__ written in the body wins (None from an __eq__ there does not)
    explicit = "__hash__" in body and not (body["__hash__"] is None and "__eq__" in body)
    if explicit:
        return cls
    if frozen or unsafe_hash:
        hashed = _getter(tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash)))

        def __hash__(self: Any) -> int:
            return hash(hashed(self))

        _put(cls, __hash__)
    else:
        cls.__hash__ = None  # type: ignore[assignment]
    return cls


def _made(klass: type, **kwargs: Any) -> type:
    """``dataclasses.dataclass(klass, **kwargs)``, its generated methods compiled through :data:`METHODS`."""
    methods = METHODS
    if methods is None:
        return dataclasses.dataclass(klass, **kwargs)  # type: ignore[no-any-return]
    with _MAKING:
        original = dataclasses._create_fn  # type: ignore[attr-defined]
        maker = threading.get_ident()

        def create_fn(*args: Any, **kw: Any) -> Any:
            if threading.get_ident() != maker:  # another thread's class: not ours to keep
                return original(*args, **kw)
            return methods.create_fn(*args, **kw)

        dataclasses._create_fn = create_fn  # type: ignore[attr-defined]
        try:
            return dataclasses.dataclass(klass, **kwargs)  # type: ignore[no-any-return]
        finally:
            dataclasses._create_fn = original  # type: ignore[attr-defined]


def _dataclass(cls: type | None = None, /, **kwargs: Any) -> Any:
    """:func:`dataclasses.dataclass` with the same arguments; see the module's docstring."""
    repr_ = kwargs.pop("repr", True)
    eq = kwargs.pop("eq", True)

    def wrap(klass: type) -> type:
        if kwargs.get("order"):  # the generated ordering needs the generated __eq__: nothing is shared
            return _made(klass, repr=repr_, eq=eq, **kwargs)
        made = _made(klass, repr=False, eq=False, **kwargs)
        return _share(made, repr_=repr_, eq=eq, frozen=kwargs.get("frozen", False),
                      unsafe_hash=kwargs.get("unsafe_hash", False))

    return wrap(cls) if cls is not None else wrap


if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    dataclass = _dataclass
