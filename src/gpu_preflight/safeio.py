"""Writing files where another user may have been first: no symlink followed, nothing half-written.

gpu-preflight often runs as root (a Slurm prolog, a DaemonSet) and writes into paths a user
chose (``--report-dir /tmp/reports``). A fixed temporary name (``report.json.tmp``) in a
directory someone else can write is an attack: they create it first as a symbolic link to
``/etc/shadow`` and the root run writes through it. So every file this tool writes goes
through here:

- directories are walked one component at a time from an open descriptor with
  ``O_DIRECTORY | O_NOFOLLOW``; a component that is a symbolic link is followed only when
  root or the running user owns it (no one else can have planted it: the rule of the
  kernel's ``fs.protected_symlinks``), and directories are created with an explicit mode;
- the directory that receives files must not be owned by another user *and* writable by
  others (``/tmp`` itself, or a directory a stranger made world-writable), because its
  contents could be swapped under us; the error says so in one line;
- a file is written to a temporary with a random name, created ``O_EXCL | O_NOFOLLOW``
  relative to the directory's descriptor, flushed and fsynced, then renamed over the
  target with :func:`os.replace`. A rename replaces a symlink or hard link at the target
  instead of writing through it, and a reader never sees half a file. On any error
  (disk full, read-only filesystem, a directory where the file should be) the temporary
  is removed: nothing partial is left behind;
- a program stopped by SIGINT or SIGTERM removes them too: every temporary is known from
  before it is created until it is renamed or removed (:func:`staged_files`), a copy of its
  directory's descriptor kept with it, and :mod:`gpu_preflight.interrupts` removes those left
  by any thread before the program exits; a batch's renames are never cut in half by it.

Writers are context managers that yield an open file, so a large report can be streamed
(``json.dump(report, fh)``) rather than built as one string first.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from .interrupts import at_stop, held

__all__ = ["SQLITE_MAX_PATH", "Batch", "SafeDir", "UnsafePathError", "atomic_writer", "describe_error",
           "length_problem", "open_dir", "prepare_file", "staged_files", "write_bytes", "write_text"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_MAX_LINKS = 40  # as the kernel's MAXSYMLINKS
LOCK_FILE = ".gpu-preflight.lock"  # only where a directory's own descriptor cannot be locked (NFS)
_NO_DIRECTORY_LOCK = (errno.EBADF, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL)


class UnsafePathError(OSError):
    """A path we refuse to write through (another user's symlink, a stranger's shared directory)."""


def describe_error(exc: BaseException, about: str | Path | None = None) -> str:
    """One line for an error from this module or the OS: what failed and where (unless it is
    ``about``, which the caller already names), no traceback."""
    if isinstance(exc, OSError) and exc.strerror:
        named = exc.filename is not None and str(exc.filename) != (str(about) if about is not None else None)
        where = f": {exc.filename}" if named else ""
        return f"{exc.strerror}{where}"
    return str(exc) or type(exc).__name__


def _trusted_owner(uid: int) -> bool:
    return uid in (0, os.geteuid())


def _check_name(name: str) -> None:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"{name!r} is not a file name")


class SafeDir:
    """An open directory: files and subdirectories are made relative to its descriptor.

    Holding the descriptor means a rename or symlink swap of the path after it was opened
    cannot redirect what is written.
    """

    def __init__(self, fd: int, path: str) -> None:
        self.fd = fd
        self.path = path
        self.lock_fd = -1  # LOCK_FILE's descriptor, where the directory's own cannot be locked

    def __enter__(self) -> SafeDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the directory, which releases :meth:`lock`."""
        for fd in (self.lock_fd, self.fd):
            if fd >= 0:
                os.close(fd)
        self.fd = self.lock_fd = -1

    def lock(self, wait_s: float, *, setting: str = "") -> None:
        """Hold this directory exclusively until :meth:`close`, waiting at most ``wait_s`` for another
        holder (another run writing the same report directory); raises ``OSError`` (``EWOULDBLOCK``)
        naming ``setting``, the wait's setting, when it is still held after that.

        ``flock`` on the open directory: it leaves no file behind, and the kernel releases it when
        the holder exits, however it exits. A filesystem that cannot lock a directory opened
        read-only (NFS emulates ``flock`` with byte-range locks: ``EBADF``) gets :data:`LOCK_FILE`
        in the directory, created without following a link, locked the same way.
        """
        target = self.fd
        deadline = time.monotonic() + wait_s
        pause = 0.002
        while True:
            try:
                fcntl.flock(target, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            except OSError as exc:
                if target != self.fd or exc.errno not in _NO_DIRECTORY_LOCK:
                    raise type(exc)(exc.errno, exc.strerror, self.path) from None
                self.lock_fd = target = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                                                0o644, dir_fd=self.fd)
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                named = f" ({setting})" if setting else ""
                raise BlockingIOError(errno.EWOULDBLOCK, f"another run is writing this directory; gave up after "
                                                         f"{wait_s:g} s{named}", self.path)
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.1)

    def _shown(self, name: str) -> str:
        return os.path.join(self.path, name)

    def subdir(self, relative: str | Path, *, create: bool = True, mode: int = 0o755) -> SafeDir:
        """The directory ``relative`` below this one (made with ``mode`` where missing), checked."""
        shown = self._shown(str(relative))
        fd = _descend(os.dup(self.fd), str(relative), shown, create=create, mode=mode, hops=[0])
        return _checked(fd, shown)

    def exists(self, name: str) -> os.stat_result | None:
        """``lstat`` of an entry, or None when there is none."""
        _check_name(name)
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    @contextmanager
    def writer(self, name: str, *, binary: bool = False, mode: int = 0o644) -> Iterator[IO[Any]]:
        """An open file whose content replaces ``name`` atomically when the block ends without error."""
        with self.batch() as batch, batch.writer(name, binary=binary, mode=mode) as fh:
            yield fh

    def write_text(self, name: str, text: str, *, mode: int = 0o644) -> None:
        with self.writer(name, mode=mode) as fh:
            fh.write(text)

    def write_bytes(self, name: str, data: bytes, *, mode: int = 0o644) -> None:
        with self.writer(name, binary=True, mode=mode) as fh:
            fh.write(data)

    def copy_in(self, relative: str | Path, source: str | Path, *, mode: int = 0o644) -> Path:
        """Copy the regular file ``source`` to ``relative`` below this directory (made as needed)."""
        rel = Path(relative)
        with open(source, "rb") as src:
            if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
                raise OSError(errno.EINVAL, "Not a regular file", str(source))
            if rel.parent == Path("."):
                with self.writer(rel.name, binary=True, mode=mode) as fh:
                    shutil.copyfileobj(src, fh)
            else:
                with self.subdir(rel.parent) as sub, sub.writer(rel.name, binary=True, mode=mode) as fh:
                    shutil.copyfileobj(src, fh)
        return Path(self.path, rel)

    def batch(self) -> Batch:
        """Several files written in full first, then renamed into place together (see :class:`Batch`)."""
        return Batch(self)


class Batch:
    """Files staged under temporary names and renamed into place only when all were written.

    ``report.html`` and ``report.json`` go together: a disk that fills while the second is
    written leaves the first as it was, not a new HTML beside an old report. Before any
    rename every target is checked not to be a directory, so that case changes nothing
    either. Used as a context manager: an exception inside discards every staged file.
    """

    def __init__(self, directory: SafeDir) -> None:
        self.dir = directory
        self.staged: list[tuple[str, str]] = []  # (temporary name, final name)

    def __enter__(self) -> Batch:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()

    @contextmanager
    def writer(self, name: str, *, binary: bool = False, mode: int = 0o644) -> Iterator[IO[Any]]:
        """Write one file under a fresh temporary name; it is renamed at :meth:`commit`."""
        _check_name(name)
        fd, tmp = self._create(name, mode)
        try:
            with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else "utf-8") as fh:
                yield fh
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:
            self._unlink(tmp)
            raise
        self.staged.append((tmp, name))

    def _create(self, name: str, mode: int) -> tuple[int, str]:
        import secrets  # hashlib/OpenSSL: paid only by a run that writes

        for _ in range(100):
            tmp = f".{name}.{secrets.token_hex(6)}.tmp"
            _staged.add(self.dir.fd, tmp)  # known before it exists: a signal between the two leaves nothing
            try:
                return os.open(tmp, _NEW_FILE_FLAGS, mode, dir_fd=self.dir.fd), tmp
            except FileExistsError:
                _staged.forget(self.dir.fd, tmp)  # not ours
                continue
            except BaseException:
                self._unlink(tmp)
                raise
        raise FileExistsError(errno.EEXIST, "no free temporary name", self.dir._shown(name))

    def commit(self) -> None:
        try:
            for _, name in self.staged:
                st = self.dir.exists(name)
                if st is not None and stat.S_ISDIR(st.st_mode):
                    raise IsADirectoryError(errno.EISDIR, "Is a directory", self.dir._shown(name))
            with held():  # all renamed or, with the error, none: a signal waits for the end
                while self.staged:
                    tmp, name = self.staged[0]
                    os.replace(tmp, name, src_dir_fd=self.dir.fd, dst_dir_fd=self.dir.fd)
                    _staged.forget(self.dir.fd, tmp)
                    self.staged.pop(0)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        for tmp, _ in self.staged:
            self._unlink(tmp)
        self.staged.clear()

    def _unlink(self, tmp: str) -> None:
        with suppress(OSError):
            os.unlink(tmp, dir_fd=self.dir.fd)
        _staged.forget(self.dir.fd, tmp)


class _Staged:
    """Every temporary this process has made and not yet renamed or removed, each with its own
    copy of its directory's descriptor (the directory may be closed by then): what a signal's
    stop removes, whichever thread was writing it."""

    def __init__(self) -> None:
        self.files: dict[tuple[int, str], int] = {}  # (directory fd, name) -> our copy of that fd
        self.registered = False

    def add(self, dir_fd: int, name: str) -> None:
        if not self.registered:
            self.registered = True
            at_stop(self.sweep)
        self.files[(dir_fd, name)] = os.dup(dir_fd)

    def forget(self, dir_fd: int, name: str) -> None:
        kept = self.files.pop((dir_fd, name), None)
        if kept is not None:
            os.close(kept)

    def sweep(self) -> None:
        for key in list(self.files):
            kept = self.files.pop(key, None)
            if kept is None:
                continue
            with suppress(OSError):
                os.unlink(key[1], dir_fd=kept)
            os.close(kept)

    def names(self) -> list[str]:
        return sorted(name for _, name in self.files)


_staged = _Staged()


def staged_files() -> list[str]:
    """Names of the temporaries this process has staged and not yet renamed or removed."""
    return _staged.names()


def _descend(fd: int, relative: str, shown: str, *, create: bool, mode: int, hops: list[int]) -> int:
    """Walk ``relative`` from the directory ``fd`` (consumed); returns the final directory's descriptor."""
    try:
        for part in relative.split("/"):
            if part in ("", "."):
                continue
            fd = _step(fd, part, shown, create=create, mode=mode, hops=hops)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _step(fd: int, part: str, shown: str, *, create: bool, mode: int, hops: list[int]) -> int:
    """Open one component below ``fd`` (closing ``fd``); symlinks only from trusted owners."""
    for attempt in range(2):
        try:
            nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            if not create or attempt:
                raise FileNotFoundError(errno.ENOENT, "No such file or directory", shown) from None
            try:
                os.mkdir(part, mode, dir_fd=fd)
            except FileExistsError:
                pass
            except OSError as exc:
                raise type(exc)(exc.errno, exc.strerror, shown) from None
            continue
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise type(exc)(exc.errno, exc.strerror, shown) from None
            st = os.stat(part, dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISLNK(st.st_mode):
                raise NotADirectoryError(errno.ENOTDIR, "Not a directory", shown) from None
            if not _trusted_owner(st.st_uid):
                raise UnsafePathError(
                    errno.EPERM, f"refusing to follow a symbolic link owned by uid {st.st_uid} "
                                 f"(only root's or our own are followed)", shown) from None
            hops[0] += 1
            if hops[0] > _MAX_LINKS:
                raise OSError(errno.ELOOP, "Too many levels of symbolic links", shown) from None
            target = os.readlink(part, dir_fd=fd)
            start = os.open("/", _DIR_FLAGS) if target.startswith("/") else os.dup(fd)
            nfd = _descend(start, target, shown, create=False, mode=mode, hops=hops)
        os.close(fd)
        return nfd
    raise AssertionError("unreachable")


def _checked(fd: int, shown: str) -> SafeDir:
    """A directory we may write into: not another user's that others can write too."""
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() and st.st_mode & stat.S_IWOTH:
        os.close(fd)
        raise UnsafePathError(errno.EPERM, f"refusing to write into a directory owned by uid {st.st_uid} that "
                                           f"other users can write (use a directory you own)", shown)
    return SafeDir(fd, shown)


def open_dir(path: str | Path, *, create: bool = True, mode: int = 0o755) -> SafeDir:
    """Open (and make, with ``mode``, where missing) the directory ``path`` for writing into."""
    text = os.fspath(path)
    if not text:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", text)
    start = os.open("/" if text.startswith("/") else ".", _DIR_FLAGS)
    fd = _descend(start, text, text, create=create, mode=mode, hops=[0])
    return _checked(fd, text)


def _split(path: str | Path) -> tuple[str, str]:
    target = Path(path)
    _check_name(target.name)
    return str(target.parent), target.name


@contextmanager
def atomic_writer(path: str | Path, *, binary: bool = False, mode: int = 0o644, dir_mode: int = 0o755
                  ) -> Iterator[IO[Any]]:
    """An open file whose content replaces ``path`` atomically; parent directories made with ``dir_mode``."""
    parent, name = _split(path)
    with open_dir(parent, mode=dir_mode) as directory, directory.writer(name, binary=binary, mode=mode) as fh:
        yield fh


def write_text(path: str | Path, text: str, *, mode: int = 0o644, dir_mode: int = 0o755) -> Path:
    with atomic_writer(path, mode=mode, dir_mode=dir_mode) as fh:
        fh.write(text)
    return Path(path)


def write_bytes(path: str | Path, data: bytes, *, mode: int = 0o644, dir_mode: int = 0o755) -> Path:
    with atomic_writer(path, binary=True, mode=mode, dir_mode=dir_mode) as fh:
        fh.write(data)
    return Path(path)


SQLITE_MAX_PATH = 512 - len("-journal")  # SQLite opens paths of at most 512 bytes, its journal's too


def length_problem(path: str | Path, *, limit: int | None = None) -> str | None:
    """Why ``path`` is too long to be opened by name, or None: the whole path (made absolute,
    as a library that opens it by name sees it) over ``limit`` bytes (default PATH_MAX), or
    one component over NAME_MAX. Checked before a run, so the answer is a usage error and
    not a crash after the verdict."""
    whole = os.fsencode(os.path.abspath(os.fspath(path)))
    most = limit if limit is not None else _pathconf("PC_PATH_MAX", 4096) - 1
    if len(whole) > most:
        return f"the path is {len(whole)} bytes long; at most {most} can be opened"
    name_max = _pathconf("PC_NAME_MAX", 255)
    longest = max(whole.split(b"/"), key=len)
    if len(longest) > name_max:
        return f"a path component is {len(longest)} bytes long; at most {name_max} can be opened"
    return None


def _pathconf(name: str, default: int) -> int:
    try:
        return int(os.pathconf("/", name))
    except (OSError, ValueError):
        return default


def prepare_file(path: str | Path, *, create: bool = True, dir_mode: int = 0o700) -> Path:
    """Make ``path``'s directory safely and check that ``path`` is absent or a regular file.

    For files another library opens by name (SQLite's database and its journal beside it):
    the directory passes the same checks as any we write into, so nobody else can plant a
    link there, and a FIFO or device named as the file is refused before it blocks or
    streams forever.
    """
    parent, name = _split(path)
    with open_dir(parent, create=create, mode=dir_mode) as directory:
        st = directory.exists(name)
        if st is not None and stat.S_ISLNK(st.st_mode):
            if not _trusted_owner(st.st_uid):
                raise UnsafePathError(errno.EPERM, f"refusing to follow a symbolic link owned by uid {st.st_uid}",
                                      str(path))
            st = os.stat(name, dir_fd=directory.fd)
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "Not a regular file", str(path))
    return Path(path)
