"""Plan rounds of disjoint node pairs (or groups) that find the bad nodes, links and rails.

Pure: no torch, no clock, no I/O. Rank 0 of a job (or the simulator, or a test) drives
it in a loop::

    loc = Localizer(num_nodes, LocalizeConfig(mode="quick", rails=8), seed=job_seed)
    loc.add_evidence(NodeEvidence(node=5, state="dead", reason="heartbeat stale"))  # round 0
    loc.record(star_measurements)                                                  # round 0
    while (plan := loc.next_round()) is not None:
        loc.record(run_tests_in_parallel(plan))   # tests without a result count as timeouts
    outcome = loc.outcome()

Every test of a round has disjoint members, so a round costs one test's time however
many nodes there are, and a node that hangs costs its own pair one time limit, never the
other pairs. Modes:

* ``quick`` — one round in which every node not yet seen is in exactly one pair (node i
  with node i + N/2, so pairs cross racks, or random pairs; one trio when N is odd); then
  second passes: each member of a failing pair against a different known-good partner,
  so the bad member is named; one bad node among any number is found in 2 rounds. Each
  node is looked at once: ``cover_passes`` > 1 adds random re-pairings, for nodes that
  fail only some of the time.
* ``full`` — round-robin (circle method): N-1 rounds cover every pair once and give the
  node x node matrix; then the same second passes and repeats for what is still open.
  Clusters of up to ``round_robin_upto`` nodes always start this way: one round of a few
  pairs gives too few figures to judge any of them by, and N-1 rounds are few. Once every
  partner has been met (three nodes have three pairs), a failed pair whose verdict is
  still open is repeated, k-of-n, rather than left unresolved; when no node is known good
  at the end (two nodes), node-local evidence breaks the tie or the nodes are reported
  ``undecided`` (:func:`.suspects.break_tie`).
* ``group`` — groups of ``group_size`` nodes, then each failing group is split in halves
  (bisection) until pairs, then second passes: 2 + log2(group_size) rounds for any
  number of bad nodes, with far fewer tests than pairs when bad nodes are rare. Groups
  are judged against each other, so when most groups hold a bad node (dense faults) only
  a floor or an expected figure can call them slow: use pairs then.

Rail-aligned (``rails`` > 1): every test runs on each rail (local rank i of every member
with local rank i of the others) and is judged per rail, so a bad GPU/NIC rail is named.
The inference rules (when a node is called bad, trusted, cleared, or a link) are in
:mod:`.infer`; judging a figure slow is in :mod:`.judge`.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable

from .infer import LaneVerdict, infer, settled
from .judge import judge
from .model import (
    FAILED,
    OK,
    TIMEOUT,
    LocalizeConfig,
    Measurement,
    NodeEvidence,
    Observation,
    Outcome,
    PlannedTest,
    Round,
    RoundProgress,
)
from .suspects import break_tie, build_suspects, unresolved


class Localizer:
    """The state of one localisation: evidence so far, and the round that is out."""

    def __init__(self, nodes: int, config: LocalizeConfig | None = None, *, seed: int = 0) -> None:
        if nodes < 2:
            raise ValueError("localisation needs at least two nodes")
        self.nodes = nodes
        self.config = config or LocalizeConfig()
        self.rng = random.Random(seed)  # noqa: S311 - tie-breaks that a seed must replay, not a secret
        self.measurements: list[Measurement] = []
        self.dead: dict[int, str] = {}
        self.weak: dict[tuple[int, int | None], str] = {}
        self.local: dict[int, str] = {}
        self.split: set[frozenset[int]] = set()
        self.partner_uses: dict[int, int] = defaultdict(int)
        self.rounds = 0
        self.extra_rounds = 0
        self.round_found: dict[int, int] = {}
        self.round_time: list[float] = []
        self._cover: list[list[tuple[int, ...]]] | None = None
        self._out: Round | None = None
        self._seq = 0
        self._finished = False
        self._version = 0  # bumped by every change of evidence; keys the inference cache
        self._cache: tuple[int, list[LaneVerdict], list[Observation]] | None = None
        self._tally = _Tally()

    # -- evidence in -----------------------------------------------------------------------

    def add_evidence(self, evidence: NodeEvidence) -> None:
        """Node-level evidence from round 0 or from heartbeats; a dead node is never scheduled again.

        ``local`` evidence (what a node measured alone) is kept aside: it only breaks a tie
        that pair tests cannot (see :func:`.suspects.break_tie`).
        """
        self._check_node(evidence.node)
        if evidence.state == "dead":
            self.dead.setdefault(evidence.node, evidence.reason)
            self.round_found.setdefault(evidence.node, self.rounds)
        elif evidence.state == "local":
            self.local.setdefault(evidence.node, evidence.reason)
        else:
            self.weak.setdefault((evidence.node, evidence.rail), evidence.reason)
        self._version += 1

    def record(self, measurements: Iterable[Measurement]) -> None:
        """Results of the round that is out (or round-0 measurements when none is).

        A planned test (or rail of one) with no measurement is recorded as a timeout: the
        runner does not have to tell a hung member apart from a slow one, it only has to
        stop waiting. Results for tests that are not in the round (a straggler from an
        earlier one) are ignored; members and kind are taken from the plan.
        """
        got = list(measurements)
        for m in got:
            for node in m.members:
                self._check_node(node)
        plan, self._out = self._out, None
        self._version += 1
        if plan is None:
            self._keep(got)
            return
        by_test: dict[str, list[Measurement]] = defaultdict(list)
        for m in got:
            by_test[m.test_id].append(m)
        stamped = []
        for t in plan.tests:
            mine = by_test.get(t.test_id, [])
            stamped += [Measurement(t.test_id, t.members, m.status, m.gbps, m.latency_us, m.rail, t.kind, plan.index,
                                    m.error, m.duration_s) for m in mine]
            if any(m.rail is None for m in mine):
                continue
            missing = [r for r in t.rails if r not in {m.rail for m in mine}] if mine else [None]
            stamped += [Measurement(t.test_id, t.members, TIMEOUT, rail=r, kind=t.kind, round=plan.index,
                                    error=f"no result within {plan.timeout_s:g} s", duration_s=plan.timeout_s)
                        for r in missing]
        self._keep(stamped)
        self.round_time.append(max((m.duration_s or 0.0 for m in stamped), default=0.0))
        self.rounds = plan.index
        if not self._cover:
            for lane in self._verdicts()[0]:
                for node in lane.bad:
                    self.round_found.setdefault(node, self.rounds)

    def _keep(self, measurements: list[Measurement]) -> None:
        self.measurements.extend(measurements)
        self._tally.add(measurements)

    def status(self) -> RoundProgress:
        """Rounds done, an upper bound on the rounds to come, and (when already known) nodes resolved.

        Cheap: it never judges or infers; ``resolved`` comes from the inference the last
        :meth:`record` ran, if it ran one.
        """
        cover = len(self._cover) if self._cover is not None else 0
        at_most = self.rounds + cover + max(self.config.max_extra_rounds - self.extra_rounds, 0)
        resolved = None
        if self._cache is not None and self._cache[0] == self._version:
            lanes = self._cache[1]
            bad = set().union(*(lane.bad for lane in lanes))
            open_nodes = set().union(*(lane.pending | lane.untested for lane in lanes))
            open_nodes |= {m for lane in lanes for g in lane.to_split for m in g}
            resolved = self.nodes - len(open_nodes - bad)
        return RoundProgress(self.rounds, at_most, self._seq, self.nodes, resolved)

    # -- planning --------------------------------------------------------------------------

    def next_round(self) -> Round | None:
        """The next round of disjoint tests, or None when nothing is left to learn."""
        if self._out is not None:
            raise RuntimeError(f"round {self._out.index} is still out: record its results first")
        if self._finished:
            return None
        if self._cover is None:
            self._cover = self._build_cover()
        groups: list[tuple[int, ...]] = []
        purpose = "cover"
        while self._cover and not groups:
            hopeless = self._hopeless()
            groups = [g for g in self._cover.pop(0) if not set(g) & hopeless]
        if not groups:
            if self.extra_rounds >= self.config.max_extra_rounds:
                self._finished = True
                return None
            planned = self._resolve_round()
            if not planned:
                self._finished = True
                return None
            self.extra_rounds += 1
            return self._issue(planned)
        return self._issue([(g, purpose) for g in groups])

    def _issue(self, planned: list[tuple[tuple[int, ...], str]]) -> Round:
        rails = tuple(range(self.config.rails)) if self.config.rails > 1 else ()
        tests = []
        for members, purpose in planned:
            self._seq += 1
            tests.append(PlannedTest(f"t{self._seq}", members, "pair" if len(members) == 2 else "group", purpose,
                                     rails))
        self._out = Round(self.rounds + 1, tuple(tests), self.config.test_timeout_s)
        return self._out

    def _build_cover(self) -> list[list[tuple[int, ...]]]:
        # Round 0's star exchanges all share node 0: if node 0 is slow they are all equally
        # slow and look fine, so they never stand in for a node's own pair test.
        seen = {n for m in self.measurements if m.kind != "star" for n in m.members}
        live = [n for n in range(self.nodes) if n not in self.dead]
        if self.config.mode == "full" or len(live) <= self.config.round_robin_upto:
            return circle_rounds(live)
        fresh = [n for n in live if n not in seen]
        if self.config.mode == "group":
            return [partition(fresh, -(-len(fresh) // max(self.config.group_size, 2)))] if len(fresh) >= 2 else []
        if len(fresh) < 2:
            return []
        if self.config.pairing == "random":
            self.rng.shuffle(fresh)
        rounds = [halves_matching(fresh)]
        for _ in range(self.config.cover_passes - 1):  # fresh random partners: a flaky node gets more looks
            again = list(fresh)
            self.rng.shuffle(again)
            rounds.append(halves_matching(again))
        return rounds

    def _hopeless(self) -> set[int]:
        """Nodes that failed outright with k partners during a long cover: stop spending rounds on them.

        Judging speed needs baselines; failures and timeouts do not, so this check is
        cheap enough to run before every one of full mode's N-1 rounds.
        """
        out = set(self.dead)
        if self.config.mode != "full":
            return out
        fails, oks, k = self._tally.fail_partners, self._tally.oks, self.config.repeat_k
        return out | {x for x, ps in fails.items() if len(ps) >= k and len(ps) > oks.get(x, 0)}

    def _resolve_round(self) -> list[tuple[tuple[int, ...], str]]:
        lanes, _ = self._verdicts()
        bad = set().union(*(lane.bad for lane in lanes))
        trusted = set.intersection(*(lane.trusted for lane in lanes)) - bad
        pending = set().union(*(lane.pending | lane.untested for lane in lanes)) - bad
        used: set[int] = set()
        planned: list[tuple[tuple[int, ...], str]] = []
        for members in sorted({m for lane in lanes for m in lane.to_split}):
            if set(members) & (used | bad):
                continue
            half = len(members) // 2
            planned += [(members[:half], "bisect"), (members[half:], "bisect")]
            self.split.add(frozenset(members))
            used.update(members)
        met = self._met()
        fails = {x: max(len(lane.failing(x)) for lane in lanes) for x in pending}
        order = sorted(pending - used, key=lambda x: (-fails[x], x))
        keys = {t: self.rng.random() for t in trusted}
        partners = self._partner_order(trusted, keys, lanes)
        free = 0  # partners[:free] are all used: the scan for a mate starts after them
        for x in order:
            if x in used:
                continue
            while free < len(partners) and partners[free] in used:
                free += 1
            mate = next((partners[i] for i in range(free, len(partners))
                         if partners[i] not in used and partners[i] != x and partners[i] not in met[x]), None)
            if mate is None:  # nobody known good is free: two suspects still tell each other apart
                mate = next((y for y in order if y not in used and y != x and y not in met[x]), None)
            if mate is None:  # every partner met (a small cluster): repeat a failed pair still open
                mate = next((y for y in [*partners, *order] if y not in used and y != x
                             and self._unsettled(lanes, (min(x, y), max(x, y)))), None)
            if mate is None:
                continue
            self.partner_uses[mate] += 1
            planned.append((tuple(sorted((x, mate))), "second"))
            used.update((x, mate))
        for members in sorted({m for lane in lanes for m, s in lane.repeats.items() if s == "pending"}):
            if not set(members) & (used | bad):
                planned.append((members, "repeat"))
                used.update(members)
        if planned:
            planned += self._controls([t for t in partners if t not in used], met)
        return planned

    def _partner_order(self, trusted: set[int], keys: dict[int, float], lanes: list[LaneVerdict]) -> list[int]:
        """Known-good partners, least used first, then the most passes on every rail, then at random.

        Three stable sorts, last key first, give the order of one sort by the tuple of
        keys; each compares plain numbers, which is what makes ordering 65,536 partners cheap.
        """
        order = sorted(trusted, key=keys.__getitem__)
        if len(lanes) == 1:
            passes = lanes[0].passes
            order.sort(key=lambda t: -passes.get(t, 0))
        else:
            order.sort(key=lambda t: -min(lane.pass_count(t) for lane in lanes))
        uses = self.partner_uses
        if uses:
            order.sort(key=lambda t: uses.get(t, 0))
        return order

    def _unsettled(self, lanes: list[LaneVerdict], members: tuple[int, ...]) -> bool:
        """A test of these members failed, and repeating it can still change its verdict on some rail."""
        runs = [lane.by_members.get(members, []) for lane in lanes]
        return any(o.positive for obs in runs for o in obs) and not all(settled(obs, self.config) for obs in runs)

    def _controls(self, idle: list[int], met: dict[int, set[int]]) -> list[tuple[tuple[int, ...], str]]:
        """Pairs of idle known-good nodes, run beside the real tests, while figures are too few to judge by.

        A second pass after round 0's star, or after a bisection's few groups, would
        otherwise be one pair judged against nothing. Idle nodes cost no extra round.
        """
        need = (self.config.min_baseline - self._tally.figures + 1) // 2
        out: list[tuple[tuple[int, ...], str]] = []
        free = list(idle)
        while need > 0 and len(free) >= 2:
            a = free.pop(0)
            b = next((y for y in free if y not in met[a]), None)
            if b is None:
                continue
            free.remove(b)
            out.append(((min(a, b), max(a, b)), "control"))
            need -= 1
        return out

    def _met(self) -> dict[int, set[int]]:
        return self._tally.met

    # -- inference and the outcome ----------------------------------------------------------

    def _verdicts(self) -> tuple[list[LaneVerdict], list[Observation]]:
        key = self._version
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1], self._cache[2]
        observations = judge(self.measurements, self.config)
        per_lane: dict[int, list[Observation]] = defaultdict(list)
        for o in observations:
            per_lane[o.rail].append(o)
        live = {n for n in range(self.nodes) if n not in self.dead}
        lanes = []
        for rail in range(self.config.rails):
            weak = {n: why for (n, r), why in self.weak.items() if r is None or r == rail}
            lanes.append(infer(live, per_lane[rail], dead=self.dead, weak=weak, split=self.split,
                               config=self.config))
        self._cache = (key, lanes, observations)
        return lanes, observations

    def outcome(self) -> Outcome:
        """Suspects, healthy nodes and cost so far; open questions become ``unresolved`` once done."""
        lanes, observations = self._verdicts()
        suspects = build_suspects(lanes, self.dead, self.weak)
        flagged = {s.node for s in suspects}
        open_nodes = set().union(*(lane.pending | lane.untested for lane in lanes)) - flagged
        open_nodes |= {m for lane in lanes for g in lane.to_split for m in g} - flagged
        if self._finished:
            if open_nodes and not set().union(*(lane.trusted for lane in lanes)):
                # No node is known good: no further pair test can tell the open ones apart.
                tied, explained = break_tie(lanes, open_nodes, self.local)
                suspects += tied
                open_nodes -= explained
            else:
                suspects += unresolved(lanes, open_nodes)
            flagged |= open_nodes
        healthy = [n for n in range(self.nodes) if n not in flagged and n not in open_nodes]
        return Outcome(self.nodes, sorted(suspects, key=lambda s: (s.node, s.rail if s.rail is not None else -1)),
                       healthy, self.rounds, len({m.test_id for m in self.measurements if m.round > 0}),
                       self._finished, self.config.mode, observations, round(sum(self.round_time), 3),
                       dict(self.round_found), self.config.rails)

    def _check_node(self, node: int) -> None:
        if not 0 <= node < self.nodes:
            raise ValueError(f"node {node} is outside 0..{self.nodes - 1}")


class _Tally:
    """Running counts over every measurement kept, so that planning a round costs that round's size.

    Each of full mode's N-1 rounds asks who failed with whom, and each second pass asks
    who has met whom; recounting all measurements for every round made planning cubic in
    the cluster size. What is counted is exactly what those recounts counted.
    """

    def __init__(self) -> None:
        self.fail_partners: dict[int, set[int]] = defaultdict(set)
        self.oks: dict[int, int] = defaultdict(int)
        self.met: dict[int, set[int]] = defaultdict(set)
        self.figures = 0  # completed figures outside round 0's star: what a second pass is judged by

    def add(self, measurements: Iterable[Measurement]) -> None:
        for m in measurements:
            if m.status in (TIMEOUT, FAILED):
                for x in m.members:
                    self.fail_partners[x].update(y for y in m.members if y != x)
            elif m.status == OK:
                for x in m.members:
                    self.oks[x] += 1
                if m.kind != "star" and m.gbps is not None:
                    self.figures += 1
            if len(m.members) == 2:
                a, b = m.members
                self.met[a].add(b)
                self.met[b].add(a)


def halves_matching(nodes: list[int]) -> list[tuple[int, ...]]:
    """Node i with node i + n/2: in rack-ordered host lists, pairs cross racks and spines.

    With an odd count the middle node joins the last pair as a trio, so every node is
    tested in the first round.
    """
    half = len(nodes) // 2
    tests: list[tuple[int, ...]] = [(nodes[i], nodes[i + half]) for i in range(half)]
    if len(nodes) % 2 and tests:
        tests[-1] = (*tests[-1], nodes[-1])
    return tests


def circle_rounds(nodes: list[int]) -> list[list[tuple[int, ...]]]:
    """Round-robin by the circle method: n-1 rounds (n even) of n/2 disjoint pairs, every pair once."""
    ring: list[int | None] = list(nodes) + ([None] if len(nodes) % 2 else [])
    size = len(ring)
    rounds: list[list[tuple[int, ...]]] = []
    for _ in range(size - 1):
        pairs: list[tuple[int, ...]] = []
        for i in range(size // 2):
            a, b = ring[i], ring[size - 1 - i]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(pairs)
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return rounds


def partition(nodes: list[int], count: int) -> list[tuple[int, ...]]:
    """``count`` contiguous groups of two or more (fewer when there are not enough nodes)."""
    count = max(1, min(count, len(nodes) // 2))
    size, extra = divmod(len(nodes), count)
    out, start = [], 0
    for i in range(count):
        end = start + size + (i < extra)
        out.append(tuple(nodes[start:end]))
        start = end
    return out
