"""The vocabulary of localisation: planned tests, measurements, judged observations, suspects.

Everything here is plain data that round-trips through JSON, because the scheduler runs
on rank 0 and its plans and results travel through the job's key-value store (and are
replayed by the simulator and the tests). Nodes are indices ``0..N-1`` in the job's node
order; names are attached only by the report, so the scheduler never sees a host name.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec.structs import asdict

# Measurement statuses. Only "ok" carries figures that are judged for speed; the others
# are positive (bad) outcomes in themselves.
OK, WRONG, FAILED, TIMEOUT = "ok", "wrong", "failed", "timeout"
STATUSES = (OK, WRONG, FAILED, TIMEOUT)
MODES = ("quick", "full", "group")
EVIDENCE_STATES = ("dead", "suspect", "local")


class LocalizeConfig(msgspec.Struct, frozen=True):
    """Thresholds and budgets of the localisation (data, not code: every field has a default).

    ``repeat_k``/``repeat_n``: a node is called bad only after ``k`` failing tests with
    different partners (one of them a partner already known to be good), and cleared after
    ``n - k + 1`` passing ones; a pair or group is re-tested as a unit until it fails ``k``
    times (a link) or passes ``n - k + 1`` times (a transient). ``fail_ratio``: a node
    must also fail at least this fraction of its distinct partners, so hundreds of pair
    tests (full mode) cannot add up to a false drain from noise alone.

    Slow is judged per test kind against ``floor_gbps`` and against the typical speed of
    the same kind: below ``(1 - slow_fraction)`` of it *and* more than ``mad_z`` robust
    standard deviations (1.4826 x MAD) below it, the latter once ``min_baseline`` healthy
    figures exist. Requiring both keeps 10 % measurement noise from calling healthy pairs
    slow while still catching a node at half speed.

    A failing test against known-good partners convicts only when it is *decisive*: an
    error, a hang, wrong data, a figure below the floor, or one so far below the reference
    that noise explains it with probability under ``decisive_fluke`` (the spread is the
    MAD's, or ``assumed_noise`` of the reference while too few figures exist). A marginal
    figure just under the threshold gets the node re-tested instead.
    """

    mode: str = "quick"
    repeat_k: int = 2
    repeat_n: int = 3
    fail_ratio: float = 0.2
    slow_fraction: float = 0.25
    mad_z: float = 4.0
    floor_gbps: float | None = None
    expected_gbps: float | None = None
    latency_factor: float = 2.0
    latency_ceiling_us: float | None = None
    min_baseline: int = 20
    assumed_noise: float = 0.1
    decisive_fluke: float = 1e-3
    error_fluke: float = 0.05
    rails: int = 1
    group_size: int = 16
    pairing: str = "halves"
    cover_passes: int = 1
    round_robin_upto: int = 8
    max_extra_rounds: int = 12
    test_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {self.mode!r}")
        if not 1 <= self.repeat_k <= self.repeat_n:
            raise ValueError("need 1 <= repeat_k <= repeat_n")
        if self.rails < 1:
            raise ValueError("rails must be >= 1")
        if self.pairing not in ("halves", "random"):
            raise ValueError("pairing must be 'halves' or 'random'")
        if self.cover_passes < 1:
            raise ValueError("cover_passes must be >= 1")

    @property
    def clear_after(self) -> int:
        """Passing tests (distinct partners) that clear a node: it can no longer reach k of n."""
        return self.repeat_n - self.repeat_k + 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class PlannedTest(msgspec.Struct, frozen=True):
    """One test of a round: the member nodes run it together, on every rail in ``rails``.

    ``kind`` is ``pair`` (two nodes) or ``group`` (three or more, for bisection);
    ``purpose`` says why it was scheduled: ``cover`` (first look at every node), ``second``
    (a suspect against a known-good partner), ``repeat`` (the same members again, to tell
    a bad link from a transient), ``bisect`` (half of a group that failed) or ``control``
    (two known-good nodes, so that a round's figures have a reference to be judged by).
    """

    test_id: str
    members: tuple[int, ...]
    kind: str
    purpose: str
    rails: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"test_id": self.test_id, "members": list(self.members), "kind": self.kind,
                "purpose": self.purpose, "rails": list(self.rails)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PlannedTest:
        return cls(d["test_id"], tuple(int(m) for m in d["members"]), d["kind"], d["purpose"],
                   tuple(int(r) for r in d.get("rails", ())))


class Round(msgspec.Struct, frozen=True):
    """Disjoint tests that run at the same time; ``index`` 1 is the first after round 0."""

    index: int
    tests: tuple[PlannedTest, ...]
    timeout_s: float

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "timeout_s": self.timeout_s, "tests": [t.to_dict() for t in self.tests]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Round:
        return cls(int(d["index"]), tuple(PlannedTest.from_dict(t) for t in d["tests"]), float(d["timeout_s"]))


class Measurement(msgspec.Struct, frozen=True):
    """What the runner (or the simulator) measured for one test on one rail.

    ``rail`` None means the whole test: a timeout or failure of the test as a whole
    applies to every rail. ``gbps`` is the test's bandwidth figure (busbw of the pair
    all_reduce, or the bidirectional exchange rate), ``latency_us`` its small-message
    time. ``kind`` keys the baseline the figure is judged against (``pair``, ``group``,
    ``star`` for round 0's exchanges with node 0).
    """

    test_id: str
    members: tuple[int, ...]
    status: str = OK
    gbps: float | None = None
    latency_us: float | None = None
    rail: int | None = None
    kind: str = "pair"
    round: int = 0
    error: str | None = None
    duration_s: float | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {self.status!r}")
        if len(set(self.members)) < 2:
            raise ValueError(f"a test needs two or more distinct nodes, got {self.members}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["members"] = list(self.members)
        return {k: v for k, v in d.items() if v is not None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Measurement:
        return cls(str(d["test_id"]), tuple(int(m) for m in d["members"]), d.get("status", OK), d.get("gbps"),
                   d.get("latency_us"), d.get("rail"), d.get("kind", "pair"), int(d.get("round", 0)),
                   d.get("error"), d.get("duration_s"))


class NodeEvidence(msgspec.Struct, frozen=True):
    """What round 0 (or the runner's heartbeats) says about one node on its own.

    ``dead``: it never answered (rank missing, heartbeat stale) — a suspect at once and
    never scheduled again. ``suspect``: one of its ranks went missing; it counts as one
    failing observation, so one more failure against a known-good partner is enough to
    call it bad. ``local``: what the node measured on its own looked wrong (a failed node
    check, a failed or slow node-local collective); it never counts against the node while
    pair tests can decide, and only breaks a tie that they cannot (two nodes, or no node
    known good): the nodes with it are the likelier culprits.
    """

    node: int
    state: str
    reason: str
    rail: int | None = None

    def __post_init__(self) -> None:
        if self.state not in EVIDENCE_STATES:
            raise ValueError(f"node evidence state must be one of {EVIDENCE_STATES}, not {self.state!r}")


class Observation(msgspec.Struct, frozen=True):
    """One measurement judged on one rail: positive means the test as a whole looked bad."""

    test_id: str
    round: int
    members: tuple[int, ...]
    rail: int
    kind: str
    positive: bool
    reason: str
    gbps: float | None = None
    latency_us: float | None = None
    threshold_gbps: float | None = None
    fluke: float = 0.5

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"round": self.round, "members": list(self.members), "kind": self.kind,
                             "result": self.reason}
        if self.gbps is not None:
            d["gbps"] = round(self.gbps, 4)
        if self.latency_us is not None:
            d["latency_us"] = round(self.latency_us, 2)
        if self.threshold_gbps is not None:
            d["threshold_gbps"] = round(self.threshold_gbps, 4)
        return d


class Suspect(msgspec.Struct):
    """A node (or one rail of it) the evidence points at.

    ``kind``: ``node`` (the node itself: exclude it), ``link`` (this node and ``peers``
    are fine with everyone else but slow together: the path between them), ``group``
    (a set slow only as a whole: the fabric between its halves), ``undecided`` (this node
    and ``peers`` failed together and no node is known good to tell them apart: two
    nodes, or a fault they all share). Only ``node`` suspects are excluded;
    ``unresolved`` nodes (budget spent before a verdict) are excluded too, because an
    unexamined node must never read as healthy. ``undecided`` nodes are not excluded:
    one of them may be healthy, so the report says plainly that it cannot tell.
    """

    node: int
    kind: str
    reason: str
    confidence: float
    rail: int | None = None
    peers: tuple[int, ...] = ()
    evidence: list[Observation] = []
    passes: int = 0
    failures: int = 0

    @property
    def exclude(self) -> bool:
        return self.kind == "node"


class Outcome(msgspec.Struct):
    """Where the localisation stands: suspects, the nodes cleared, and what it cost."""

    nodes: int
    suspects: list[Suspect]
    healthy: list[int]
    rounds: int
    tests: int
    done: bool
    mode: str
    observations: list[Observation]
    duration_s: float = 0.0
    round_found: dict[int, int] = {}
    rails: int = 1

    @property
    def excluded(self) -> list[int]:
        return sorted({s.node for s in self.suspects if s.exclude})


class RoundProgress(msgspec.Struct, frozen=True):
    """Where a localisation stands after a round, for a progress display (never for a verdict).

    ``rounds_at_most``: the rounds planned so far plus the budget of extra ones, an upper
    bound that only falls. ``resolved``: nodes with no question left open, known only
    when the round's results were judged anyway (``None`` during full mode's round-robin,
    where judging after every round is what used to make it cubic).
    """

    round: int
    rounds_at_most: int
    tests: int
    nodes: int
    resolved: int | None = None

