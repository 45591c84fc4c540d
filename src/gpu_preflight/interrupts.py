"""SIGINT and SIGTERM end the program with one line and exit 128 + the signal's number, leaving none of our temporaries.

Python's defaults do neither. SIGTERM (a Slurm job's end, a pod's deletion, torchrun stopping
the rest of a node's workers) kills the process where it stands: a report being written left
its ``.report.json.<hex>.tmp`` behind. SIGINT raises ``KeyboardInterrupt`` wherever the main
thread happens to be: a traceback of some fifty lines, and where a probe's crash is caught as
its error, Ctrl-C became an ERROR finding and a verdict's exit code.

The program (:func:`install`, called by :func:`gpu_preflight.cli.main.program` only; a caller's
own process keeps its handlers) ends an interrupted run in one of two ways, both through
:func:`stop`, which runs once:

- in order, most of the time: the handler raises :class:`Interrupted` (a ``BaseException``,
  so an ``except Exception`` passes it on) in the main thread; the ``with`` and ``finally``
  blocks on the way out run (a staged file is removed, self-launched workers are killed,
  temporary directories go) and the program's entry point calls :func:`stop`;
- by force, when the main thread does not get there within :data:`GRACE_S`: a watcher thread
  is woken by the signal itself (:func:`signal.set_wakeup_fd`: the interpreter writes the
  signal's number even while the main thread is blocked in C, in a collective or a hung NVML
  call, where no Python handler can run) and calls :func:`stop` from its own thread.

:func:`stop` lets blocks under :func:`held` finish (the renames that put ``report.html`` and
``report.json`` in place together are never cut in half), runs what :func:`at_stop`
registered (every thread's staged files, the workers), prints one line and exits with
:func:`exit_code`. A second signal while this happens changes nothing. ``serve`` stops on
SIGTERM as its normal way out: while its own handler is installed, the watcher ignores the
signals it handles.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from sys import UnraisableHookArgs

__all__ = ["GRACE_S", "HOLD_S", "Interrupted", "at_stop", "exit_code", "exiting", "held", "install", "requested",
           "settle",
           "stop"]

CAUGHT = (signal.SIGINT, signal.SIGTERM)
GRACE_S = 3.0  # how long the main thread has to unwind before the watcher ends the process itself
HOLD_S = 5.0  # how long a stop waits for blocks under held() to finish (a rename on a hung filesystem)


def exit_code(signum: int) -> int:
    """The exit code of a run ended by signal ``signum``: 128 + its number (130 SIGINT, 143
    SIGTERM), what a shell reports for a command the signal killed, so a wrapper that already
    tells "killed by SIGTERM" from a verdict (0-3) needs no new case."""
    return 128 + int(signum)


class Interrupted(BaseException):
    """Raised in the main thread by SIGINT or SIGTERM: the run is being stopped."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = int(signum)

    @property
    def code(self) -> int:
        return exit_code(self.signum)


class _Depth(threading.local):
    """How many :func:`held` blocks this thread is inside."""

    depth = 0


class _State:
    """What the handler, the watcher and :func:`held` share (one per process)."""

    def __init__(self) -> None:
        self.pid = 0  # the process install() ran in (0: not installed)
        self.requested: int | None = None  # the first signal
        self.raised = False  # Interrupted was raised in the main thread
        self.settled = False  # the program is leaving: no more raising
        self.holding = 0  # blocks under held(), every thread
        self.cond = threading.Condition()
        self.local = _Depth()
        self.cleanups: dict[int, Callable[[], object]] = {}
        self.next_id = 0
        self.stopping = threading.Lock()


_state = _State()


def install() -> None:
    """Catch SIGINT and SIGTERM for the program (each where it is not ignored: ``nohup`` and a
    shell's background jobs keep theirs), and start the watcher. Main thread only."""
    st = _state
    if st.pid == os.getpid():
        return
    caught = [s for s in CAUGHT if signal.getsignal(s) in (signal.SIG_DFL, signal.default_int_handler)]
    if not caught:
        return
    read_fd, write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    os.set_blocking(read_fd, True)
    st.pid = os.getpid()
    for signum in caught:
        signal.signal(signum, _handler)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    sys.unraisablehook = _unraisable_hook(sys.unraisablehook)
    os.register_at_fork(after_in_child=_forget)
    threading.Thread(target=_watch, args=(read_fd,), name="gpu-preflight-signals", daemon=True).start()


def _unraisable_hook(previous: Callable[[UnraisableHookArgs], object]) -> Callable[[UnraisableHookArgs], object]:
    """The interpreter's report of an exception nothing could catch, minus ours.

    Why: the handler runs wherever the main thread is, and that can be code whose exceptions
    the interpreter swallows and prints, a finaliser or a weak reference's callback (importlib
    drops a module lock through one: a signal at an import's end printed seven lines of
    traceback ending ``Interrupted: 15``, then the run went on). Swallowed, our exception is
    owed again: the next point that may raise (a :func:`held` block's end) raises it, else the
    program's end or the watcher stops the run, with the one line and the signal's code."""
    def hook(unraisable: UnraisableHookArgs) -> None:
        if isinstance(unraisable.exc_value, Interrupted):
            _state.raised = False
            return
        previous(unraisable)
    return hook


def _forget() -> None:
    """In a child forked without exec: the parent's handling is not the child's (its wakeup pipe
    would tell the parent's watcher of the child's signals)."""
    if _state.pid == 0:
        return
    for signum in CAUGHT:
        if signal.getsignal(signum) is _handler:
            signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    _state.pid = 0


def _handler(signum: int, _frame: FrameType | None) -> None:
    _request(signum)
    _raise_pending()


def _request(signum: int) -> None:
    with _state.cond:
        if _state.requested is None:
            _state.requested = int(signum)


def requested() -> int | None:
    """The signal that asked the program to stop, if one did."""
    return _state.requested


def _raise_pending() -> None:
    """Raise :class:`Interrupted` here if a signal asked for it and nothing defers it: main thread,
    outside :func:`held`, not yet raised, the program not leaving."""
    st = _state
    if (st.requested is None or st.raised or st.settled or st.local.depth
            or threading.current_thread() is not threading.main_thread()):
        return
    st.raised = True
    raise Interrupted(st.requested)


@contextmanager
def held() -> Iterator[None]:
    """A block a signal does not cut: in the main thread it is raised when the block ends, and a
    forced stop waits (at most :data:`HOLD_S`) for every thread's blocks. For short steps that
    must happen together, such as renaming a batch of files into place."""
    st = _state
    with st.cond:
        st.holding += 1
    st.local.depth = st.local.depth + 1
    try:
        yield
    finally:
        st.local.depth -= 1
        with st.cond:
            st.holding -= 1
            st.cond.notify_all()
    _raise_pending()


def at_stop(cleanup: Callable[[], object]) -> Callable[[], None]:
    """Run ``cleanup`` if the program is stopped by a signal (last registered, first run); returns
    the function that unregisters it. Cleanups must be quick and must not print."""
    st = _state
    with st.cond:
        key = st.next_id
        st.next_id += 1
        st.cleanups[key] = cleanup
    return lambda: _drop(key)


def _drop(key: int) -> None:
    with _state.cond:
        _state.cleanups.pop(key, None)


def settle() -> None:
    """The program is leaving with its verdict: a signal from here on no longer raises (a hung
    exit is still ended by the watcher)."""
    _state.settled = True


def exiting() -> None:
    """The verdict is in and the interpreter is about to finish: ignore SIGINT and SIGTERM from here.

    Why: as it finalizes, CPython puts every Python-level handler back to the default, so a
    SIGTERM in the last milliseconds of a run that has finished (its report written, its line
    printed) killed it with no line and no verdict code (exit -15). All our threads are daemons and
    the exit runs no job of ours that could hang, so nothing is left for a signal to stop; a
    signal that came before this call is still honoured by the caller (:func:`requested`)."""
    if _state.pid != os.getpid():
        return
    for signum in CAUGHT:
        if signal.getsignal(signum) is _handler:
            signal.signal(signum, signal.SIG_IGN)


def stop(signum: int, *, flush: bool = True) -> NoReturn:
    """End the process for signal ``signum``: let held blocks finish, run the cleanups, print one
    line, exit :func:`exit_code`. Once: a second caller waits here until the process is gone.

    ``flush``: write out what the program had buffered for stderr first (the main thread's
    way out); the watcher does not, since the main thread may be holding that stream, and it
    waits for a stop already under way only so long: one stuck in a cleanup or on a blocked
    stderr ends without it."""
    st = _state
    if not st.stopping.acquire(timeout=-1 if flush else 2 * HOLD_S):
        _leave(signum)
    st.settled = True
    deadline = time.monotonic() + HOLD_S
    with st.cond:
        while st.holding > st.local.depth and time.monotonic() < deadline:
            st.cond.wait(max(0.0, deadline - time.monotonic()))
        cleanups = list(st.cleanups.values())[::-1]
        st.cleanups.clear()
    for cleanup in cleanups:
        with suppress(BaseException):  # one failed cleanup must keep neither the others nor the exit from running
            cleanup()
    if flush:
        with suppress(OSError, ValueError, AttributeError):
            sys.stderr.flush()
    _leave(signum)


def _leave(signum: int) -> NoReturn:
    """The one line, then the exit: at once, nothing more run or waited for."""
    code = exit_code(signum)
    with suppress(OSError):
        os.write(2, f"gpu-preflight: interrupted by {signal.Signals(signum).name} (exit {code})\n".encode())
    os._exit(code)


def _watch(read_fd: int) -> None:
    """The watcher thread: woken by the signal's number on the wakeup pipe. A signal our handler
    takes (not one ``serve``'s own handler took over) gives the main thread :data:`GRACE_S` to stop
    in order, then stops the process from here: with the signal the handler saw, or this one if
    the handler never got to run (the main thread blocked in C all along)."""
    seen = None
    while seen is None:
        try:
            data = os.read(read_fd, 64)
        except InterruptedError:
            continue
        except OSError:
            return
        if not data:
            return
        seen = next((s for s in data if s in CAUGHT and signal.getsignal(s) is _handler), None)
    time.sleep(GRACE_S)
    stop(_state.requested or seen, flush=False)
