"""The stages of a rank's run, in order, and the counters that let rank 0 see who is behind.

Each rank writes its current step to ``progress/<rank>`` (``gemm``, ``all_reduce@all``,
``done``). A step belongs to a phase; phases come in one order on every rank, though a rank
may skip some (only node leaders run fi_pingpong). On entering a phase a rank adds one to
``reached/<phase>`` for it and every phase it skipped, so ``reached/<phase>`` counts the
ranks at or past it: ``world - reached`` is how many ranks the reporting rank waits for,
in one store read however large the job. Above :data:`SCAN_RANKS` ranks they also count
per node (``reached/<phase>/<node>``), so the nodes behind can be named from one read
per node instead of one per rank.

Rank 0 also keeps the phases it entered, in order and with the time, in ``phases``: a stage
shorter than the watcher's tick still gets its log line, with the time it began.
"""

from __future__ import annotations

import time
from typing import Any

PREFIX = "gpu-preflight"  # the runner's key prefix (kept equal to runner.PREFIX)
PHASES = ("arrive", "dcgm", "stack", "gemm", "memory", "train", "collectives", "links", "pingpong", "ddp",
          "node_checks", "done", "localize", "report")
LABELS = {"arrive": "rendezvous", "dcgm": "DCGM diagnostic", "stack": "software stack", "gemm": "GEMM",
          "memory": "memory test", "train": "training smoke", "collectives": "collectives", "links": "inter-node links",
          "pingpong": "fi_pingpong", "ddp": "DDP training", "node_checks": "node checks", "done": "gather",
          "localize": "localisation", "report": "report"}
SCAN_RANKS = 256  # up to this many ranks the watcher reads every rank's step; above, per-node counters


def phase_of(step: str) -> str | None:
    """The phase of a step as written to ``progress/<rank>`` (``all_reduce@node1`` -> ``collectives``)."""
    head = step.split(" ", 1)[0]
    if "@" in head:
        return "collectives"
    return head if head in PHASES else None


def order(step: str | None) -> int:
    """The step's phase position (-1 for no step yet: not arrived)."""
    phase = phase_of(step) if step else None
    return PHASES.index(phase) if phase else -1


def describe(step: str) -> tuple[str, str]:
    """``(stage label, step note)``: ``all_reduce@all`` -> ``("collectives", "all_reduce on all")``."""
    head, _, rest = step.partition(" ")
    phase = phase_of(step)
    if phase == "collectives":
        op, _, group = head.partition("@")
        return LABELS[phase], f"{op} on {group}"
    return (LABELS[phase] if phase else head), rest


PHASES_KEY = f"{PREFIX}/phases"  # rank 0's phases so far: "arrive@<unix time>,stack@<unix time>,..."


def reached_key(phase: str, node: int | None = None) -> str:
    return f"{PREFIX}/reached/{phase}" + (f"/{node}" if node is not None else "")


class Marks:
    """One rank's phase counters: each phase counted once, skipped phases included."""

    def __init__(self, store: Any, node: int, per_node: bool, rank: int = -1) -> None:
        self.store, self.node, self.per_node, self.rank = store, node, per_node, rank
        self.last = -1
        self.entered: list[str] = []

    def enter(self, step: str) -> None:
        at = order(step)
        if at <= self.last:
            return
        for i in range(self.last + 1, at + 1):
            self.store.add(reached_key(PHASES[i]), 1)
            if self.per_node:
                self.store.add(reached_key(PHASES[i], self.node), 1)
        self.last = at
        if self.rank == 0:
            self.entered.append(f"{PHASES[at]}@{time.time():.2f}")
            self.store.set(PHASES_KEY, ",".join(self.entered))


def entered(raw: str | None) -> list[tuple[str, float | None]]:
    """``phases`` as ``[(phase, unix time entered)]``; anything unreadable is left out."""
    out: list[tuple[str, float | None]] = []
    for item in (raw or "").split(","):
        name, _, when = item.partition("@")
        if name in PHASES:
            try:
                out.append((name, float(when)))
            except ValueError:
                out.append((name, None))
    return out
