"""Progress of long work (collective sweeps, GEMM per precision, memory patterns) on stderr.

A person at a terminal waiting minutes for a full sweep wants to see it move; a CI log, a
pipe or a Slurm output file wants nothing but the result. So a bar is drawn with rich only
when the stream is a terminal, and everything else gets a no-op tracker that costs nothing
(rich is not even imported). ``GPU_PREFLIGHT_PROGRESS=0|1`` overrides the guess.

Workloads take a plain callback (``Callable[[str], None]``): :meth:`Tracker.advance` is one,
so the workload code never knows whether anyone is watching::

    with progress("collectives", total=len(ops) * len(groups)) as bar:
        for op in ops:
            run_collective(op, ...)
            bar.advance(f"{op} on {group}")
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any, Protocol

__all__ = ["ENV", "StepCallback", "Tracker", "progress", "should_show"]

ENV = "GPU_PREFLIGHT_PROGRESS"
StepCallback = Callable[[str], None]


class Tracker(Protocol):
    """What a workload may call while it works."""

    def advance(self, note: str | None = None, step: float = 1.0) -> None:
        """One more unit done; ``note`` names what is running now."""


class _Quiet:
    def advance(self, note: str | None = None, step: float = 1.0) -> None:
        return None


class _RichTracker:
    def __init__(self, bar: Any, task: Any, description: str) -> None:
        self.bar, self.task, self.description = bar, task, description

    def advance(self, note: str | None = None, step: float = 1.0) -> None:
        label = f"{self.description}: {note}" if note else self.description
        self.bar.update(self.task, advance=step, description=label)


def should_show(stream: IO[str] | None = None) -> bool:
    """Draw progress? ``GPU_PREFLIGHT_PROGRESS`` decides when set, else whether the stream is a terminal."""
    forced = os.environ.get(ENV, "").strip().lower()
    if forced in ("0", "false", "no", "off"):
        return False
    if forced in ("1", "true", "yes", "on"):
        return True
    target = stream or sys.stderr
    isatty = getattr(target, "isatty", None)
    return bool(isatty and isatty())


@contextmanager
def progress(description: str, total: float | None = None, *, stream: IO[str] | None = None,
             enabled: bool | None = None) -> Iterator[Tracker]:
    """A progress bar (``total`` known) or spinner (``None``) for the duration of the block.

    ``enabled=False`` forces silence (ranks other than 0 under a launcher share the
    terminal and must not draw over each other); ``None`` asks :func:`should_show`.
    The bar is transient: it disappears when the block ends, leaving the report clean.
    """
    target = stream or sys.stderr
    if not (should_show(target) if enabled is None else enabled):
        yield _Quiet()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(file=target, force_terminal=True)
    columns = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn()] if total is not None else [SpinnerColumn(), TextColumn("{task.description}"),
                                                               TimeElapsedColumn()]
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield _RichTracker(bar, task, description)
