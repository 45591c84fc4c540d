"""Who is bad, who is known good, and what is still open: inference over judged tests of one rail.

A test is positive when it failed, hung or was slow; a positive test says that *some*
member, or the path between members, is at fault. The rules, in the language of
adaptive group testing (definite defectives with noise):

* **Counting by partner.** A node's record is one vote per distinct set of partners
  (repeats of the same pair vote once, by majority; a tie abstains), and failing
  votes count only as far as their partner sets are disjoint, so re-testing one bad link,
  or the nested groups of a bisection, cannot convict a node beside the culprit.
* **Trusted.** A node is a known-good partner when it passed at least once and every
  failing test it was in is explained — by another member already found bad, or by a
  failed smaller test inside it that leaves this node out (a failed half of a failed
  group) — or when it is *cleared*: it passed ``n - k + 1`` times (it can no longer fail
  k of n), or so often that too few live partners are left for k failures (three nodes:
  one pass).
* **Bad.** A node is bad when it failed with at least ``k`` disjoint partner sets, one
  of them made only of nodes known good on evidence that does not involve it (the second
  pass) and decisively (an error, a hang, or a figure noise does not explain: see
  ``LocalizeConfig``; repeats of one pair multiply their fluke chances), and failed with
  at least ``fail_ratio`` of all its partners. A failing vote is explained away when a
  partner in it failed decisively elsewhere (see ``_convict``); the verdicts are
  recomputed from the dead nodes up until they no longer change, so they do not depend
  on the order of nodes or tests.
* **Open.** A node with an unexplained failure in a pair (or a group of three) that is
  neither bad nor cleared needs a test against a trusted partner. A failed group of four
  or more is bisected; when both halves pass, each member is tested on its own (a flaky
  node may simply have passed its half). A failed pair or group whose members are all
  cleared is a link hypothesis: the same members are repeated until they fail k times (a
  bad link, or fabric between the halves: every member named as a link/group suspect) or
  pass ``n - k + 1`` times (a transient, dismissed).
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict

import msgspec

from .model import LocalizeConfig, Observation

REASON_ORDER = ("timeout", "wrong", "failed", "below_floor", "slow", "latency")
HARD = {"timeout", "wrong", "failed", "below_floor"}  # outcomes noise alone does not produce


class Record(msgspec.Struct, dict=True):
    """One node's votes on one rail: per distinct partner set, its observations.

    The votes are counted once, on first use, and kept: a record is complete when
    :func:`infer` returns, and the scheduler and the suspects ask for them many times.
    """

    by_partners: dict[frozenset[int], list[Observation]] = {}

    def votes(self) -> dict[frozenset[int], bool]:
        """Per partner set: True when most of its repeats failed, False when most passed; a tie abstains.

        The dict is shared by every caller: read it, never change it.
        """
        return self._votes

    @functools.cached_property
    def _votes(self) -> dict[frozenset[int], bool]:
        out = {}
        for p, obs in self.by_partners.items():
            if len(obs) == 1:
                out[p] = obs[0].positive
                continue
            balance = 2 * sum(o.positive for o in obs) - len(obs)
            if balance:
                out[p] = balance > 0
        return out


class LaneVerdict(msgspec.Struct):
    """The inference on one rail."""

    bad: dict[int, str]
    trusted: set[int]
    cleared: set[int]
    pending: set[int]
    untested: set[int]
    to_split: list[tuple[int, ...]]
    repeats: dict[tuple[int, ...], str]
    records: dict[int, Record]
    weak: dict[int, str]
    family: dict[int, list[frozenset[int]]]
    vouched: dict[int, list[frozenset[int]]]
    by_members: dict[tuple[int, ...], list[Observation]]
    passes: dict[int, int] = {}

    def failing(self, node: int) -> list[frozenset[int]]:
        rec = self.records.get(node)
        return [p for p, failed in rec.votes().items() if failed] if rec else []

    def passing(self, node: int) -> list[frozenset[int]]:
        rec = self.records.get(node)
        return [p for p, failed in rec.votes().items() if not failed] if rec else []

    def pass_count(self, node: int) -> int:
        """``len(self.passing(node))`` without building the list."""
        return self.passes.get(node, 0)


def infer(live: set[int], observations: list[Observation], *, dead: dict[int, str], weak: dict[int, str],
          split: set[frozenset[int]], config: LocalizeConfig) -> LaneVerdict:
    """Run the rules of the module doc over one rail's observations."""
    records: dict[int, Record] = defaultdict(Record)
    by_members: dict[tuple[int, ...], list[Observation]] = defaultdict(list)
    hubs = _hubs(observations)
    for o in observations:
        members = o.members
        skip = hubs.get(o.kind, ())
        if len(members) == 2:
            a, b = members
            by_members[members if a < b else (b, a)].append(o)
            voters: tuple[tuple[int, frozenset[int]], ...] = ((a, frozenset((b,))), (b, frozenset((a,))))
        else:
            by_members[tuple(sorted(members))].append(o)
            whole = frozenset(members)
            voters = tuple((x, whole - {x}) for x in members)
        for x, partners in voters:
            if x not in skip:
                mine = records[x].by_partners
                same = mine.get(partners)
                if same is None:
                    mine[partners] = [o]
                else:
                    same.append(o)
    fails: dict[int, list[frozenset[int]]] = {}
    passes: dict[int, int] = {}
    passing: dict[int, list[frozenset[int]]] = {}
    for x, rec in records.items():
        v = rec.votes()
        failed = [p for p, f in v.items() if f]
        if failed:  # only nodes with a failing vote: the conviction rule walks them every pass
            fails[x] = failed
        passing[x] = ok = [p for p, f in v.items() if not f]
        passes[x] = len(ok)
    clear_after, few = config.clear_after, len(live) - 1 - config.repeat_k  # few: too few partners left to fail k
    cleared = {x for x in live if (n := passes.get(x, 0)) >= clear_after or 1 <= n > few}
    elsewhere = _failing_subsets(by_members)
    bad, family, vouched = _convict(_Votes(live, records, fails, passing, weak, elsewhere, config), dead)

    def explained(x: int, p: frozenset[int]) -> bool:
        return bool(p & bad.keys()) or x in elsewhere.get(p | {x}, ())

    trusted: set[int] = set()
    pending: set[int] = set()
    untested: set[int] = set()
    to_split: list[tuple[int, ...]] = []
    repeats: dict[tuple[int, ...], str] = {}
    for x in live:
        if x in bad:
            continue
        against = fails.get(x)
        if passes.get(x, 0) >= 1 and (x in cleared or (x not in weak and (not against or all(explained(x, p)
                                                                                           for p in against)))):
            trusted.add(x)
        if x not in records and x not in weak:
            untested.add(x)
            continue
        if x in cleared:
            continue
        if x in weak or (against and any(len(p) <= 2 and not (p & bad.keys()) for p in against)):
            pending.add(x)
    for members, obs in by_members.items():
        if bad and not bad.keys().isdisjoint(members):
            continue
        positives = int(obs[0].positive) if len(obs) == 1 else sum(o.positive for o in obs)
        if 2 * positives < len(obs):
            continue
        big = len(members) >= 4
        if big and frozenset(members) not in split:
            to_split.append(members)
            continue
        if big and not all(passes.get(m, 0) >= 1 for m in members):
            continue  # bisection is still under way below this group
        if big:  # every half passed: test each member on its own before blaming the group
            pending.update(m for m in members if m not in cleared)
        if not all(m in cleared for m in members):
            continue
        if positives >= config.repeat_k:
            repeats[members] = "confirmed"
        elif len(obs) - positives >= config.clear_after:
            repeats[members] = "dismissed"
        else:
            repeats[members] = "pending"
    return LaneVerdict(bad, trusted, cleared, pending, untested, sorted(to_split), repeats, dict(records), weak,
                       family, vouched, dict(by_members), passes)


class _Votes(msgspec.Struct):
    """The votes of one rail, and the questions the conviction rule asks of them."""

    live: set[int]
    records: dict[int, Record]
    fails: dict[int, list[frozenset[int]]]
    passing: dict[int, list[frozenset[int]]]
    weak: dict[int, str]
    elsewhere: dict[frozenset[int], set[int]]
    config: LocalizeConfig
    _with: dict[int, dict[int, int]] = {}

    def passes_without(self, t: int, x: int) -> int:
        """How many of ``t``'s passing partner sets leave ``x`` out.

        Per node, how often each partner appears is counted once: the conviction rule
        asks this of every partner of a node that failed with hundreds of them.
        """
        mine = self.passing.get(t, ())
        counts = self._with.get(t)
        if counts is None:
            counts = self._with[t] = {}
            for p in mine:
                for m in p:
                    counts[m] = counts.get(m, 0) + 1
        return len(mine) - counts.get(x, 0)

    def explained(self, x: int, p: frozenset[int], bad: dict[int, str]) -> bool:
        return bool(p & bad.keys()) or x in self.elsewhere.get(p | {x}, ())

    def vouches(self, t: int, x: int, bad: dict[int, str]) -> bool:
        """Whether ``t`` is known good on evidence that does not involve ``x``."""
        if t in bad or t not in self.live:
            return False
        ok = self.passes_without(t, x)
        if ok >= self.config.clear_after or (ok >= 1 and len(self.live) - 1 - ok < self.config.repeat_k):
            return True
        return ok >= 1 and t not in self.weak and all(self.explained(t, p, bad) for p in self.fails.get(t, [])
                                                      if x not in p)

    def decisive(self, x: int, p: frozenset[int]) -> bool:
        """A hard failure, or failures that noise explains only with probability under ``decisive_fluke``.

        Repeats with the same partners are independent draws of the noise, so their fluke
        chances multiply: a small cluster, where every pair has been tested, decides a
        marginal figure by repeating it.
        """
        positives = [o for o in self.records[x].by_partners[p] if o.positive]
        return any(o.reason in HARD for o in positives) or (
            bool(positives) and math.prod(o.fluke for o in positives) <= self.config.decisive_fluke)


def _convict(v: _Votes, dead: dict[int, str]) -> tuple[dict[int, str], dict[int, list[frozenset[int]]],
                                                        dict[int, list[frozenset[int]]]]:
    """The bad nodes: a fixed point of the conviction rule, recomputed from the dead nodes up.

    A node's *strong* votes are decisive failures against partners known good without it.
    A failing vote of x is explained away when a partner in it has a strong vote of its own
    that does not involve x: the partner is the likelier culprit, so the vote says nothing
    about x. This is what keeps the innocent partner of a bad node from being convicted by
    one unlucky figure elsewhere; two bad nodes paired together cost one more round.
    """
    config = v.config
    bad: dict[int, str] = dict(dead)
    seen: list[dict[int, str]] = []
    family: dict[int, list[frozenset[int]]] = {}
    vouched: dict[int, list[frozenset[int]]] = {}
    for _ in range(12):
        strong = {t: [p for p in ps if v.decisive(t, p) and all(v.vouches(m, t, bad) for m in p)]
                  for t, ps in v.fails.items() if t in v.live and t not in dead}
        found: dict[int, str] = dict(dead)
        family, vouched = {}, {}
        for x, own in strong.items():
            if not own:
                continue
            counted = [p for p in v.fails[x] if p in own or not any(x not in q for t in p for q in strong.get(t, []))]
            chosen = independent(counted, first=min(own, key=lambda p: (len(p), sorted(p))))
            total = len(chosen) + (x in v.weak)
            passes = len(v.passing.get(x, []))
            if total >= config.repeat_k and total >= config.fail_ratio * (total + passes):
                found[x] = _reason(x, v.records[x], passes)
                family[x], vouched[x] = chosen, own
        if found == bad:
            break
        if found in seen:  # the rules cycle: keep only the convictions the cycle agrees on
            bad = {n: why for n, why in found.items() if n in bad}
            break
        seen.append(bad)
        bad = found
    return bad, family, vouched


def settled(obs: list[Observation], config: LocalizeConfig) -> bool:
    """Whether these members were tested often enough: they failed ``k`` times or passed ``n - k + 1``.

    The k-of-n rule for a unit (see ``LocalizeConfig``): once either is reached, more
    repeats cannot change the majority that decides the vote.
    """
    positives = sum(o.positive for o in obs)
    return positives >= config.repeat_k or len(obs) - positives >= config.clear_after


def _hubs(observations: list[Observation]) -> dict[str, set[int]]:
    """The node in every one of round 0's star exchanges (node 0), keyed by the kind ``star``.

    Figures are judged against their own kind, so the hub is judged against itself: if it
    is slow, every figure is equally slow and reads as fine, and one figure below the rest
    says the *partner* is slow. Star tests are evidence about the partners only.
    """
    common: set[int] | None = None
    for o in observations:
        if o.kind == "star":
            common = set(o.members) if common is None else common & set(o.members)
    return {"star": common} if common else {}


def _failing_subsets(by_members: dict[tuple[int, ...], list[Observation]]) -> dict[frozenset[int], set[int]]:
    """For each failed group, the members that a failed smaller test inside it leaves out.

    Bisection's logic: when group G failed and its half H failed too, G's failure is
    accounted for by H, so the members of G outside H are not implicated by G.
    """
    failing = [frozenset(m) for m, obs in by_members.items() if 2 * sum(o.positive for o in obs) >= len(obs)]
    out: dict[frozenset[int], set[int]] = {}
    for big in failing:
        if len(big) < 3:
            continue
        for small in failing:
            if len(small) < len(big) and small < big:
                out.setdefault(big, set()).update(big - small)
    return out


def independent(failed: list[frozenset[int]], first: frozenset[int] | None = None) -> list[frozenset[int]]:
    """A largest-first-fit family of pairwise disjoint partner sets (``first`` forced in).

    Failures only count as separate votes when they share no partner: the nested groups
    of a bisection all contain the same culprit, and must not add up against its
    neighbour, which sat in every one of them.
    """
    chosen: list[frozenset[int]] = []
    used: set[int] = set()
    for p in ([first] if first is not None else []) + sorted(failed, key=lambda q: (len(q), sorted(q))):
        if not p & used:
            chosen.append(p)
            used |= p
    return chosen


def _reason(x: int, rec: Record, passes: int) -> str:
    seen = {o.reason for obs in rec.by_partners.values() for o in obs if o.positive}
    base = next((r for r in REASON_ORDER if r in seen), "slow")
    return "flaky" if passes else base


def confidence(positives: list[list[Observation]], vouched: list[frozenset[int]], passes: int, node: int) -> float:
    """1 - the chance that every failing vote is a fluke, scaled by how consistent the votes are.

    Each failing vote's fluke chance is its measurement's (a normal tail for a slow figure,
    ``error_fluke`` for an error); a vote whose partners were not known good on their own
    evidence is at least a coin toss, since the partner may be the one at fault.
    """
    chance = 1.0
    for obs in positives:
        fluke = min((o.fluke for o in obs if o.positive), default=0.5)
        partners = frozenset(m for o in obs for m in o.members) - {node}
        chance *= fluke if partners in vouched else max(fluke, 0.5)
    consistency = len(positives) / (len(positives) + passes) if positives else 0.0
    return round((1 - chance) * consistency, 4)
