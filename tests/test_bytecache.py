"""bytecache: results kept beside the bytecode, reused only for the very text they came from.

The cache must never change an outcome: what a kept method gives is what the standard
library gives for the same text; a file that is corrupt, of another Python, too
big, a symbolic link or swapped for one is ignored (read) or replaced, never written
through; nothing is written where Python writes no bytecode; a second process compiles
nothing the first one kept; no configuration text is kept at all.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight import bytecache, fastclass
from gpu_preflight.bytecache import KeptFile, MethodCache, kept
from gpu_preflight.config import ConfigError
from gpu_preflight.config.loader import parse_toml

ROOT = Path(__file__).resolve().parents[1]
needs_create_fn = pytest.mark.skipif(bytecache.METHODS is None, reason="this Python builds dataclass methods "
                                                                       "without dataclasses._create_fn")

INIT = ("__init__", ["self", "a:_type_a", "b:_type_b=_dflt_b"],
        ["__dataclass_builtins_object__.__setattr__(self,'a',a)",
         "__dataclass_builtins_object__.__setattr__(self,'b',b)"])


def _locals() -> dict[str, Any]:
    return {"_type_a": int, "_type_b": str, "_dflt_b": "x", "__dataclass_builtins_object__": object}


def _init_of(make: Any) -> Any:
    """An __init__ made by ``make`` (ours or the standard library's), tried on a fresh object."""
    name, args, body = INIT
    fn = make(name, list(args), list(body), globals={"__name__": "m"}, locals=_locals(), return_type=None)
    obj = type("C", (), {})()
    fn(obj, 1)
    return fn.__name__, fn.__annotations__, fn.__defaults__, vars(obj), fn.__globals__["__name__"]


@needs_create_fn
def test_a_kept_method_is_the_standard_librarys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "kept.methods"
    first = MethodCache(KeptFile(str(path)))
    assert _init_of(first.create_fn) == _init_of(dataclasses._create_fn)  # type: ignore[attr-defined]
    assert first.store.added == 1
    first.store.save()
    assert path.read_bytes().startswith(bytecache._magic())

    def no_compile(text: str) -> Any:
        raise AssertionError("compiled again: " + text)

    monkeypatch.setattr(bytecache, "_compile", no_compile)
    again = MethodCache(KeptFile(str(path)))
    assert _init_of(again.create_fn) == _init_of(dataclasses._create_fn)  # type: ignore[attr-defined]
    assert again.store.added == 0


@pytest.mark.parametrize("content", [b"", b"\x00\x01", b"garbage" * 100, "magic+truncated", "other magic",
                                     "wrong shape"])
def test_a_bad_file_is_ignored(tmp_path: Path, content: bytes | str) -> None:
    import marshal

    magic = bytecache._magic()
    made = {"magic+truncated": magic + marshal.dumps({"t": marshal.dumps(1)})[:-3],
            "other magic": b"\x00\x00\r\n" + marshal.dumps({"t": marshal.dumps(1)}),
            "wrong shape": magic + marshal.dumps({"t": 1})}
    data = made[content] if isinstance(content, str) else content
    path = tmp_path / "kept.toml"
    path.write_bytes(data)
    store = KeptFile(str(path))
    assert store.get("t") is None
    assert kept(store, "t", lambda text: {"made": text}) == {"made": "t"}


def test_an_oversized_file_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "kept.toml"
    store = KeptFile(str(path))
    store.put("t", "x" * 1000)
    store.save()
    assert KeptFile(str(path)).get("t") == "x" * 1000
    monkeypatch.setattr(bytecache, "MAX_BYTES", 100)
    assert KeptFile(str(path)).get("t") is None


def test_links_are_neither_read_nor_written_through(tmp_path: Path) -> None:
    real = tmp_path / "real.toml"
    store = KeptFile(str(real))
    store.put("t", 1)
    store.save()
    victim = tmp_path / "victim"
    victim.write_text("precious")
    link = tmp_path / "kept.toml"
    link.symlink_to(real)
    assert KeptFile(str(link)).get("t") is None  # O_NOFOLLOW: a link is not our file
    link.unlink()
    link.symlink_to(victim)
    writer = KeptFile(str(link))
    writer.put("t", 2)
    writer.save()
    assert victim.read_text() == "precious"  # the rename replaced the link itself
    assert not link.is_symlink() and KeptFile(str(link)).get("t") == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.toml", "real.toml", "victim"]  # no temporary left


def test_a_file_others_may_change_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "kept.toml"
    store = KeptFile(str(path))
    store.put("t", 1)
    old = os.umask(0o002)  # a group-writable default: what we write is still ours alone
    try:
        store.save()
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644
    assert KeptFile(str(path)).get("t") == 1
    for mode in (0o664, 0o646):
        path.chmod(mode)
        assert KeptFile(str(path)).get("t") is None, oct(mode)


def test_nothing_is_written_where_there_is_no_directory(tmp_path: Path) -> None:
    store = KeptFile(str(tmp_path / "missing" / "kept.toml"))
    store.put("t", 1)
    store.save()  # no __pycache__ there: Python would keep no bytecode either
    assert not (tmp_path / "missing").exists()


def test_each_lookup_is_a_fresh_object_and_unkeepable_values_still_work(tmp_path: Path) -> None:
    store = KeptFile(str(tmp_path / "kept.toml"))
    first = kept(store, "t", lambda text: {"a": [1, 2]})
    first["a"].append(3)
    assert kept(store, "t", lambda text: pytest.fail("made again")) == {"a": [1, 2]}
    stamp = {"when": datetime(2026, 1, 1)}  # marshal writes no datetime: made every time, never kept
    assert store.put("d", stamp) is False
    assert kept(store, "d", lambda text: stamp) == stamp


def test_the_oldest_entries_go_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bytecache, "MAX_ENTRIES", 3)
    path = tmp_path / "kept.toml"
    store = KeptFile(str(path))
    for i in range(5):
        store.put(f"t{i}", i)
    store.save()
    again = KeptFile(str(path))
    assert [again.get(f"t{i}") for i in range(5)] == [None, None, 2, 3, 4]


def test_parse_toml_keeps_nothing(tmp_path: Path) -> None:
    """Configuration text is parsed every time and kept nowhere (a site file may hold a password)."""
    from gpu_preflight.config import loader

    assert not hasattr(loader, "_TOML_KEPT")
    text = '[gpu]\nexpected_count = 8\nwhen = 2026-01-01T00:00:00Z\n'
    assert parse_toml(text, "a.toml")["gpu"]["expected_count"] == 8
    assert parse_toml(text, "a.toml")["gpu"]["when"].year == 2026
    for _ in range(2):
        with pytest.raises(ConfigError) as err:
            parse_toml("[gpu]\nexpected_count = = 4\n", "c.toml")
        assert err.value.source == "c.toml" and err.value.line == 2


@needs_create_fn
def test_another_threads_class_is_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """While one of our classes is made, a class another thread makes gets the standard library's methods."""
    seen: list[str] = []

    class Recording(MethodCache):
        def create_fn(self, name: str, *args: Any, **kwargs: Any) -> Any:
            seen.append(name)
            return super().create_fn(name, *args, **kwargs)

    monkeypatch.setattr(fastclass, "METHODS", Recording(KeptFile(None)))
    theirs: list[Any] = []

    class Meta(type):
        def __setattr__(cls, name: str, value: Any) -> None:  # dataclasses sets the methods: we are mid-way
            if not theirs:
                def other() -> None:
                    theirs.append(dataclasses.dataclass(type("Theirs", (), {"__annotations__": {"x": "int"}})))

                worker = threading.Thread(target=other)
                worker.start()
                worker.join()
            super().__setattr__(name, value)

    ours: Any = fastclass.dataclass(Meta("Ours", (), {"__annotations__": {"a": "int"}}))  # type: ignore[arg-type]
    assert seen == ["__init__"]  # ours only: the other thread's __init__, __repr__, __eq__ went elsewhere
    assert ours(1).a == 1 and repr(theirs[0](2)) == "Theirs(x=2)"
    assert dataclasses._create_fn is not fastclass._made  # type: ignore[attr-defined]


def _run(code: str, env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                          timeout=120)
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


@needs_create_fn
def test_a_second_process_compiles_and_parses_nothing(tmp_path: Path) -> None:
    """End to end, as an installed package runs: the first run keeps methods, the next ones only read;
    TOML is parsed by every run and kept nowhere."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPYCACHEPREFIX=str(tmp_path / "pyc"), PYTHONPATH=str(ROOT / "src"))
    code = ("import json, sys, gpu_preflight.config as c, gpu_preflight.config.profiles as p\n"
            "from gpu_preflight.bytecache import METHODS\n"
            "p.shipped_profiles(); c.build_config()\n"
            "print(json.dumps({'methods': METHODS.store.added, 'tomllib': 'tomllib' in sys.modules}))\n")
    first = _run(code, env)
    assert first["methods"] > 20 and first["tomllib"]
    kept_files = sorted(p.name for p in (tmp_path / "pyc").rglob("bytecache.*") if not p.name.endswith(".pyc"))
    assert kept_files == [f"bytecache.{sys.implementation.cache_tag}.methods"]
    assert _run(code, env) == {"methods": 0, "tomllib": True}
    quiet = tmp_path / "quiet"
    _run(code, {**env, "PYTHONPYCACHEPREFIX": str(quiet), "PYTHONDONTWRITEBYTECODE": "1"})
    assert not quiet.exists() or not list(quiet.rglob("bytecache.*"))
