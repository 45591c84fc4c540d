"""A simulated cluster that answers the real scheduler's rounds, for tests, benchmarks and the CLI.

The model is the simplest one that still has every failure the field reports: a test's
bandwidth is the slowest member NIC (node speed x rail speed) times the slowest link it
crosses (a ring over the members: consecutive members and back, as NCCL's ring does),
times multiplicative Gaussian noise. A dead node makes every test it is in time out; a
flaky node makes each test it is in fail with probability ``p``; a slow link slows only
tests whose ring crosses it. ``local`` is what nodes' own checks report (node-local
evidence, which only breaks ties). Everything is drawn from one seeded generator, so a seed
replays a run exactly.
"""

from __future__ import annotations

import gc
import math
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import msgspec

from .model import (
    FAILED,
    OK,
    TIMEOUT,
    LocalizeConfig,
    Measurement,
    NodeEvidence,
    Outcome,
    PlannedTest,
    Round,
    RoundProgress,
)
from .scheduler import Localizer

FAULTS = ("slow", "dead", "flaky", "rail", "mixed")


class Scenario(msgspec.Struct):
    """The true state of a simulated cluster."""

    nodes: int
    rails: int = 1
    nic_gbps: float = 48.0
    latency_us: float = 8.0
    noise: float = 0.0
    dead: set[int] = msgspec.field(default_factory=set)
    slow: dict[int, float] = {}
    flaky: dict[int, float] = {}
    slow_links: dict[tuple[int, int], float] = {}
    slow_rails: dict[tuple[int, int], float] = {}
    local: dict[int, str] = {}
    message_bytes: int = 256 << 20

    def bad_nodes(self) -> set[int]:
        return self.dead | set(self.slow) | set(self.flaky) | {n for n, _ in self.slow_rails}

    def bad_links(self) -> set[tuple[int, int]]:
        return {(min(a, b), max(a, b)) for a, b in self.slow_links}

    def link_factor(self, a: int, b: int) -> float:
        return self.slow_links.get((a, b), self.slow_links.get((b, a), 1.0))


def make_scenario(nodes: int, bad: int, *, fault: str = "slow", slow_factor: float = 0.3, flaky_p: float = 0.7,
                  slow_links: list[tuple[int, int]] | None = None, link_factor: float = 0.3, noise: float = 0.0,
                  rails: int = 1, seed: int = 0) -> Scenario:
    """A cluster with ``bad`` faulty nodes chosen at random (``mixed`` cycles slow, dead, flaky)."""
    if fault not in FAULTS:
        raise ValueError(f"fault must be one of {FAULTS}")
    if not 0 <= bad <= nodes:
        raise ValueError("need 0 <= bad <= nodes")
    rng = random.Random(f"scenario:{seed}")  # noqa: S311 - a reproducible model, not a secret
    sc = Scenario(nodes, rails=rails, noise=noise)
    for i, n in enumerate(sorted(rng.sample(range(nodes), bad))):
        kind = ("slow", "dead", "flaky")[i % 3] if fault == "mixed" else fault
        if kind == "slow":
            sc.slow[n] = slow_factor
        elif kind == "dead":
            sc.dead.add(n)
        elif kind == "flaky":
            sc.flaky[n] = flaky_p
        else:
            sc.slow_rails[(n, rng.randrange(rails))] = slow_factor
    for a, b in slow_links or []:
        if not (0 <= a < nodes and 0 <= b < nodes and a != b):
            raise ValueError(f"slow link {a},{b} needs two distinct nodes in 0..{nodes - 1}")
        sc.slow_links[(a, b)] = link_factor
    return sc


class SimCluster:
    """Answers planned tests the way the runner would, from a :class:`Scenario`."""

    def __init__(self, scenario: Scenario, seed: int = 0) -> None:
        self.sc = scenario
        self.rng = random.Random(f"noise:{seed}")  # noqa: S311 - a reproducible model, not a secret
        self.worst_rail: dict[int, float] = {}  # a node's slowest rail, for a test run on no rail in particular
        for (n, _), f in scenario.slow_rails.items():
            self.worst_rail[n] = min(self.worst_rail.get(n, f), f)

    def run(self, plan: Round) -> list[Measurement]:
        out: list[Measurement] = []
        for test in plan.tests:
            out += self.measure(test, plan.timeout_s)
        return out

    def measure(self, test: PlannedTest, timeout_s: float) -> list[Measurement]:
        sc, members = self.sc, test.members
        if set(members) & sc.dead:
            return []  # never answers: the scheduler records the missing result as a timeout
        for n in members:
            if n in sc.flaky and self.rng.random() < sc.flaky[n]:
                return [Measurement(test.test_id, members, FAILED, kind=test.kind,
                                    error=f"connection reset by node {n} (simulated)", duration_s=1.0)]
        ring = list(zip(members, members[1:] + members[:1], strict=True)) if len(members) > 2 else [members]
        link = min(sc.link_factor(a, b) for a, b in ring)
        rails: list[int | None] = list(test.rails) or [None]
        out = []
        for rail in rails:
            speed = min(sc.slow.get(n, 1.0) * (sc.slow_rails.get((n, rail), 1.0) if rail is not None else
                                              self.worst_rail.get(n, 1.0))
                        for n in members) * link
            gbps = sc.nic_gbps * speed * max(0.05, 1 + sc.noise * self.rng.gauss(0, 1))
            latency = sc.latency_us / math.sqrt(speed) * max(0.2, 1 + sc.noise * self.rng.gauss(0, 1))
            out.append(Measurement(test.test_id, members, OK, gbps, latency, rail, test.kind,
                                   duration_s=min(timeout_s, sc.message_bytes / (gbps * 1e9) * 20)))
        return out

    def star(self) -> list[Measurement]:
        """Round 0's exchanges of node 0 with each node (what ``workloads.links.run_star`` measures)."""
        out = []
        for peer in range(1, self.sc.nodes):
            test = PlannedTest(f"star{peer}", (0, peer), "star", "round0")
            got = self.measure(test, 60.0)
            out += got if got else [Measurement(test.test_id, test.members, TIMEOUT, kind="star",
                                                error="no answer (simulated)")]
        return out


class SimResult(msgspec.Struct):
    """A simulated localisation scored against the truth."""

    scenario: Scenario
    outcome: Outcome
    found: list[int]
    false_positives: list[int]
    missed: list[int]
    links_found: list[tuple[int, int]]
    links_missed: list[tuple[int, int]]
    rounds_to_find: int

    @property
    def exact(self) -> bool:
        return not (self.false_positives or self.missed or self.links_missed)


def simulate(scenario: Scenario, config: LocalizeConfig | None = None, *, seed: int = 0, dead_known: bool = True,
             star: bool = False, on_round: Callable[[RoundProgress], None] | None = None) -> SimResult:
    """Run the real scheduler against ``scenario`` until it stops; score its answer.

    ``dead_known``: round 0 already named the dead nodes (their ranks went missing), as
    the runner's heartbeats do; otherwise they are found from timeouts. ``star``: round
    0 also holds node 0's exchange with each node. ``on_round`` is told where the run
    stands after each round (a progress display); it changes nothing in the run.
    """
    with collector_paused():
        return _simulate(scenario, config, seed=seed, dead_known=dead_known, star=star, on_round=on_round)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause CPython's cycle collector while a simulation runs; restore it after.

    A simulated cluster of 65,536 nodes keeps over a million small objects alive
    (measurements, judged observations, per-node records), and the collector walks all
    of them each time the young objects outgrow a quarter of the old: two thirds of the
    run went there. Nothing the scheduler or the simulator builds refers back to itself,
    so reference counting frees all of it anyway.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _simulate(scenario: Scenario, config: LocalizeConfig | None, *, seed: int, dead_known: bool, star: bool,
              on_round: Callable[[RoundProgress], None] | None) -> SimResult:
    config = config or LocalizeConfig(rails=scenario.rails)
    loc = Localizer(scenario.nodes, config, seed=seed)
    cluster = SimCluster(scenario, seed)
    if dead_known:
        for n in sorted(scenario.dead):
            loc.add_evidence(NodeEvidence(n, "dead", "rank missing in round 0 (simulated)"))
    for n, why in sorted(scenario.local.items()):
        loc.add_evidence(NodeEvidence(n, "local", why))
    if star:
        loc.record(cluster.star())
    while (plan := loc.next_round()) is not None:
        loc.record(cluster.run(plan))
        if on_round is not None:
            on_round(loc.status())
    out = loc.outcome()
    truth, excluded = scenario.bad_nodes(), set(out.excluded)
    links = {(min(s.node, s.peers[0]), max(s.node, s.peers[0])) for s in out.suspects if s.kind == "link"}
    found = sorted(truth & excluded)
    return SimResult(scenario, out, found, sorted(excluded - truth), sorted(truth - excluded),
                     sorted(links & scenario.bad_links()), sorted(scenario.bad_links() - links),
                     max((out.round_found.get(n, out.rounds) for n in found), default=0))
