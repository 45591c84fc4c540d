"""Who still answers, judged from heartbeats on the reader's own monotonic clock; clock skew measured.

A rank stamps ``beat/<rank>`` with ``"<seq> <wall> <interval>"``: a count that grows with
every beat, its wall clock, and how often it beats. A reader never subtracts that wall
clock from its own: hosts' clocks disagree (a node whose NTP broke runs seconds or minutes
behind) and a live rank 10 s behind used to be declared dead. A rank is silent when the
reader has seen its beat stand still, by the reader's monotonic clock, for
:func:`stale_after` its interval. The wall stamps serve one purpose: a beat that changed
between two of the reader's reads was written in between, which brackets the writer's clock
against the reader's (:attr:`Seen.skew`); a rank far off is reported, not declared dead.

The cost of knowing: the first sighting of a rank on another host says nothing about its age,
so a rank already dead when a reader first looks is named :func:`stale_after` later, not at
once. A rank on the reader's own host (:attr:`Beats.same_host`: a node leader reading its
node's ranks) stamps with the reader's own clock, so its first sighting is dated by its stamp:
a node-mate killed before its leader began to collect is named about :data:`FIRST_LOOK_BEATS`
intervals after the leader first looked, not :func:`stale_after` later (measured at 8,000
simulated ranks: 30.9 s -> see docs/distributed.md). The stamp never dates it further back
than that, so a node-mate whose wall clock differs after all (jumped, or faked) still has
those intervals to show a new beat and is not named dead on its clock's word.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

__all__ = ["BEAT_BUDGET_PER_S", "HEARTBEAT_S", "STALE_BEATS", "STALE_S", "Beat", "Beats", "Seen", "beat_interval",
           "read_values", "stale_after", "tracker"]

HEARTBEAT_S = 1.0  # the shortest interval: what a job of up to BEAT_BUDGET_PER_S ranks beats at
STALE_S = 10.0  # the shortest silence that makes a rank dead or stopped
STALE_BEATS = 3  # ... and at least this many of its own intervals
BEAT_BUDGET_PER_S = 2000.0  # heartbeat writes per second the store's host is asked to take, whatever the job's size
STAMP_SLACK_S = 0.25  # a beat may wait this long between its stamp and the store (a busy interpreter)
FIRST_LOOK_BEATS = 3  # a node-mate first seen with an old stamp still gets this many intervals to show a new beat


def beat_interval(world_size: int) -> float:
    """Seconds between a rank's beats: 1 s up to 2,000 ranks, then longer so the store's host
    takes :data:`BEAT_BUDGET_PER_S` writes a second however large the job (4 s at 8,000 ranks)."""
    return max(HEARTBEAT_S, world_size / BEAT_BUDGET_PER_S)


def stale_after(interval: float) -> float:
    """The silence after which a rank beating every ``interval`` seconds is dead or stopped."""
    return max(STALE_S, STALE_BEATS * interval)


class Beat(msgspec.Struct, frozen=True):
    """One heartbeat as written: ``seq`` counts beats, ``wall`` is the writer's clock, ``interval`` its period."""

    seq: int
    wall: float
    interval: float

    def text(self) -> str:
        return f"{self.seq} {self.wall:.3f} {self.interval:g}"

    @classmethod
    def parse(cls, text: str) -> Beat | None:
        """The beat in ``text``; a bare wall time (what earlier versions wrote) is a beat of interval
        :data:`HEARTBEAT_S`; None when unreadable."""
        parts = text.split()
        try:
            if len(parts) == 1:
                return cls(0, float(parts[0]), HEARTBEAT_S)
            seq, wall, interval = parts[:3]
            return cls(int(seq), float(wall), max(float(interval), HEARTBEAT_S))
        except ValueError:
            return None


class Seen(msgspec.Struct):
    """What one reader saw of one rank's heartbeat: the value, since when (reader's monotonic
    clock), when the reader last read it still unchanged (its wall clock), and the bracket
    ``skew = (low, high)`` on the writer's clock minus the reader's, narrowed by every change seen."""

    text: str
    since: float
    read_at: float
    interval: float
    skew: tuple[float, float] | None = None
    brackets: int = 0


class Beats(msgspec.Struct):
    """One reader's view of every rank's heartbeat. ``clock`` (monotonic) and ``wall`` are the
    reader's clocks, injectable so tests can let time pass without waiting."""

    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    seen: dict[int, Seen] = {}
    same_host: set[int] = msgspec.field(default_factory=set)  # ranks that stamp with this reader's own wall clock

    def observe(self, rank: int, text: str | None, started: float, ended: float) -> None:
        """Record a read of ``rank``'s beat that began at wall time ``started`` and answered at ``ended``."""
        if text is None:
            return
        now = self.clock()
        old = self.seen.get(rank)
        if old is not None and old.text == text:
            old.read_at = started
            return
        beat = Beat.parse(text)
        interval = beat.interval if beat else HEARTBEAT_S
        since = now
        if old is None and beat is not None and rank in self.same_host:  # our clock: the stamp dates it ...
            age = max(0.0, started - beat.wall - STAMP_SLACK_S)
            # ... but never past the point where the rank has FIRST_LOOK_BEATS of its own intervals left to beat
            # again: a node-mate whose clock is not ours after all (a jumped or faked clock) is seen alive by then
            since = now - min(age, max(0.0, stale_after(interval) - FIRST_LOOK_BEATS * interval))
        entry = Seen(text, since, started, interval)
        if old is not None:
            entry.skew, entry.brackets = old.skew, old.brackets
            if beat is not None:  # written after the last read that still saw the old value, before this one answered
                low, high = beat.wall - ended, beat.wall - old.read_at + STAMP_SLACK_S
                if old.skew is not None and max(low, old.skew[0]) <= min(high, old.skew[1]):
                    low, high = max(low, old.skew[0]), min(high, old.skew[1])
                # else the writer's clock jumped: this bracket alone
                entry.skew, entry.brackets = (low, high), old.brackets + 1
        self.seen[rank] = entry

    def read(self, store: Any, ranks: Sequence[int], prefix: str) -> dict[int, str | None]:
        """Read these ranks' beats (one round trip when all exist) and observe them."""
        started = self.wall()
        values = read_values(store, [f"{prefix}/beat/{r}" for r in ranks])
        ended = self.wall()
        for r, v in zip(ranks, values, strict=True):
            self.observe(r, v, started, ended)
        return dict(zip(ranks, values, strict=True))

    def quiet_s(self, rank: int) -> float | None:
        """Seconds (reader's clock) since this rank's beat last changed; None before it was seen."""
        s = self.seen.get(rank)
        return None if s is None else self.clock() - s.since

    def silent(self, rank: int) -> bool:
        """The rank's beat stood still for :func:`stale_after` its interval (never seen: not silent yet)."""
        s = self.seen.get(rank)
        return s is not None and self.clock() - s.since > stale_after(s.interval)

    def skew(self, rank: int) -> tuple[float, float] | None:
        """The bracket on the rank's clock minus the reader's, once a change of its beat was seen."""
        s = self.seen.get(rank)
        return None if s is None else s.skew


def read_values(store: Any, keys: list[str]) -> list[str | None]:
    """The values of these keys, None for those not set: one ``check`` and one ``multi_get``
    when all are set (the usual case), a ``check`` per key only when some are not."""
    if not keys:
        return []
    try:
        if store.check(keys):
            return [bytes(v).decode() for v in store.multi_get(keys)]
    except Exception:  # noqa: S110 - fall back to reading key by key
        pass
    out: list[str | None] = []
    for key in keys:
        try:
            out.append(bytes(store.get(key)).decode() if store.check([key]) else None)
        except Exception:
            out.append(None)
    return out


_TRACKERS: weakref.WeakKeyDictionary[Any, Beats] = weakref.WeakKeyDictionary()


def tracker(store: Any) -> Beats:
    """This process's view of the heartbeats in ``store``, for callers that keep no state of
    their own (:func:`~.store.silent`); it goes with the store."""
    found = _TRACKERS.get(store)
    if found is None:
        found = _TRACKERS[store] = Beats()
    return found
