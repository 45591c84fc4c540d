"""Progress of long work on stderr: the stages of a distributed run, and bars inside one stage.

A person at a terminal waiting minutes for a full sweep wants to see it move, and what it
waits on; a CI log, a pipe or a Slurm output file wants a line when the run moves on to a
new stage (so a hung job's log says where it stopped), never a bar's control characters.

- :func:`stage_view`: the stages of a run (rendezvous, each workload, gather, localisation
  rounds) as one transient rich line on a terminal (stage, step, bar, elapsed time, who it
  waits on), one log line per stage elsewhere, nothing with ``--quiet``.
- :func:`progress`: a bar for steps inside one piece of work, drawn only on a terminal;
  anywhere else a no-op tracker that costs nothing (rich is not even imported).

``GPU_PREFLIGHT_PROGRESS=0|1`` overrides the guess: ``0`` shows nothing, ``1`` draws bars
even where the stream is not a terminal.

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
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any, Literal, Protocol

import msgspec

__all__ = ["ENV", "STILL_WAITING_S", "StageState", "StageView", "StepCallback", "Tracker", "progress",
           "should_show", "stage_view", "view_mode"]

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


def _forced() -> bool | None:
    forced = os.environ.get(ENV, "").strip().lower()
    if forced in ("0", "false", "no", "off"):
        return False
    if forced in ("1", "true", "yes", "on"):
        return True
    return None


def _isatty(stream: IO[str]) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def should_show(stream: IO[str] | None = None) -> bool:
    """Draw progress? ``GPU_PREFLIGHT_PROGRESS`` decides when set, else whether the stream is a terminal."""
    forced = _forced()
    return forced if forced is not None else _isatty(stream or sys.stderr)


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
    # start-up: rich (tens of ms) loads only when a bar is drawn, not for every run that asks
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(file=target, force_terminal=True)
    columns = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn()] if total is not None else [SpinnerColumn(), TextColumn("{task.description}"),
                                                               TimeElapsedColumn()]
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield _RichTracker(bar, task, description)


ViewMode = Literal["bar", "log", "off"]
STILL_WAITING_S = 15.0  # a log view names who a stage waits on once it has waited this long


class StageState(msgspec.Struct, frozen=True):
    """Where a run is: ``stage`` changes a few times a run (one log line each), ``step`` often.

    ``done``/``total`` count the reporting rank's steps (``total`` ``None`` until known);
    ``waiting`` says who holds the stage up (``waiting for 2 of 16 ranks: host7, host9``);
    ``since`` is when the stage began (Unix time), where known better than "now".
    """

    stage: str
    step: str = ""
    done: int = 0
    total: int | None = None
    waiting: str = ""
    since: float | None = None


class StageView(Protocol):
    """Shows :class:`StageState` updates; ``close`` leaves the stream clean for the verdict."""

    def show(self, state: StageState) -> None:
        """The run's state now (called often: only changes are shown)."""

    def close(self) -> None:
        """Stop showing; a terminal line is erased."""


class _NoView:
    def show(self, state: StageState) -> None:
        return None

    def close(self) -> None:
        return None


class _LogView:
    """One line per stage, and at most one more when the stage waits on someone for long."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.started = time.time()
        self.stage = ""
        self.stage_since = self.started
        self.noted = False

    def _line(self, text: str) -> None:
        print(f"gpu-preflight: {text}", file=self.stream, flush=True)

    def show(self, state: StageState) -> None:
        now = time.time()
        if state.stage != self.stage:
            began = min(now, max(self.started, state.since or now))
            self.stage, self.stage_since, self.noted = state.stage, began, False
            self._line(f"stage {state.stage} at {began - self.started:.1f} s")
        elif state.waiting and not self.noted and now - self.stage_since >= STILL_WAITING_S:
            self.noted = True
            self._line(f"stage {state.stage} still {state.waiting} at {now - self.started:.1f} s")

    def close(self) -> None:
        return None


class _BarView:
    """One transient rich line: spinner, stage and step, bar, elapsed time, who it waits on."""

    def __init__(self, stream: IO[str]) -> None:
        # start-up: rich (tens of ms) loads only when a bar is drawn, not for every run that asks
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        console = Console(file=stream, force_terminal=True)
        self.bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                            TextColumn("{task.fields[waiting]}"), console=console, transient=True,
                            redirect_stdout=False, redirect_stderr=False)
        self.task = self.bar.add_task("starting", total=None, waiting="")
        self.bar.start()

    def show(self, state: StageState) -> None:
        counted = f" [{state.done}/{state.total}]" if state.total else ""
        label = f"{state.stage}{counted}" + (f": {state.step}" if state.step else "")
        self.bar.update(self.task, description=label, total=state.total, completed=state.done,
                        waiting=state.waiting)

    def close(self) -> None:
        self.bar.stop()


def view_mode(stream: IO[str] | None = None, *, quiet: bool = False) -> ViewMode:
    """``off`` with ``quiet`` or ``GPU_PREFLIGHT_PROGRESS=0``; ``bar`` on a terminal (or forced
    with ``=1``); ``log`` lines anywhere else."""
    forced = _forced()
    if quiet or forced is False:
        return "off"
    return "bar" if forced or _isatty(stream or sys.stderr) else "log"


def stage_view(stream: IO[str] | None = None, *, quiet: bool = False,
               mode: ViewMode | None = None) -> StageView:
    """The view for a run's stages on ``stream`` (stderr); see :func:`view_mode`."""
    target = stream or sys.stderr
    chosen = mode or view_mode(target, quiet=quiet)
    if chosen == "bar":
        return _BarView(target)
    if chosen == "log":
        return _LogView(target)
    return _NoView()
