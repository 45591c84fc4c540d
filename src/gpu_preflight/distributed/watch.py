"""What the job is doing and what it waits on, read from the job's store for the person watching.

The reporting rank under a launcher, or the self-launch supervisor (which hosts the store),
reads the reporting rank's step, the per-phase counters of :mod:`.stages`, the heartbeats
and the localisation plans, and hands a :class:`~gpu_preflight.progress.StageState`
to a view twice a second. Reads are bounded whatever the job's size: two keys per tick,
and every :data:`SCAN_EVERY_S` one read per rank up to :data:`~.stages.SCAN_RANKS` ranks;
above, the per-node counters in one ``check`` and one ``multi_get`` (rate-limited further on
very large jobs), once each phase's counters exist.

Started as a thread, the watch talks to the store over a connection of its own: the
reporting rank's gather holds its connection in waits of up to a second at a time, back to
back, and a watch sharing it was starved (measured at 1,000 simulated ranks: the view froze
for the whole gather, ``bench/bench_store_scale.py``).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from ..backends.launcher.topology import Topology
from ..progress import StageState, StageView
from .gather import names as host_names
from .liveness import read_values, tracker
from .localize_rounds import LOC
from .plan import node_ranks
from .stages import LABELS, PHASES, PHASES_KEY, SCAN_RANKS, describe, entered, order, phase_of, reached_key
from .store import PREFIX, REPORTER_KEY, get_text, own_connection

SCAN_EVERY_S = 2.0
TICK_S = 0.5
SHOWN = 5  # names in a waiting line; the rest are counted


class JobWatch:
    """The job's stage for a view; :meth:`start` runs it on a thread, :meth:`stop` ends it."""

    def __init__(self, store: Any, topo: Topology, view: StageView, *, before: str = "rendezvous") -> None:
        self.store, self.topo, self.view, self.before = store, topo, view, before
        self.steps: list[str] | None = None
        self.absent: set[int] | None = None
        self.round, self.plan = 0, None
        self.seen = 0  # rank 0's phases already handed to the view
        self.rounds: list[str] = []  # localisation rounds not yet handed to the view
        self.waiting, self.waiting_for, self.scanned_at = "", "", float("-inf")
        self.halt = threading.Event()
        self.thread: threading.Thread | None = None
        self.beats = tracker(store)  # the heartbeats as this process saw them (shared with its gather)
        self.primed: set[int] = set()  # phases whose per-node counters exist for every node

    def start(self) -> JobWatch:
        self.store = own_connection(self.store)
        self.thread = threading.Thread(target=self._run, name="gp-progress", daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop reading and close the view (a terminal line is erased). Safe to call twice.

        One last read first: the stages the job went through since the last tick (a gather and
        a report can take less than a tick) still get their log lines.
        """
        if self.halt.is_set():
            return
        self.halt.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(2.0)
        try:
            for state in self.states():
                self.view.show(state)
        except Exception:  # noqa: S110 - the store is gone: what was shown stands
            pass
        self.view.close()

    def _run(self) -> None:
        while not self.halt.is_set():
            try:
                self.tick()
            except Exception:  # the store went away at the end of the run: nothing more to show
                return
            self.halt.wait(TICK_S)

    def tick(self) -> list[StageState]:
        """Read the store once and show what changed: every stage entered since the last tick, in
        order (a stage shorter than a tick still gets its log line), then the current state."""
        states = self.states()
        for state in states:
            if self.halt.is_set():
                break
            self.view.show(state)
        return states

    def states(self) -> list[StageState]:
        """Stages entered since the last call, then the reporting rank's stage and step, its
        position in its steps, and who holds it up."""
        reporter = int(get_text(self.store, REPORTER_KEY) or 0)
        phases = entered(get_text(self.store, PHASES_KEY)) if reporter == 0 else []  # read before the step
        step = get_text(self.store, f"{PREFIX}/progress/{reporter}")
        if step is None:
            return [StageState(self.before)]
        last = PHASES.index(phases[-1][0]) if phases else -1
        since = phases[-1][1] if phases else None
        if order(step) < last:  # the step of a phase just entered is not written yet
            step = phases[-1][0]
        upto = len(phases) if order(step) > last else len(phases) - 1  # the last is the current one
        passed = [StageState(LABELS[p], since=t) for p, t in phases[self.seen:upto]]
        self.seen = max(self.seen, len(phases))
        if order(step) > last:
            since = None
        stage, note = describe(step)
        done, total = self._position(step)
        phase = phase_of(step)
        if phase == "localize":
            stage, note, waiting = self._rounds()
            passed += [StageState(r) for r in self.rounds]
            self.rounds.clear()
        elif phase == "report":
            waiting = ""
        else:
            waiting = self._waiting(reporter, step)
        return [*passed, StageState(stage, note, done, total, waiting, since if phase != "localize" else None)]

    def _position(self, step: str) -> tuple[int, int | None]:
        if self.steps is None:
            raw = get_text(self.store, f"{PREFIX}/steps")
            self.steps = json.loads(raw) if raw else None
        if not self.steps:
            return 0, None
        head = step.split(" ", 1)[0]
        total = len(self.steps)
        return (self.steps.index(head) if head in self.steps else total), total

    def _absent_ranks(self) -> set[int]:
        """Ranks rank 0 gave up waiting for at formation: they will never come."""
        if self.absent is None:
            raw = get_text(self.store, f"{PREFIX}/formation")
            if raw is None:
                return set()
            self.absent = {int(r) for r in json.loads(raw)}
        return self.absent

    def _waiting(self, reporter: int, step: str) -> str:
        now = time.monotonic()
        every = max(SCAN_EVERY_S, self.topo.num_nodes / 2000) if self.topo.world_size > SCAN_RANKS else SCAN_EVERY_S
        if self.waiting_for == step and now - self.scanned_at < every:
            return self.waiting
        self.waiting_for, self.scanned_at = step, now
        at = order(step)
        absent = self._absent_ranks()
        if self.topo.world_size <= SCAN_RANKS:
            count, names = self._scan_ranks(reporter, at, absent)
            more = 0
        else:
            count = max(0, self.topo.world_size - len(absent) - int(self.store.add(reached_key(PHASES[at]), 0)))
            names, more = self._lagging_nodes(at, absent) if count else ([], 0)
        self.waiting = _line(count, self.topo.world_size, "ranks", names, more) if count else ""
        return self.waiting

    def _scan_ranks(self, reporter: int, at: int, absent: set[int]) -> tuple[int, list[str]]:
        """Ranks behind the reporting rank's phase, or silent (a stopped rank looks like it is
        where everyone is, but its heartbeat has stood still, by this process's clock)."""
        held: list[tuple[int, str]] = []
        ranks = [r for r in range(self.topo.world_size) if r not in absent]
        self.beats.read(self.store, ranks, PREFIX)
        for r in ranks:
            step = get_text(self.store, f"{PREFIX}/progress/{r}")
            where = describe(step)[0] if step else "not arrived"
            if self.beats.silent(r):
                held.append((r, f"silent {self.beats.quiet_s(r) or 0:.0f} s at {where}"))
            elif r != reporter and order(step) < at:
                held.append((r, where))
        if self.topo.num_nodes <= 1:
            return len(held), [f"rank {r} ({why})" for r, why in held]
        hosts = host_names(self.store, self.topo, [r for r, _ in held[:64]])
        return len(held), list(dict.fromkeys(hosts.get(r) or f"rank {r}" for r, _ in held))

    def _lagging_nodes(self, at: int, absent: set[int]) -> tuple[list[str], int]:
        """The first nodes whose ranks have not all reached the phase, and how many more there are.

        A node's counter exists once one of its ranks reached the phase; the first scan of a phase
        creates the others at 0 (``add(key, 0)``, one round trip per node, once), so every later
        scan reads them all in one ``check`` and one ``multi_get``."""
        keys = [reached_key(PHASES[at], n) for n in range(self.topo.num_nodes)]
        if at not in self.primed:
            for key in keys:
                self.store.add(key, 0)
            self.primed.add(at)
        counts = read_values(self.store, keys)
        late = []
        for n, count in enumerate(counts):
            ranks = [r for r in node_ranks(self.topo, n) if r not in absent]
            if ranks and int(count or 0) < len(ranks):
                late.append(ranks[0])
        named = host_names(self.store, self.topo, late[:SHOWN])
        return ([named.get(r) or f"node {r // max(self.topo.local_world_size, 1)}" for r in late[:SHOWN]],
                max(0, len(late) - SHOWN))

    def _rounds(self) -> tuple[str, str, str]:
        """``localisation round k``, its tests still running, and the nodes in them."""
        while self.store.check([f"{LOC}/plan/{self.round + 1}"]):
            if self.round:
                self.rounds.append(f"{LABELS['localize']} round {self.round}")
            self.round += 1
            self.plan = json.loads(bytes(self.store.get(f"{LOC}/plan/{self.round}")).decode())
        if self.plan is None:
            return LABELS["localize"], "planning", ""
        tests = self.plan.get("tests") or []
        pending = [t for t in tests if not self.store.check([f"{LOC}/result/{self.round}/{t['test_id']}"])]
        per_node = max(self.topo.local_world_size, 1)
        leaders = sorted({int(m) * per_node for t in pending[:SHOWN] for m in t["members"]})
        hosts = host_names(self.store, self.topo, leaders)
        shown = ["-".join(hosts.get(int(m) * per_node) or f"node {m}" for m in t["members"]) for t in pending]
        waiting = _line(len(pending), len(tests), "tests", shown) if pending else ""
        return f"{LABELS['localize']} round {self.round}", f"{len(tests)} test(s)", waiting


def _line(count: int, of: int, what: str, names: list[str], more: int = 0) -> str:
    """``waiting for 2 of 16 ranks: host7, host9`` (the first :data:`SHOWN` names; ``more`` unnamed)."""
    more += max(0, len(names) - SHOWN)
    listed = names[:SHOWN] + ([f"{more} more"] if more else [])
    return f"waiting for {count} of {of} {what}" + (f": {', '.join(listed)}" if listed else "")
