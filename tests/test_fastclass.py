"""fastclass.dataclass behaves as dataclasses.dataclass: the same class built by both, compared.

Each case is a class body (annotations, defaults, methods) and decorator arguments; it is
made once by the standard library and once by ours, and instances of both must agree on
repr, ==, != against each other's kind of values, hashability and hash equality, fields(),
replace(), asdict(), __match_args__ and frozen assignment. The last test keeps the package
on the one decorator (a plain ``from dataclasses import dataclass`` would quietly bring the
per-class compile back).
"""

from __future__ import annotations

import ast
import dataclasses
import math
import re
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight import bytecache, fastclass

SRC = Path(__file__).resolve().parents[1] / "src" / "gpu_preflight"


def _make(maker: Any, name: str, body: dict[str, Any], bases: tuple[type, ...] = (), **kwargs: Any) -> Any:
    ns = dict(body)
    return maker(**kwargs)(type(name, bases, ns))


CASES: dict[str, tuple[dict[str, Any], dict[str, Any], list[tuple[Any, ...]]]] = {
    # name: (class body, decorator arguments, argument tuples for instances)
    "mutable": ({"__annotations__": {"a": "int", "b": "str"}, "b": "x"}, {}, [(1,), (1, "x"), (2, "y")]),
    "frozen": ({"__annotations__": {"a": "int", "b": "str"}, "b": "x"}, {"frozen": True}, [(1,), (1, "x"), (2, "y")]),
    "frozen slots": ({"__annotations__": {"a": "int", "b": "float"}}, {"frozen": True, "slots": True},
                     [(1, 0.5), (1, 0.5), (1, math.nan)]),
    "mutable slots": ({"__annotations__": {"a": "int"}}, {"slots": True}, [(1,), (1,), (3,)]),
    "no fields": ({}, {"frozen": True}, [(), ()]),
    "one field NaN": ({"__annotations__": {"v": "float"}}, {"frozen": True}, [(math.nan,), (1.0,)]),
    "compare/repr/hash off": ({"__annotations__": {"a": "int", "b": "int", "c": "int"},
                               "b": dataclasses.field(default=0, compare=False, repr=False),
                               "c": dataclasses.field(default=0, hash=False)},
                              {"frozen": True}, [(1, 2, 3), (1, 9, 3), (1, 2, 4), (2, 2, 3)]),
    "unsafe hash": ({"__annotations__": {"a": "int"}}, {"unsafe_hash": True}, [(1,), (1,), (2,)]),
    "repr off": ({"__annotations__": {"a": "int"}}, {"repr": False}, [(1,), (2,)]),
    "eq off": ({"__annotations__": {"a": "int"}}, {"eq": False, "frozen": True}, [(1,), (1,)]),
    "body repr and eq": ({"__annotations__": {"a": "int"}, "__repr__": lambda self: "custom",
                          "__eq__": lambda self, other: True}, {"frozen": True}, [(1,), (2,)]),
    "body hash": ({"__annotations__": {"a": "int"}, "__hash__": lambda self: 7}, {}, [(1,), (2,)]),
    "order": ({"__annotations__": {"a": "int"}}, {"order": True}, [(1,), (2,)]),
}


def _outcome(fn: Any) -> Any:
    try:
        return ("value", fn())
    except Exception as exc:
        return ("raises", type(exc))


def _shown(obj: object, cls: type) -> str:
    """repr with the class name and object addresses taken out (two classes, two heaps)."""
    return re.sub(r" at 0x[0-9a-f]+", "", repr(obj)).replace(cls.__qualname__, "C")


def _behaviour(cls: type, args: list[tuple[Any, ...]]) -> dict[str, Any]:
    objs = [cls(*a) for a in args]
    shared = [math.nan if isinstance(a, float) and math.isnan(a) else a for a in args]  # one NaN object
    same = [cls(*a) for a in shared]
    out: dict[str, Any] = {
        "repr": [_shown(o, cls) for o in objs],
        "eq": [[o == p for p in objs] for o in objs],
        "ne": [[o != p for p in objs] for o in objs],
        "eq other": [o == object() for o in objs],
        "eq same NaN object": [o == p for o, p in zip(same, same, strict=True)],
        "hash": _outcome(lambda: [[hash(o) == hash(p) for p in objs] for o in objs]),
        "hash is None": cls.__hash__ is None,  # type: ignore[comparison-overlap]
        "fields": [(f.name, f.compare, f.repr, f.hash) for f in dataclasses.fields(cls)],
        "match args": getattr(cls, "__match_args__", None),
        "init annotations": cls.__init__.__annotations__,  # type: ignore[misc]
        "asdict": [dataclasses.asdict(o) for o in objs],
        "replace": [_shown(dataclasses.replace(o), cls) for o in objs],
    }
    if dataclasses.fields(cls):
        name = dataclasses.fields(cls)[0].name
        out["setattr"] = _outcome(lambda: setattr(objs[0], name, 5))
    if len(objs) > 1 and cls.__hash__ is not None and "order" not in str(cls):  # type: ignore[comparison-overlap]
        out["set size"] = _outcome(lambda: len(set(objs)))
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_behaviour_as_the_standard_library(name: str) -> None:
    body, kwargs, args = CASES[name]
    ours = _make(fastclass.dataclass, "C", body, **kwargs)
    theirs = _make(dataclasses.dataclass, "C", body, **kwargs)
    assert _behaviour(ours, args) == _behaviour(theirs, args)


def test_subclass_and_cross_class_equality() -> None:
    made: dict[str, tuple[Any, ...]] = {}
    maker: Any
    for key, maker in (("ours", fastclass.dataclass), ("theirs", dataclasses.dataclass)):
        base: Any = maker(frozen=True)(type("Base", (), {"__annotations__": {"a": "int"}}))
        sub: Any = maker(frozen=True)(type("Sub", (base,), {"__annotations__": {"b": "int"}, "b": 0}))
        made[key] = (base(1) == sub(1, 0), sub(1, 0) == sub(1, 0), sub(1, 2) == sub(1, 3), repr(sub(1, 2)),
                     hash(sub(1, 2)) == hash(sub(1, 2)), [f.name for f in dataclasses.fields(sub)])
    assert made["ours"] == made["theirs"]


def test_recursive_repr_stops() -> None:
    cls: Any = fastclass.dataclass(type("Node", (), {"__annotations__": {"child": "object"}}))
    node = cls(None)
    node.child = node
    assert repr(node) == "Node(child=...)"


def test_shared_methods_compile_nothing_per_class(monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of the module: fewer generated functions per class than the standard library."""
    if not hasattr(dataclasses, "_create_fn") or bytecache.METHODS is None:  # Python 3.13 builds them another way
        pytest.skip("this Python's dataclasses has no _create_fn to count calls of")
    generated: list[str] = []
    original = dataclasses._create_fn  # type: ignore[attr-defined]

    def counting(name: str, *args: Any, **kwargs: Any) -> Any:
        generated.append(name)
        return original(name, *args, **kwargs)

    class Counting(bytecache.MethodCache):
        def create_fn(self, name: str, *args: Any, **kwargs: Any) -> Any:
            generated.append(name)
            return super().create_fn(name, *args, **kwargs)

    body = {"__annotations__": {"a": "int", "b": "int"}}
    monkeypatch.setattr(dataclasses, "_create_fn", counting)
    _make(dataclasses.dataclass, "C", body, frozen=True)
    theirs = sorted(generated)
    generated.clear()
    monkeypatch.setattr(fastclass, "METHODS", Counting(bytecache.KeptFile(None)))
    _make(fastclass.dataclass, "C", body, frozen=True)
    ours = sorted(generated)
    assert {"__repr__", "__eq__", "__hash__"} <= set(theirs)
    assert not {"__repr__", "__eq__", "__hash__"} & set(ours)
    assert ours == sorted(set(theirs) - {"__repr__", "__eq__", "__hash__"})
    assert ours == ["__delattr__", "__init__", "__setattr__"]


def test_the_package_uses_the_shared_decorator() -> None:
    """Every dataclass under src/ comes from fastclass (fastclass itself excepted)."""
    wrong = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "fastclass.py" and path.parent == SRC:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom | ast.Attribute):
                continue
            imported = isinstance(node, ast.ImportFrom) and node.module == "dataclasses" and \
                any(a.name == "dataclass" for a in node.names)
            named = isinstance(node, ast.Attribute) and node.attr == "dataclass" and \
                isinstance(node.value, ast.Name) and node.value.id == "dataclasses"
            if imported or named:
                wrong.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not wrong, "use `from gpu_preflight.fastclass import dataclass` (relative) instead:\n" + "\n".join(wrong)


def test_every_dataclass_says_what_it_holds() -> None:
    """A docstring on every dataclass under src/: the house's rule, and the standard library
    makes one from ``inspect.signature`` (~0.1 ms a class at import) for a class without."""
    bare = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and not ast.get_docstring(node) and any(
                    "dataclass" in ast.unparse(d) for d in node.decorator_list):
                bare.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name}")
    assert not bare, "give these dataclasses a docstring:\n" + "\n".join(bare)
