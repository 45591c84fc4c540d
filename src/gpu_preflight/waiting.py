"""A job about to wait says so, and whoever runs it may start the next job meanwhile.

Why: a node run's probes run one after another on one thread. Run side by side, eight
probe threads traded the GIL at every ctypes call and every ``read``: on 8 stub GPUs the
probes cost ~12 ms more CPU than in turn, with no gain in time, because what they do is
mostly Python. But some of a probe's time is spent waiting: on a child process (``dcgmi``,
``fi_info``, ``lspci``), on a CPU-sampling window, on an NVML call the driver holds. A
probe queued behind such a wait should not wait too. So the code that is about to block
calls :func:`waiting`; the engine, which put a hook on the thread running the probe
(:func:`reported_to`), then hands the probes not yet started to another thread at once,
instead of after its fixed hand-over time.

Outside such a thread (a command that runs a tool directly, a test) :func:`waiting` does
nothing. A hook is called at most as often as the job waits; it must be cheap and must not
raise (the engine's sets a flag and wakes its supervisor).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["reported_to", "waiting"]

_local = threading.local()


def waiting() -> None:
    """Tell whoever runs this thread's job that it is about to block (a no-op where nobody asked)."""
    hook = getattr(_local, "hook", None)
    if hook is not None:
        hook()


@contextmanager
def reported_to(hook: Callable[[], None]) -> Iterator[None]:
    """While the block runs, :func:`waiting` on this thread calls ``hook``."""
    previous = getattr(_local, "hook", None)
    _local.hook = hook
    try:
        yield
    finally:
        _local.hook = previous
