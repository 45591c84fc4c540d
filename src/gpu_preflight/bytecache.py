"""What a run derives from our own source code, compiled once per installation and kept beside the bytecode.

Why: a node check is a short process started on every node of every job, and part of its
start-up was work whose result only changes when our source does: on Python 3.11 and
3.12 the standard library compiles each dataclass's generated ``__init__`` (and a frozen
class's ``__setattr__``/``__delattr__``) from source text whenever the class's module is
imported (~170 compiles, 20-25 ms of a ~170 ms node check). Python already keeps the
compiled form of a module in ``__pycache__``; this keeps those results next to it, the
same way.

Only what is made from our own code is kept, never what is made from a user's files:
an earlier version also kept every TOML text it parsed (``bytecache.<tag>.toml``), and a
site's 0600 config with an MLflow password ended up in that world-readable file, for as
long as the installation lasted. Configuration is parsed every run (~6 ms), and a
``.toml`` file such a version left in our ``__pycache__`` is removed at start-up
(:func:`remove_stale`).

* one file per kind, ``__pycache__/bytecache.cpython-3XX.<kind>`` (the place
  :func:`importlib.util.cache_from_source` gives, so ``PYTHONPYCACHEPREFIX`` is honoured),
  starting with the interpreter's bytecode magic number and this module's format version:
  another Python's file, or one an older version wrote, is not read;
* each entry is keyed by the exact text it was made from (a method's source) and holds
  the result :mod:`marshal`-ed: a changed text is a new key, so an entry is only ever
  reused for the very text it came from, and every lookup unmarshals a fresh object (a
  caller that changes what it got changes nothing kept);
* a file is written only where Python writes bytecode (not under
  ``PYTHONDONTWRITEBYTECODE``, not where ``__pycache__`` is missing), once, at exit, by a
  process that made something new: a temporary created ``O_EXCL | O_NOFOLLOW`` and renamed
  over the file, so no link is followed and no reader sees half a file. It keeps at most
  :data:`MAX_ENTRIES` entries (the oldest are dropped); a file over :data:`MAX_BYTES` is
  not read;
* it is trusted as a ``.pyc`` beside it is (whoever can write one can write the other), and
  less: a file owned by another user than root or ourselves, or writable by group or others,
  is not read. Anything unreadable, truncated or of the wrong shape is ignored and the work
  is done as before. A cache changes no outcome, only the time.
"""

from __future__ import annotations

import atexit
import dataclasses
import marshal
import os
import stat
import sys
from collections.abc import Callable
from contextlib import suppress
from types import CodeType
from typing import Any

__all__ = ["MAX_BYTES", "MAX_ENTRIES", "METHODS", "KeptFile", "MethodCache", "kept", "kept_file", "remove_stale"]

MAX_BYTES = 8 << 20  # ~170 methods take ~350 kB
MAX_ENTRIES = 4096
_MISSING = dataclasses.MISSING
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


_FORMAT = b"gpu-preflight bytecache 1\n"  # raised when what is kept, or how it is made, changes


def _magic() -> bytes:
    """The interpreter's bytecode magic number, then this module's format."""
    from importlib.util import MAGIC_NUMBER

    return MAGIC_NUMBER + _FORMAT


class KeptFile:
    """Results by the text they were made from: read on first use, written at exit when something was added."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.added = 0  # entries made by this process (not found in the file)
        self._entries: dict[str, bytes] | None = None

    def get(self, text: str) -> Any | None:
        """The result kept for ``text`` (a fresh object), or None."""
        if self._entries is None:
            self._entries = self._load()
        found = self._entries.get(text)
        if found is None:
            return None
        try:
            return marshal.loads(found)  # noqa: S302 - our own file, trusted as the .pyc beside it
        except (EOFError, ValueError, TypeError):
            del self._entries[text]
            return None

    def put(self, text: str, value: Any) -> bool:
        """Keep ``value`` for ``text``; False where it cannot be kept (a type :mod:`marshal` does not write)."""
        try:
            data = marshal.dumps(value)
        except ValueError:
            return False
        if self._entries is None:
            self._entries = self._load()
        self._entries[text] = data
        self.added += 1
        if self.added == 1 and self.path and not sys.dont_write_bytecode:
            atexit.register(self.save)
        return True

    def _load(self) -> dict[str, bytes]:
        if not self.path:
            return {}
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return {}
        try:
            with os.fdopen(fd, "rb") as fh:
                st = os.fstat(fh.fileno())
                if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES or not _ours(st):
                    return {}
                data = fh.read(MAX_BYTES + 1)
        except OSError:
            return {}
        magic = _magic()
        if not data.startswith(magic):
            return {}
        try:
            loaded = marshal.loads(data[len(magic):])  # noqa: S302 - as above
        except (EOFError, ValueError, TypeError):
            return {}
        if not isinstance(loaded, dict) or not all(type(k) is str and type(v) is bytes for k, v in loaded.items()):
            return {}
        return loaded

    def save(self) -> None:
        """Write what this process added, with what it read, over the file (see the module's docstring)."""
        if not self.path or not self._entries or not self.added:
            return
        data = _magic() + marshal.dumps(dict(list(self._entries.items())[-MAX_ENTRIES:]))
        if len(data) > MAX_BYTES:
            return
        tmp = f"{self.path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        try:
            fd = os.open(tmp, _NEW_FILE, 0o644)
        except OSError:  # no __pycache__ there, read-only, not ours: Python keeps no bytecode there either
            return
        try:
            os.fchmod(fd, 0o644)  # whatever the umask: a group-writable file would not be read back
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, self.path)
        except OSError:
            with suppress(OSError):
                os.unlink(tmp)
        else:
            self.added = 0


def _ours(st: os.stat_result) -> bool:
    """A file root or this user wrote, that nobody else may change: one planted in a shared
    ``PYTHONPYCACHEPREFIX`` (under ``/tmp``, say) is not run."""
    return st.st_uid in (0, os.geteuid()) and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def kept_file(kind: str) -> KeptFile:
    """The kept results of one kind (``methods``); one without a file where Python keeps no bytecode."""
    if not __file__.endswith(".py"):
        return KeptFile(None)
    from importlib.util import cache_from_source

    try:
        pyc = cache_from_source(__file__)
    except NotImplementedError:  # sys.implementation.cache_tag is None: no bytecode cache at all
        return KeptFile(None)
    return KeptFile(f"{pyc.removesuffix('.pyc')}.{kind}")


def kept(store: KeptFile, text: str, make: Callable[[str], Any]) -> Any:
    """``make(text)``, or what was kept for that very text; the result is kept where it can be."""
    found = store.get(text)
    if found is None:
        found = make(text)
        store.put(text, found)
    return found


class MethodCache:
    """``dataclasses._create_fn`` (3.11, 3.12) with the compile looked up in a :class:`KeptFile` first."""

    def __init__(self, store: KeptFile) -> None:
        self.store = store

    def create_fn(self, name: str, args: list[str], body: list[str], *, globals: dict[str, Any] | None = None,
                  locals: dict[str, Any] | None = None, return_type: Any = _MISSING) -> Any:
        """What ``dataclasses._create_fn`` returns for the same arguments: the same text, executed
        in the same namespaces; only its compile may come from the store."""
        if locals is None:
            locals = {}
        return_annotation = ""
        if return_type is not _MISSING:
            locals["_return_type"] = return_type
            return_annotation = "->_return_type"
        body_text = "\n".join(f"  {b}" for b in body)
        text = f" def {name}({','.join(args)}){return_annotation}:\n{body_text}"
        text = f"def __create_fn__({', '.join(locals.keys())}):\n{text}\n return {name}"
        code = kept(self.store, text, _compile)
        ns: dict[str, Any] = {}
        exec(code if type(code) is CodeType else _compile(text), globals, ns)  # noqa: S102 - as dataclasses does
        return ns["__create_fn__"](**locals)


def _compile(text: str) -> CodeType:
    # dont_inherit: this module's ``from __future__ import annotations`` would make the
    # methods' annotations strings; the standard library's exec compiles without it
    return compile(text, "<string>", "exec", dont_inherit=True)


def _methods() -> MethodCache | None:
    """Python 3.11 and 3.12 build every generated method through ``dataclasses._create_fn``;
    3.13 builds them another way, and nothing is kept there."""
    if sys.version_info[:2] in ((3, 11), (3, 12)) and hasattr(dataclasses, "_create_fn"):
        return MethodCache(kept_file("methods"))
    return None


STALE_KINDS = ("toml",)  # kinds an older version kept that must not outlive it (they held users' text)


def _cache_dirs() -> set[str]:
    """Where this package's ``bytecache`` files are: beside the bytecode (``PYTHONPYCACHEPREFIX``
    honoured) and the package's own ``__pycache__``."""
    dirs = {os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__")}
    if __file__.endswith(".py"):
        from importlib.util import cache_from_source

        with suppress(NotImplementedError):
            dirs.add(os.path.dirname(cache_from_source(__file__)))
    return dirs


def remove_stale(dirs: set[str] | None = None) -> list[str]:
    """Remove ``bytecache.*.<kind>`` files of :data:`STALE_KINDS` from our cache directories;
    returns the paths removed.

    Only a regular file this user owns is removed (``lstat`` on the name, relative to the
    directory opened without following a link): a symbolic link or another user's file
    planted there is left alone, and anything that cannot be read or removed (a read-only
    installation) is skipped. Called once per start-up: one listing of ``__pycache__``.
    """
    removed = []
    suffixes = tuple(f".{kind}" for kind in STALE_KINDS)
    for path in sorted(_cache_dirs() if dirs is None else dirs):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            for name in os.listdir(fd):
                if not (name.startswith("bytecache.") and name.endswith(suffixes)):
                    continue
                with suppress(OSError):
                    st = os.lstat(name, dir_fd=fd)
                    if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
                        os.unlink(name, dir_fd=fd)
                        removed.append(os.path.join(path, name))
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


METHODS = _methods()
remove_stale()
