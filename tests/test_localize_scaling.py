"""Localisation planning grows with the work it plans, not with its square.

``Localizer.record`` once scanned the whole round's results for each planned test, and
full mode recounted every measurement before each of its N-1 rounds: 65,536 nodes took
25.7 s and full mode at 1,024 nodes five minutes. Timing ratios on a shared 2-core
machine could not tell that apart reliably at test sizes (the old code's 2,048 -> 16,384
ratio was x23, a linear one x7-x10), so these tests count work instead: how often a
measurement's ``test_id`` and ``status`` are read, per measurement kept. Linear planning
reads each a bounded number of times per round that judges; quadratic planning reads it
once per planned test of its round, cubic full mode once per round.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gpu_preflight.localize.judge import _within
from gpu_preflight.localize.model import LocalizeConfig, Measurement
from gpu_preflight.localize.simulate import make_scenario, simulate


@contextmanager
def counted_reads(*fields: str) -> Iterator[list[int]]:
    """Count reads of these fields of every Measurement while the block runs (slot descriptors wrapped)."""
    reads = [0]
    saved = {f: Measurement.__dict__[f] for f in fields}

    def wrap(slot: Any) -> property:
        def get(self: Measurement) -> Any:
            reads[0] += 1
            return slot.__get__(self, Measurement)
        return property(get, slot.__set__)

    for f, slot in saved.items():
        setattr(Measurement, f, wrap(slot))
    try:
        yield reads
    finally:
        for f, slot in saved.items():
            setattr(Measurement, f, slot)


def reads_per_measurement(nodes: int, mode: str) -> float:
    with counted_reads("test_id", "status") as reads:
        r = simulate(make_scenario(nodes, 1, noise=0.1, seed=1), LocalizeConfig(mode=mode), seed=1)
    assert r.exact
    return reads[0] / r.outcome.tests


def test_quick_mode_reads_each_result_a_bounded_number_of_times() -> None:
    small, large = reads_per_measurement(512, "quick"), reads_per_measurement(4096, "quick")
    assert small < 60 and large < 60, (small, large)  # scanning the round per test: ~2,000 at 4,096 nodes


def test_full_mode_reads_do_not_grow_with_the_cluster() -> None:
    small, large = reads_per_measurement(32, "full"), reads_per_measurement(128, "full")
    assert large < 2 * small + 10, (small, large)  # recounting before each round: ~130 at 128 nodes


def test_the_bisected_inliers_are_the_filtered_ones() -> None:
    rng = random.Random(3)
    for _ in range(300):
        values = sorted(round(rng.gauss(50, 5), rng.choice((0, 1, 3, 9))) for _ in range(rng.randint(1, 60)))
        ref = rng.choice(values) if rng.random() < 0.5 else rng.uniform(30, 70)
        limit = rng.choice((0.0, abs(rng.gauss(0, 6)), values[0] * 1e-17))
        assert _within(values, ref, limit) == [v for v in values if abs(v - ref) <= limit]
