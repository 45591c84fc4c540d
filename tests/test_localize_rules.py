"""Each localisation inference rule on its own, on hand-built observations.

The simulator tests (tests/test_localize*.py) judge the rules together over many seeds,
and a change to one rule can pass all of them while it changes verdicts in rarer cases
(issue 26: a one-token change to the conviction rule passed 110 of them and blamed a
healthy node in one run of 19,200). Here every rule of :mod:`gpu_preflight.localize.infer`
and :mod:`gpu_preflight.localize.suspects` gets a few nodes and a few tests built by hand,
so that what the rule decides is asserted exactly, on both sides of the line where it
flips. The default settings are used throughout: ``k`` = 2 failing partner sets convict,
``n - k + 1`` = 2 passing ones clear, ``fail_ratio`` 0.2, ``decisive_fluke`` 1e-3.
"""

from __future__ import annotations

import itertools

import msgspec
import pytest

from gpu_preflight.localize.infer import (
    LaneVerdict,
    Record,
    _failing_subsets,
    _hubs,
    _reason,
    _Votes,
    confidence,
    independent,
    infer,
    settled,
)
from gpu_preflight.localize.model import LocalizeConfig, Observation
from gpu_preflight.localize.simulate import make_scenario, simulate
from gpu_preflight.localize.suspects import break_tie, build_suspects

CFG = LocalizeConfig()
_ids = itertools.count()


def ok(*members: int, kind: str | None = None, rail: int = 0) -> Observation:
    """A passing test of ``members``."""
    return Observation(f"t{next(_ids)}", 1, members, rail, kind or _kind(members), False, "ok")


def bad(*members: int, reason: str = "failed", fluke: float = 0.05, kind: str | None = None,
        rail: int = 0) -> Observation:
    """A failing test of ``members``: an error by default (decisive), or ``reason="slow"`` with its fluke chance."""
    return Observation(f"t{next(_ids)}", 1, members, rail, kind or _kind(members), True, reason, fluke=fluke)


def on_rail(rail: int, observations: list[Observation]) -> list[Observation]:
    """The same observations, judged on ``rail``."""
    return [msgspec.structs.replace(o, rail=rail) for o in observations]


def _kind(members: tuple[int, ...]) -> str:
    return "pair" if len(members) == 2 else "group"


def run(observations: list[Observation], nodes: int, *, dead: dict[int, str] | None = None,
        weak: dict[int, str] | None = None, split: tuple[tuple[int, ...], ...] = (),
        config: LocalizeConfig = CFG) -> LaneVerdict:
    """``infer`` over ``nodes`` nodes the way the scheduler calls it: the dead are not live."""
    dead = dead or {}
    return infer(set(range(nodes)) - dead.keys(), observations, dead=dead, weak=weak or {},
                 split={frozenset(s) for s in split}, config=config)


def votes_of(observations: list[Observation], nodes: int, *, weak: dict[int, str] | None = None,
             config: LocalizeConfig = CFG) -> _Votes:
    """The questions the conviction rule asks, over the records ``infer`` builds."""
    lane = run(observations, nodes, weak=weak, config=config)
    fails = {x: lane.failing(x) for x in lane.records if lane.failing(x)}
    passing = {x: lane.passing(x) for x in lane.records}
    return _Votes(set(range(nodes)), lane.records, fails, passing, weak or {},
                  _failing_subsets(lane.by_members), config)


def f(*nodes: int) -> frozenset[int]:
    return frozenset(nodes)


# -- one vote per partner set (Record.votes) ------------------------------------------------


def test_repeats_of_one_partner_set_vote_once_by_majority_and_a_tie_abstains() -> None:
    rec = Record()
    rec.by_partners = {f(1): [bad(0, 1)], f(2): [bad(0, 2), ok(0, 2), bad(0, 2)], f(3): [bad(0, 3), ok(0, 3)],
                       f(4): [ok(0, 4), ok(0, 4), bad(0, 4)], f(5): [ok(0, 5)]}
    assert rec.votes() == {f(1): True, f(2): True, f(4): False, f(5): False}


def test_three_failures_with_one_partner_are_one_vote_not_a_conviction() -> None:
    lane = run([bad(0, 1), bad(0, 1), bad(0, 1), ok(1, 2), ok(1, 3)], 6)
    assert lane.failing(0) == [f(1)] and lane.bad == {}


# -- round 0's star: the hub has no vote (_hubs) ----------------------------------------------


def test_the_star_hub_is_the_node_in_every_star_test_and_gets_no_vote() -> None:
    stars = [bad(0, 1, kind="star"), ok(0, 2, kind="star"), ok(0, 3, kind="star")]
    assert _hubs(stars) == {"star": {0}}
    assert _hubs([ok(0, 1), ok(2, 3)]) == {}
    lane = run(stars, 4)
    assert 0 not in lane.records and lane.untested == {0}
    assert lane.failing(1) == [f(0)] and lane.passing(2) == [f(0)]
    assert 1 in lane.pending and lane.trusted == {2, 3}


# -- cleared: it can no longer fail k of n --------------------------------------------------------


def test_cleared_after_n_minus_k_plus_one_passes_whatever_failed() -> None:
    one = run([ok(0, 1), bad(0, 2)], 8)
    two = run([ok(0, 1), ok(0, 3), bad(0, 2)], 8)
    assert 0 not in one.cleared and 0 not in one.trusted and 0 in one.pending
    assert 0 in two.cleared and 0 in two.trusted and 0 not in two.pending


def test_cleared_when_too_few_live_partners_are_left_for_k_failures() -> None:
    """Three nodes: one pass leaves one partner, fewer than k = 2; four nodes with n = 4 need two."""
    assert run([ok(0, 1), bad(0, 2)], 3).cleared == {0, 1}
    wide = LocalizeConfig(repeat_k=2, repeat_n=4)  # clear_after 3
    assert run([ok(0, 1), ok(0, 2)], 4, config=wide).cleared == {0}  # 4 - 1 - 2 = 1 partner left
    assert run([ok(0, 1), ok(0, 2)], 5, config=wide).cleared == set()  # 2 partners left: could still fail k
    assert run([ok(0, 1)], 4, config=wide).cleared == set()
    assert run([ok(0, 1), ok(0, 2), ok(0, 3)], 5, config=wide).cleared == {0}  # clear_after reached
    assert run([bad(0, 1)], 2).cleared == set()  # two nodes: no pass, nothing cleared, though no partner is left
    assert run([ok(0, 1)], 2).cleared == {0, 1}


# -- the failed smaller test inside a failed group (_failing_subsets) ----------------------------


def test_a_failed_half_accounts_for_its_failed_group() -> None:
    by_members = {(0, 1, 2, 3): [bad(0, 1, 2, 3)], (0, 1): [bad(0, 1)], (2, 3): [ok(2, 3)],
                  (4, 5, 6): [bad(4, 5, 6), ok(4, 5, 6)], (4, 5): [bad(4, 5), ok(4, 5), ok(4, 5)],
                  (7, 8, 9): [bad(7, 8, 9)], (7, 8): [bad(7, 8), ok(7, 8)]}
    assert _failing_subsets(by_members) == {f(0, 1, 2, 3): {2, 3}, f(7, 8, 9): {9}}


def test_a_group_member_left_out_by_its_failed_half_is_trusted_on_one_pass() -> None:
    obs = [bad(0, 1, 2, 3), bad(0, 1), ok(2, 5), ok(3, 6)]
    lane = run(obs, 8)
    assert {2, 3} <= lane.trusted and lane.cleared == set()
    assert not {2, 3} & lane.pending
    without_half = run([bad(0, 1, 2, 3), ok(2, 5), ok(3, 6)], 8)
    assert not {2, 3} & without_half.trusted


# -- known good on evidence that does not involve x (_Votes.vouches) ----------------------------


def test_a_partner_vouches_after_n_minus_k_plus_one_passes_without_x() -> None:
    v = votes_of([bad(0, 1), ok(1, 3), ok(1, 4), bad(1, 5, reason="slow", fluke=0.2)], 8)
    assert v.passes_without(1, 0) == 2 and v.vouches(1, 0, {})
    v = votes_of([bad(0, 1), ok(1, 3), ok(0, 1), ok(0, 1), bad(1, 5, reason="slow", fluke=0.2)], 8)
    assert v.passes_without(1, 0) == 1  # passes with x itself say nothing about x
    assert not v.vouches(1, 0, {})


def test_a_partner_vouches_on_one_pass_when_too_few_partners_are_left() -> None:
    three = votes_of([bad(0, 1), ok(1, 2)], 3, weak={1: "rank missing"})
    assert three.vouches(1, 0, {})  # 3 - 1 - 1 = 1 < k
    four = votes_of([bad(0, 1), ok(1, 2)], 4, weak={1: "rank missing"})
    assert not four.vouches(1, 0, {})  # 4 - 1 - 1 = 2: could still fail k; and weak


def test_a_partner_vouches_on_one_pass_when_its_other_failures_are_explained() -> None:
    obs = [bad(0, 1), ok(1, 3), bad(1, 5, reason="slow", fluke=0.2)]
    v = votes_of(obs, 8)
    assert not v.vouches(1, 0, {})
    assert v.vouches(1, 0, {5: "failed"})  # its failure with 5 is explained by 5
    alone = votes_of([ok(1, 3), bad(1, 5, reason="slow", fluke=0.2)], 8)
    assert alone.vouches(1, 5, {}) and not alone.vouches(1, 0, {})  # a failure with x itself is not held against it
    assert not votes_of(obs, 8, weak={1: "rank missing"}).vouches(1, 0, {5: "failed"})
    assert not v.vouches(3, 0, {3: "failed"})  # a bad node vouches for nobody
    half = [bad(0, 1, 2, 3), bad(0, 1), ok(2, 5)]
    assert votes_of(half, 8).vouches(2, 6, {})  # its failed group is accounted for by the failed half (0, 1)
    assert not votes_of(half[::2], 8).vouches(2, 6, {})
    gone = _Votes({0, 1, 2}, v.records, v.fails, v.passing, {}, {}, CFG)
    assert not gone.vouches(3, 0, {})  # nor does a node that is not live


# -- decisive: an error, or a figure noise explains only by a long chance (_Votes.decisive) -----


def test_an_error_is_decisive_and_a_slow_figure_only_below_the_fluke_limit() -> None:
    obs = [bad(0, 1, reason="timeout", fluke=0.5), bad(0, 2, reason="slow", fluke=1e-3),
           bad(0, 3, reason="slow", fluke=1.1e-3), bad(0, 4, reason="latency", fluke=1e-4),
           bad(0, 5, reason="below_floor", fluke=0.5)]
    v = votes_of(obs, 8)
    assert [v.decisive(0, f(n)) for n in (1, 2, 3, 4, 5)] == [True, True, False, True, True]


def test_repeats_of_a_marginal_figure_multiply_their_fluke_chances() -> None:
    v = votes_of([bad(0, 1, reason="slow", fluke=0.03), bad(0, 1, reason="slow", fluke=0.03),
                  bad(0, 2, reason="slow", fluke=0.04), bad(0, 2, reason="slow", fluke=0.04),
                  bad(0, 3, reason="slow", fluke=2e-3), ok(0, 3), bad(0, 3, reason="slow", fluke=0.9)], 8)
    assert v.decisive(0, f(1))  # 9e-4
    assert not v.decisive(0, f(2))  # 1.6e-3
    assert not v.decisive(0, f(3))  # a passing repeat is no fluke chance: 2e-3 x 0.9


# -- conviction (_convict) -------------------------------------------------------------------


def _convictable(extra: list[Observation]) -> list[Observation]:
    """Node 0 failed hard with 1 and 2; 1 and 2 passed with others (1 once, 2 twice)."""
    return [bad(0, 1), bad(0, 2), ok(1, 3), ok(2, 5), ok(2, 6), *extra]


def test_k_disjoint_failures_with_known_good_partners_convict() -> None:
    lane = run(_convictable([]), 8)
    assert lane.bad == {0: "failed"}
    assert lane.family[0] == [f(1), f(2)] and lane.vouched[0] == [f(1), f(2)]
    assert lane.trusted == {1, 2, 3, 5, 6}  # 1 on one pass: its one failure is explained by 0
    assert lane.pending == set()
    one = run([bad(0, 1), ok(1, 3), ok(2, 5), ok(2, 6)], 8)
    assert one.bad == {} and 0 in one.pending and 1 not in one.trusted


def test_conviction_needs_one_decisive_failure_against_a_known_good_partner() -> None:
    marginal = [bad(0, 1, reason="slow", fluke=0.01), bad(0, 2, reason="slow", fluke=0.01), ok(1, 3), ok(1, 4),
                ok(2, 5), ok(2, 6)]
    assert run(marginal, 8).bad == {}
    marginal[0] = bad(0, 1, reason="slow", fluke=1e-3)
    assert run(marginal, 8).bad == {0: "slow"}
    unknown = [bad(0, 1), bad(0, 2)]  # partners never passed with anyone else
    assert run(unknown, 8).bad == {}


def test_conviction_needs_fail_ratio_of_all_partners() -> None:
    base = [bad(0, 1), bad(0, 2), ok(1, 3), ok(1, 4), ok(2, 5), ok(2, 6)]
    eight = run(base + [ok(0, n) for n in range(3, 11)], 12)
    nine = run(base + [ok(0, n) for n in range(3, 12)], 12)
    assert eight.bad == {0: "flaky"}  # 2 >= 0.2 x (2 + 8)
    assert nine.bad == {} and 0 in nine.cleared  # 2 < 0.2 x (2 + 9)


def test_weak_evidence_counts_as_one_failing_vote() -> None:
    obs = [bad(0, 1), ok(1, 3), ok(1, 4)]
    assert run(obs, 8, weak={0: "rank missing"}).bad == {0: "failed"}
    assert run(obs, 8).bad == {}
    assert run(obs, 8, weak={5: "rank missing"}).pending == {0, 5}


def test_a_vote_with_a_partner_that_failed_decisively_elsewhere_is_explained_away() -> None:
    """1 failed hard with known-good 3 and 4: 0's failure with 1 is 1's, and 0's one other failure is not enough."""
    obs = [bad(1, 3), bad(1, 4), ok(3, 5), ok(3, 6), ok(4, 5), ok(4, 6), bad(0, 1), bad(0, 2), ok(2, 5), ok(2, 6)]
    lane = run(obs, 8)
    assert lane.bad == {1: "failed"}
    assert 0 in lane.pending and 0 not in lane.trusted  # its failure with 2 is still open


def test_a_partner_failing_decisively_only_against_x_does_not_explain_x_away() -> None:
    """Issue 26's one-token change (``x not in q`` -> ``t not in q``) fails here.

    2 failed hard with 0 alone and passed with nobody else: 2's strong vote is against 0
    itself, so it cannot make 2 the likelier culprit of that same test. 0 failed hard with
    known-good 1 too: two disjoint failures, one of them strong.
    """
    obs = [bad(0, 1), ok(1, 5), ok(1, 6), bad(0, 2), ok(0, 3), ok(0, 4)]
    lane = run(obs, 8)
    assert lane.bad == {0: "flaky"}
    assert lane.family[0] == [f(1), f(2)] and lane.vouched[0] == [f(1)]


def test_a_strong_vote_counts_even_when_its_partner_failed_decisively_elsewhere() -> None:
    """0 failed hard with 1 and 2, both known good without it; 2 also failed hard with known-good 7.

    2's failure with 7 does not make 2 the likelier culprit of a test against which 2
    itself vouches for 0 (two passes without 0): a strong vote is never explained away.
    """
    obs = [*_convictable([]), bad(2, 7), ok(7, 3), ok(7, 4)]
    lane = run(obs, 8)
    assert lane.bad == {0: "failed"} and lane.vouched[0] == [f(1), f(2)]
    assert {2, 7} <= lane.trusted  # each passed twice: a failure between them is a link question


def test_the_strong_vote_is_forced_into_the_disjoint_family() -> None:
    """0 failed hard in a trio with known-good 1 and 2, and marginally with each alone: one disjoint vote, not two."""
    obs = [bad(0, 1, 2), ok(1, 3), ok(1, 4), ok(2, 5), ok(2, 6),
           bad(0, 1, reason="slow", fluke=0.3), bad(0, 2, reason="slow", fluke=0.3)]
    lane = run(obs, 8)
    assert lane.bad == {}
    assert lane.pending == {0}


def test_when_the_convictions_cycle_only_what_the_cycle_agrees_on_is_kept() -> None:
    """Found by a random search over five-node inputs: the rules alternate between {0} and {2}.

    With nobody bad, 0 is convicted: it failed hard with 1 (known good: two passes
    without 0) and decisively with 2. With 0 bad, 1's failure with 0 is explained, so 1
    and 3 vouch for 2, whose hard failure with them becomes a strong vote: with its failure
    with 4, 2 is convicted, and its strong vote explains 0's vote with 2 away, so 0 is one
    vote short. With 2 bad, 1's failure with 0 is unexplained again, 2's vote is no longer
    strong, and 0 is convicted: a cycle. Neither is kept; both stay open for another test.
    """
    obs = [bad(1, 2, 3, fluke=0.01), bad(2, 4, fluke=0.05), ok(0, 4), bad(0, 2, reason="slow", fluke=1e-4),
           bad(0, 4, reason="slow", fluke=0.01), ok(1, 3), bad(0, 1, fluke=1e-4), ok(1, 2)]
    lane = run(obs, 5)
    assert lane.bad == {}
    assert {0, 2} <= lane.pending


def test_dead_nodes_are_bad_from_the_start_and_explain_their_partners() -> None:
    lane = run([bad(0, 7, reason="timeout"), ok(0, 1)], 8, dead={7: "rank missing"})
    assert lane.bad == {7: "rank missing"}
    assert lane.trusted == {0, 1} and lane.pending == set()


def test_verdicts_do_not_depend_on_the_order_of_tests() -> None:
    obs = [bad(1, 3), bad(1, 4), ok(3, 5), ok(3, 6), ok(4, 5), ok(4, 6), bad(0, 1), bad(0, 2), ok(2, 5), ok(2, 6),
           bad(0, 1, 2, 3), bad(5, 7, reason="slow", fluke=0.2)]
    first = run(obs, 8)
    for order in (obs[::-1], obs[3:] + obs[:3], sorted(obs, key=lambda o: o.members)):
        again = run(order, 8)
        assert (again.bad, again.trusted, again.pending, again.cleared, again.repeats) == \
            (first.bad, first.trusted, first.pending, first.cleared, first.repeats)


def test_disjoint_family_is_smallest_first_with_the_forced_set_first() -> None:
    failed = [f(1, 2), f(2), f(3), f(3, 4, 5), f(6, 7)]
    assert independent(failed) == [f(2), f(3), f(6, 7)]
    assert independent(failed, first=f(1, 2)) == [f(1, 2), f(3), f(6, 7)]


def test_the_reason_is_flaky_with_any_pass_else_the_gravest_failure() -> None:
    rec = Record()
    rec.by_partners = {f(1): [bad(0, 1, reason="slow")], f(2): [bad(0, 2, reason="failed")],
                       f(3): [bad(0, 3, reason="timeout"), ok(0, 3)]}
    assert _reason(0, rec, 0) == "timeout"
    assert _reason(0, rec, 1) == "flaky"
    rec.by_partners = {f(1): [bad(0, 1, reason="latency")], f(2): [bad(0, 2, reason="slow")]}
    assert _reason(0, rec, 0) == "slow"
    rec.by_partners = {f(1): [bad(0, 1, reason="latency")]}
    assert _reason(0, rec, 0) == "latency"
    assert _reason(0, Record(), 0) == "slow"  # no failure on record (never convicted so): a slow node


# -- trusted, untested, pending -------------------------------------------------------------------


def test_trusted_needs_a_pass_and_every_failure_explained() -> None:
    lane = run([ok(0, 1), bad(2, 3, reason="slow", fluke=0.3), ok(2, 4)], 8)
    assert {0, 1, 4} <= lane.trusted
    assert 2 not in lane.trusted and 3 not in lane.trusted  # 3: no pass at all
    assert run([ok(0, 1)], 8, weak={0: "rank missing"}).trusted == {1}
    half_explained = run(_convictable([bad(1, 7, reason="slow", fluke=0.2)]), 8)
    assert half_explained.bad == {0: "failed"} and 1 not in half_explained.trusted  # its failure with 7 is open


def test_untested_is_a_node_in_no_test_and_without_weak_evidence() -> None:
    lane = run([ok(0, 1)], 4, weak={3: "rank missing"})
    assert lane.untested == {2}
    assert lane.pending == {3}


def test_open_after_an_unexplained_failure_in_a_pair_or_trio_but_not_a_larger_group() -> None:
    assert run([bad(0, 1)], 8).pending == {0, 1}
    assert run([bad(0, 1, 2)], 8).pending == {0, 1, 2}
    quad = run([bad(0, 1, 2, 3)], 8)
    assert quad.pending == set() and quad.to_split == [(0, 1, 2, 3)]


# -- failed groups: bisect, test alone, or repeat as a unit ------------------------------------


def test_a_failed_group_of_four_is_split_and_a_tie_counts_as_failed() -> None:
    assert run([bad(0, 1, 2, 3)], 8).to_split == [(0, 1, 2, 3)]
    assert run([bad(0, 1, 2, 3), ok(0, 1, 2, 3)], 8).to_split == [(0, 1, 2, 3)]
    assert run([bad(0, 1, 2, 3), ok(0, 1, 2, 3), ok(0, 1, 2, 3)], 8).to_split == []
    assert run([bad(0, 1, 2)], 8).to_split == []  # three: tested member by member instead


def test_a_split_group_waits_for_its_halves_then_tests_each_member_alone() -> None:
    group = (0, 1, 2, 3)
    waiting = run([bad(*group), ok(0, 1), bad(2, 3)], 8, split=(group,))
    assert waiting.to_split == [] and waiting.pending == {2, 3}
    halves_passed = run([bad(*group), ok(0, 1), ok(2, 3)], 8, split=(group,))
    assert halves_passed.pending == {0, 1, 2, 3} and halves_passed.repeats == {}


def test_a_group_with_a_bad_member_asks_nothing_more() -> None:
    obs = [bad(0, 1), bad(0, 2), ok(1, 3), ok(2, 5), ok(2, 6), bad(0, 4, 5, 6)]
    lane = run(obs, 8)
    assert lane.bad == {0: "failed"} and lane.to_split == []


def test_a_failed_pair_of_cleared_nodes_is_repeated_until_k_failures_or_n_minus_k_plus_one_passes() -> None:
    cleared = [ok(0, 2), ok(0, 3), ok(1, 4), ok(1, 5)]
    assert run([*cleared, bad(0, 1)], 8).repeats == {(0, 1): "pending"}
    assert run([*cleared, bad(0, 1), ok(0, 1)], 8).repeats == {(0, 1): "pending"}
    assert run([*cleared, bad(0, 1), bad(0, 1)], 8).repeats == {(0, 1): "confirmed"}
    assert run([*cleared, bad(0, 1), ok(0, 1), bad(0, 1)], 8).repeats == {(0, 1): "confirmed"}
    assert run([*cleared, bad(0, 1), bad(0, 1), ok(0, 1), ok(0, 1)], 8).repeats == {(0, 1): "confirmed"}
    assert run([*cleared, bad(0, 1), ok(0, 1), ok(0, 1)], 8).repeats == {}  # the vote passes: nothing to ask
    one_cleared = [ok(0, 2), ok(0, 3), ok(1, 4), bad(0, 1)]
    assert run(one_cleared, 8).repeats == {} and run(one_cleared, 8).pending == {1}


def test_a_failed_group_of_cleared_nodes_is_dismissed_after_n_minus_k_plus_one_passes() -> None:
    cleared = [ok(0, 3), ok(0, 4), ok(1, 3), ok(1, 4), ok(2, 3), ok(2, 4)]
    assert run([*cleared, bad(0, 1, 2)], 8).repeats == {(0, 1, 2): "pending"}
    assert run([*cleared, bad(0, 1, 2), bad(0, 1, 2)], 8).repeats == {(0, 1, 2): "confirmed"}
    tie = run([*cleared, bad(0, 1, 2), ok(0, 1, 2)], 8)
    assert tie.repeats == {(0, 1, 2): "pending"}
    wide = LocalizeConfig(repeat_k=3, repeat_n=4)  # clear_after 2: the vote can be a tie and be dismissed
    cleared_wide = [*cleared, ok(0, 5), ok(1, 5), ok(2, 5)]
    assert run([*cleared_wide, bad(0, 1, 2), bad(0, 1, 2), ok(0, 1, 2), ok(0, 1, 2)], 8,
               config=wide).repeats == {(0, 1, 2): "dismissed"}
    assert run([*cleared_wide, bad(0, 1, 2), bad(0, 1, 2), ok(0, 1, 2)], 8,
               config=wide).repeats == {(0, 1, 2): "pending"}


def test_settled_after_k_failures_or_n_minus_k_plus_one_passes() -> None:
    assert not settled([bad(0, 1)], CFG)
    assert settled([bad(0, 1), bad(0, 1)], CFG)
    assert not settled([bad(0, 1), ok(0, 1)], CFG)
    assert settled([bad(0, 1), ok(0, 1), ok(0, 1)], CFG)


def test_confidence_is_one_minus_the_fluke_chance_times_consistency() -> None:
    vote = [bad(0, 1, reason="slow", fluke=0.01)]
    assert confidence([vote], [f(1)], 1, 0) == pytest.approx(0.99 * 0.5)
    assert confidence([vote], [], 1, 0) == pytest.approx(0.5 * 0.5)  # unvouched partner: a coin toss
    two = [vote, [bad(0, 2, reason="failed", fluke=0.05), ok(0, 2)]]
    assert confidence(two, [f(1), f(2)], 0, 0) == pytest.approx(1 - 0.01 * 0.05)
    assert confidence([], [], 3, 0) == 0.0


# -- from verdicts to suspects (suspects.py) ---------------------------------------------------


def test_a_node_bad_on_every_rail_is_one_suspect_and_on_some_rails_one_per_rail() -> None:
    def lanes(bad_rails: set[int]) -> list[LaneVerdict]:
        out = []
        for rail in (0, 1):
            obs = _convictable([]) if rail in bad_rails else [ok(0, 1), ok(0, 2), ok(1, 3), ok(2, 5)]
            out.append(run(on_rail(rail, obs), 8))
        return out
    whole = build_suspects(lanes({0, 1}), {}, {})
    assert [(s.node, s.kind, s.reason, s.rail, s.failures) for s in whole] == [(0, "node", "failed", None, 2)]
    one = build_suspects(lanes({1}), {7: "rank missing"}, {(0, 1): "rank missing"})
    assert [(s.node, s.kind, s.reason, s.rail, s.failures) for s in one] == \
        [(7, "node", "dead: rank missing", None, 0), (0, "node", "failed", 1, 3)]


def test_a_confirmed_pair_is_a_link_and_a_node_is_named_by_its_smallest_confirmed_group() -> None:
    cleared = [ok(n, m) for n in range(4) for m in (5, 6)]
    lane = run([*cleared, bad(0, 1), bad(0, 1), bad(0, 1, 2), bad(0, 1, 2)], 8)
    assert lane.repeats == {(0, 1): "confirmed", (0, 1, 2): "confirmed"}
    got = [(s.node, s.kind, s.peers, s.failures) for s in build_suspects([lane], {}, {})]
    assert got == [(0, "link", (1,), 2), (1, "link", (0,), 2), (2, "group", (0, 1), 2)]
    assert not any(s.exclude for s in build_suspects([lane], {}, {}))
    rails = [run(_convictable([]), 8), run(on_rail(1, [*cleared, bad(0, 1), bad(0, 1)]), 8)]
    named = [(s.node, s.kind, s.rail, s.peers) for s in build_suspects(rails, {}, {})]
    assert named == [(0, "node", 0, ()), (1, "link", 1, (0,))]  # 0 is named once, as the node it is


def test_a_tie_is_broken_by_local_evidence_only_when_it_singles_out_some_nodes() -> None:
    lane = run([bad(0, 1), bad(0, 1, 2)], 3)
    stuck = {0, 1, 2}
    out, explained = break_tie([lane], stuck, {0: "xid 79"})
    assert [(s.node, s.kind, s.reason) for s in out] == [(0, "node", "local: xid 79")]
    assert explained == {1, 2}  # every failure of theirs had 0 in it
    triangle = run([bad(0, 1), bad(1, 2), bad(0, 2)], 3)
    out, explained = break_tie([triangle], stuck, {1: "xid 79"})
    assert [(s.node, s.kind, s.peers) for s in out] == [(0, "undecided", (1, 2)), (1, "node", ()),
                                                        (2, "undecided", (0, 1))]
    assert explained == set()  # 0 and 2 also failed together, without 1
    for local in ({}, {0: "a", 1: "b", 2: "c"}):
        out, explained = break_tie([lane], stuck, local)
        assert [(s.node, s.kind, s.exclude) for s in out] == [(0, "undecided", False), (1, "undecided", False),
                                                              (2, "undecided", False)]
        assert explained == set()


# -- regression: the run issue 26 found ----------------------------------------------------------


def test_sixteen_nodes_two_flaky_noise_035_seed_21_blames_the_flaky_ones() -> None:
    """The right code finds 10 and 14; ``x not in q`` -> ``t not in q`` in ``_convict`` blamed 13 and missed 10."""
    sc = make_scenario(16, 2, fault="flaky", noise=0.35, seed=21)
    assert sorted(sc.flaky) == [10, 14]
    r = simulate(sc, LocalizeConfig(), seed=21)
    assert r.outcome.excluded == [10, 14]
    assert 13 not in {s.node for s in r.outcome.suspects}
