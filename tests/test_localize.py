"""The localisation scheduler against the simulated cluster, over many seeds.

Each property is checked on the real scheduler (``Localizer``) driven round by round,
with every round checked for disjointness as it is issued.
"""

from __future__ import annotations

import itertools
import json
import math

import pytest

from gpu_preflight.localize.judge import Baseline, healthy_reference, judge
from gpu_preflight.localize.model import FAILED, OK, LocalizeConfig, Measurement, NodeEvidence, Round
from gpu_preflight.localize.scheduler import Localizer, circle_rounds, halves_matching, partition
from gpu_preflight.localize.simulate import Scenario, SimCluster, SimResult, make_scenario, simulate


def drive(scenario: Scenario, config: LocalizeConfig, *, seed: int = 0, dead_known: bool = True,
          star: bool = False) -> tuple[Localizer, list[Round]]:
    """Run like ``simulate`` but keep every plan, asserting disjointness as rounds come out."""
    loc = Localizer(scenario.nodes, config, seed=seed)
    cluster = SimCluster(scenario, seed)
    if dead_known:
        for n in scenario.dead:
            loc.add_evidence(NodeEvidence(n, "dead", "missing in round 0"))
    if star:
        loc.record(cluster.star())
    plans = []
    while (plan := loc.next_round()) is not None:
        members = [m for t in plan.tests for m in t.members]
        assert len(members) == len(set(members)), f"round {plan.index} reuses a node: {plan.tests}"
        if dead_known:
            assert not set(members) & scenario.dead, "a node known dead was scheduled"
        plans.append(plan)
        loc.record(cluster.run(plan))
    return loc, plans


@pytest.mark.parametrize("mode", ["quick", "group"])
def test_one_bad_node_is_found_in_two_rounds_without_false_positives(mode: str) -> None:
    for seed in range(40):
        r = simulate(make_scenario(64, 1, noise=0.1, seed=seed), LocalizeConfig(mode=mode), seed=seed)
        assert r.exact, (seed, r.found, r.false_positives, r.missed)
        limit = 2 if mode == "quick" else 2 + math.ceil(math.log2(16))
        assert r.rounds_to_find <= limit, (seed, r.rounds_to_find)


def test_one_bad_among_1024_in_two_rounds() -> None:
    for seed in range(3):
        r = simulate(make_scenario(1024, 1, noise=0.1, seed=seed), LocalizeConfig(), seed=seed)
        assert r.exact and r.rounds_to_find <= 2, (seed, r.rounds_to_find, r.false_positives, r.missed)


@pytest.mark.parametrize("mode", ["quick", "group", "full"])
def test_two_bad_nodes_within_log2_plus_two(mode: str) -> None:
    nodes = 16 if mode == "full" else 256
    for seed in range(15):
        r = simulate(make_scenario(nodes, 2, noise=0.1, seed=seed), LocalizeConfig(mode=mode), seed=seed)
        assert r.exact, (seed, r.false_positives, r.missed)
        if mode != "full":
            assert r.rounds_to_find <= math.ceil(math.log2(nodes)) + 2


def test_two_bad_nodes_paired_together_are_both_named() -> None:
    """Each fails its second pass, which explains away their shared first test: one more round each."""
    sc = Scenario(16, slow={3: 0.3, 11: 0.3})  # halves pairing puts 3 with 11 in round 1
    loc, plans = drive(sc, LocalizeConfig())
    assert (3, 11) in [t.members for t in plans[0].tests]
    assert loc.outcome().excluded == [3, 11] and loc.round_found == {3: 3, 11: 3}


def test_slow_link_names_both_ends_as_link_not_nodes() -> None:
    for seed in range(10):
        sc = make_scenario(32, 0, slow_links=[(5, 21)], noise=0.05, seed=seed)  # 5 meets 21 in round 1
        loc, _ = drive(sc, LocalizeConfig(), seed=seed)
        out = loc.outcome()
        assert out.excluded == [], seed
        links = {(s.node, s.peers) for s in out.suspects if s.kind == "link"}
        assert links == {(5, (21,)), (21, (5,))}, (seed, out.suspects)
        assert 5 not in out.healthy and 21 not in out.healthy and len(out.healthy) == 30


def test_slow_link_in_full_mode_matrix() -> None:
    r = simulate(make_scenario(12, 0, slow_links=[(2, 7)], noise=0.05, seed=1), LocalizeConfig(mode="full"))
    assert r.links_found == [(2, 7)] and not r.outcome.excluded


def test_flaky_node_is_found_over_repeats_and_named_intermittent() -> None:
    found = 0
    for seed in range(20):
        sc = make_scenario(16, 1, fault="flaky", flaky_p=0.5, seed=seed)
        r = simulate(sc, LocalizeConfig(mode="full"), seed=seed)
        assert not r.false_positives, (seed, r.false_positives)
        found += not r.missed
    assert found >= 19


def test_one_transient_failure_is_not_a_drain() -> None:
    """Pair (0, 8) fails once; every later test passes: k-of-n re-tests both, then the pair, and clears them."""
    loc = Localizer(16, LocalizeConfig())
    failed_once = False
    while (plan := loc.next_round()) is not None:
        got = []
        for t in plan.tests:
            if t.members == (0, 8) and not failed_once:
                failed_once = True
                got.append(Measurement(t.test_id, t.members, FAILED, error="connection reset"))
            else:
                got.append(Measurement(t.test_id, t.members, OK, 40.0, 8.0))
        loc.record(got)
    out = loc.outcome()
    assert failed_once and out.suspects == [] and out.healthy == list(range(16))
    repeats = [m for m in loc.measurements if m.members == (0, 8)]
    assert len(repeats) == 1 + LocalizeConfig().clear_after  # the pair itself re-tested until it cleared


def test_more_repeats_cost_more_rounds_but_still_convict() -> None:
    sc = make_scenario(32, 1, seed=2)
    two = simulate(sc, LocalizeConfig(repeat_k=2, repeat_n=3))
    three = simulate(sc, LocalizeConfig(repeat_k=3, repeat_n=4))
    assert two.exact and three.exact
    assert three.rounds_to_find == two.rounds_to_find + 1


@pytest.mark.parametrize("mode", ["quick", "full", "group"])
def test_dead_node_known_in_round_zero_is_never_scheduled(mode: str) -> None:
    sc = make_scenario(16, 1, fault="dead", seed=4)
    loc, plans = drive(sc, LocalizeConfig(mode=mode))  # drive() asserts the dead node is never in a plan
    assert plans and loc.outcome().excluded == sorted(sc.dead)
    assert loc.outcome().suspects[0].reason.startswith("dead")


@pytest.mark.parametrize("mode", ["quick", "full", "group"])
def test_node_that_hangs_mid_run_is_named_and_does_not_stall(mode: str) -> None:
    """The dead node never answers; the scheduler records timeouts and stops scheduling it."""
    for seed in range(5):
        sc = make_scenario(16, 1, fault="dead", seed=seed)
        loc, plans = drive(sc, LocalizeConfig(mode=mode), dead_known=False, seed=seed)
        out = loc.outcome()
        assert out.excluded == sorted(sc.dead), (seed, out.suspects)
        assert out.suspects[0].reason == "timeout"
        dead = next(iter(sc.dead))
        hung = sum(1 for p in plans for t in p.tests if dead in t.members)
        assert hung <= (4 if mode == "full" else 6), hung  # a few timeouts, not one per round


def test_healthy_cluster_gives_an_empty_exclude_list() -> None:
    for mode, nodes in (("quick", 128), ("group", 128), ("full", 12)):
        for seed in range(10):
            r = simulate(make_scenario(nodes, 0, noise=0.1, seed=seed), LocalizeConfig(mode=mode), seed=seed)
            assert r.outcome.excluded == [] and r.outcome.suspects == [], (mode, seed, r.outcome.suspects)
            assert r.outcome.healthy == list(range(nodes))


def test_mixed_faults_rails_and_star_keep_rounds_disjoint() -> None:
    for mode, seed in itertools.product(("quick", "full", "group"), range(4)):
        nodes = 12 if mode == "full" else 48
        sc = make_scenario(nodes, 3, fault="mixed", noise=0.1, rails=2, slow_links=[(1, 2)], seed=seed)
        loc, plans = drive(sc, LocalizeConfig(mode=mode, rails=2), seed=seed, star=seed % 2 == 1)
        assert plans and loc.outcome().done
        assert set(sc.bad_nodes()) <= set(loc.outcome().excluded) | set(loc.outcome().healthy) | {
            s.node for s in loc.outcome().suspects}


def test_full_mode_covers_every_pair_once() -> None:
    for nodes in (2, 5, 8, 13):
        rounds = circle_rounds(list(range(nodes)))
        pairs = [p for r in rounds for p in r]
        assert sorted(pairs) == sorted(itertools.combinations(range(nodes), 2))
        for r in rounds:
            flat = [m for p in r for m in p]
            assert len(flat) == len(set(flat))
    loc, plans = drive(Scenario(9, noise=0.05), LocalizeConfig(mode="full"))
    tested = {tuple(sorted(m.members)) for m in loc.measurements}
    assert tested == set(itertools.combinations(range(9), 2)) and len(plans) == 9


def test_star_round_zero_cuts_the_pair_rounds() -> None:
    for seed in range(10):
        sc = make_scenario(64, 1, noise=0.1, seed=seed)
        if 0 in sc.bad_nodes():
            continue
        r = simulate(sc, LocalizeConfig(), seed=seed, star=True)
        assert r.exact and r.rounds_to_find == 1, (seed, r.rounds_to_find)
    r = simulate(Scenario(16, slow={0: 0.3}), LocalizeConfig(), star=True)  # node 0 itself is the bad one
    assert r.exact, r.outcome.suspects


def test_rail_fault_names_the_rail() -> None:
    for seed in range(6):
        sc = make_scenario(32, 1, fault="rail", rails=4, noise=0.05, seed=seed)
        r = simulate(sc, LocalizeConfig(rails=4), seed=seed)
        ((node, rail),) = sc.slow_rails
        assert [(s.node, s.rail) for s in r.outcome.suspects] == [(node, rail)], (seed, r.outcome.suspects)


def test_two_nodes_say_plainly_they_cannot_tell_and_exclude_nobody() -> None:
    r = simulate(Scenario(2, slow={1: 0.3}), LocalizeConfig())
    assert r.outcome.suspects == []  # one figure, judged against itself: only a floor can call it slow
    r = simulate(Scenario(2, slow={1: 0.3}), LocalizeConfig(floor_gbps=30.0))
    assert r.outcome.excluded == [] and r.outcome.healthy == []
    assert [(s.node, s.kind, s.peers) for s in r.outcome.suspects] == [(0, "undecided", (1,)), (1, "undecided", (0,))]
    assert simulate(Scenario(2), LocalizeConfig(floor_gbps=30.0)).outcome.healthy == [0, 1]


def test_two_nodes_break_the_tie_with_node_local_evidence() -> None:
    for bad in (0, 1):
        sc = Scenario(2, slow={bad: 0.3}, local={bad: "node checks failed: network.interfaces"})
        out = simulate(sc, LocalizeConfig(floor_gbps=30.0)).outcome
        assert out.excluded == [bad] and out.healthy == [1 - bad], out.suspects
        assert out.suspects[0].reason == "local: node checks failed: network.interfaces"
    both = Scenario(2, slow={1: 0.3}, local={0: "x", 1: "y"})  # evidence on both ends decides nothing
    assert {s.kind for s in simulate(both, LocalizeConfig(floor_gbps=30.0)).outcome.suspects} == {"undecided"}
    healthy = Scenario(2, local={1: "node checks failed"})  # local evidence alone convicts nobody
    assert simulate(healthy, LocalizeConfig(floor_gbps=30.0)).outcome.healthy == [0, 1]


def test_odd_node_count_puts_one_trio_in_the_first_round() -> None:
    assert halves_matching([0, 1, 2, 3, 4]) == [(0, 2), (1, 3, 4)]
    for bad in range(9):
        r = simulate(Scenario(9, slow={bad: 0.3}), LocalizeConfig())
        assert r.outcome.excluded == [bad] and r.rounds_to_find == 2, (bad, r.outcome.suspects)


def test_small_clusters_start_with_the_round_robin() -> None:
    """Up to 8 nodes, one round of pairs is too few figures to judge by: every pair is tested."""
    for nodes in (3, 4, 5, 8):
        for bad, seed in itertools.product(range(nodes), range(3)):
            for sc in (Scenario(nodes, slow={bad: 0.05}, noise=0.1), Scenario(nodes, dead={bad}, noise=0.1)):
                loc, plans = drive(sc, LocalizeConfig(), seed=seed, dead_known=False)
                assert loc.outcome().excluded == [bad], (nodes, bad, seed, loc.outcome().suspects)
                assert len(plans) <= nodes + 2
        for seed in range(10):
            assert simulate(Scenario(nodes, noise=0.1), LocalizeConfig(), seed=seed).outcome.excluded == []


def test_partition_and_plans_round_trip_json() -> None:
    assert partition(list(range(10)), 3) == [(0, 1, 2, 3), (4, 5, 6), (7, 8, 9)]
    loc = Localizer(8, LocalizeConfig(rails=2))
    plan = loc.next_round()
    assert plan is not None
    assert Round.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan
    m = Measurement("t1", (0, 4), OK, 12.5, 9.0, 1)
    assert Measurement.from_dict(json.loads(json.dumps(m.to_dict()))) == m
    with pytest.raises(RuntimeError):
        loc.next_round()  # the round is still out
    loc.record([])  # nothing came back: every test is a timeout, and the run goes on
    assert {m.status for m in loc.measurements} == {"timeout"}


def test_judge_reference_ignores_the_slow_mode_and_uses_the_floor() -> None:
    config = LocalizeConfig()
    base = healthy_reference([50.0] * 6 + [15.0] * 6, config)  # bisection: half the figures hold the fault
    assert base.reference == 50.0 and base.threshold(config) == pytest.approx(30.0)  # 50 - 4 x 10 % assumed
    few = healthy_reference([40.0, 36.0, 15.0], config)  # the fast ones' median
    assert few.reference == 38.0 and few.kept == 2 and few.threshold(config) == pytest.approx(22.8)
    assert Baseline(40.0, 4.0, 30).threshold(config) == 24.0  # noisy: the spread rule is the stricter
    assert Baseline(40.0, 5.0, 30).threshold(config) == 22.5  # but never below (1 - 0.25)² of the reference
    assert Baseline(40.0, 1.0, 30).threshold(config) == 30.0  # quiet: the fraction rule is
    assert Baseline(40.0, 1.0, 19).threshold(config) == 24.0  # too few figures: at least 10 % noise assumed
    assert Baseline(40.0, 1.0, 19).threshold(LocalizeConfig(assumed_noise=0.05)) == 30.0
    ms = [Measurement(f"t{i}", (i, i + 10), OK, g) for i, g in enumerate([40.0, 40.0, 40.0, 25.0, 23.0])]
    obs = judge(ms, config)
    assert [o.positive for o in obs] == [False, False, False, False, True]  # threshold 24 = 40 - 4 x 4
    floored = judge(ms, LocalizeConfig(floor_gbps=30.0))
    assert [o.reason for o in floored] == ["ok", "ok", "ok", "below_floor", "below_floor"]


def test_scenario_validation() -> None:
    with pytest.raises(ValueError):
        make_scenario(4, 5)
    with pytest.raises(ValueError):
        make_scenario(4, 0, slow_links=[(1, 1)])
    with pytest.raises(ValueError):
        LocalizeConfig(repeat_k=4, repeat_n=3)
    assert isinstance(simulate(make_scenario(4, 0)), SimResult)


def test_spent_budget_leaves_open_nodes_unresolved_and_excluded() -> None:
    sc = Scenario(16, slow={3: 0.3})
    r = simulate(sc, LocalizeConfig(max_extra_rounds=0))  # the cover round only: 3 and its partner stay open
    assert r.outcome.done and r.outcome.rounds == 1
    assert [(s.node, s.reason) for s in r.outcome.suspects] == [(3, "unresolved"), (11, "unresolved")]
    assert r.outcome.excluded == [3, 11] and 11 not in r.outcome.healthy
    loc = Localizer(16)
    assert loc.outcome().healthy == [] and not loc.outcome().done  # nothing tested yet is not healthy


def test_a_rail_without_a_result_is_a_timeout_and_stray_results_are_ignored() -> None:
    loc = Localizer(4, LocalizeConfig(rails=2, round_robin_upto=0))
    plan = loc.next_round()
    assert plan is not None and [t.rails for t in plan.tests] == [(0, 1), (0, 1)]
    first, second = plan.tests
    loc.record([Measurement(first.test_id, first.members, OK, 40.0, rail=0),
                Measurement(first.test_id, first.members, OK, 41.0, rail=1),
                Measurement(second.test_id, second.members, OK, 40.5, rail=0),
                Measurement("t999", (0, 1), OK, 1.0)])
    got = {(m.test_id, m.rail): m.status for m in loc.measurements}
    assert got == {(first.test_id, 0): OK, (first.test_id, 1): OK, (second.test_id, 0): OK,
                   (second.test_id, 1): "timeout"}
