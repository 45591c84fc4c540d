"""Judge measurements: is this test's figure slow, its latency high, or its outcome a failure?

A fault only ever makes a link slower, so the reference is the typical speed of the
*healthy* tests of the same kind, not of all of them: the location starts at the upper
quartile, figures below ``(1 - slow_fraction)²`` of it — slow even next to a figure that
is itself just slow — are set aside (far enough out that noise alone rarely lands there,
so the spread is not cut short); the median of the rest is the reference, and its spread
is the standard deviation of the figures within three MADs of it. With one bad node in a
thousand this is the plain median/MAD; during bisection, where half of the tests contain the
fault, the plain median would sit between the two modes and call nothing slow.

The spread rule (``mad_z`` robust standard deviations) is what keeps 10 % noise from
calling healthy pairs slow across a 512-pair round; it needs ``min_baseline`` healthy
figures to be trusted (the MAD of five figures is itself noise). Below that, e.g. the
few groups of a bisection or a cluster of four, the spread is taken to be
``assumed_noise`` of the reference, and the reference is ``expected_gbps`` when given.
Noise that large and figures that few must still leave a positive threshold: a figure
below ``(1 - slow_fraction)²`` of the reference is slow whatever the spread says (CPU
workers assume 30 % noise, and 4 x 30 % would otherwise ask for a negative speed and call
nothing slow). The floor (``floor_gbps``, e.g. the profile's node-link floor) applies
always, and is what catches a cluster where most links are slow.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable

import msgspec

from .model import OK, LocalizeConfig, Measurement, Observation

MAD_SIGMA = 1.4826  # MAD x this estimates the standard deviation of normal noise
TRUNCATED_3SIGMA = 1.0136  # sd of a normal cut at +-3 sd, back to the full sd


class Baseline(msgspec.Struct, frozen=True):
    """The healthy reference of one scale, its spread, and how many figures the spread rests on."""

    reference: float
    sigma: float
    kept: int

    def spread(self, config: LocalizeConfig) -> float:
        """The noise to judge by: the MAD's once enough figures back it, else ``assumed_noise``.

        The MAD of three figures is itself noise, in either direction, so it is not used.
        """
        if self.kept >= config.min_baseline:
            return self.sigma
        return config.assumed_noise * self.reference

    def threshold(self, config: LocalizeConfig) -> float:
        """Below this a figure is slow: both the fraction rule and the spread rule agree; always below the floor.

        The spread rule never asks for less than ``(1 - slow_fraction)²`` of the reference,
        so the threshold stays a positive fraction of it however noisy the figures are.
        """
        spread_rule = max(self.reference - config.mad_z * self.spread(config), self.reference * far(config))
        limit = min(self.reference * (1 - config.slow_fraction), spread_rule)
        if config.floor_gbps is not None:
            limit = max(limit, config.floor_gbps)
        return limit


def far(config: LocalizeConfig) -> float:
    """The fraction of a reference that is slow even next to a just-slow figure: ``(1 - slow_fraction)²``."""
    return (1 - config.slow_fraction) ** 2


def _quantile(values: list[float], q: float, *, ordered: bool = False) -> float:
    ordered_values = values if ordered else sorted(values)
    pos = q * (len(ordered_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered_values) - 1)
    return ordered_values[lo] + (ordered_values[hi] - ordered_values[lo]) * (pos - lo)


def healthy_reference(values: list[float], config: LocalizeConfig, *, higher_is_better: bool = True) -> Baseline:
    """Reference and spread of the healthy figures among ``values`` (see the module doc).

    The figures are sorted once: what is kept of them stays sorted, and the deviations
    from the median form two sorted runs, which is what makes a median of a full mode's
    half a million figures cheap enough to take after every round.
    """
    ordered = sorted(values)
    if higher_is_better:
        start = _quantile(ordered, 0.75, ordered=True)
        kept = ordered[bisect.bisect_left(ordered, start * far(config)):]
    else:
        start = _quantile(ordered, 0.25, ordered=True)
        kept = ordered[:bisect.bisect_right(ordered, start * config.latency_factor)]
    ref = statistics.median(kept)
    sigma = MAD_SIGMA * statistics.median([abs(v - ref) for v in kept])
    inliers = _within(kept, ref, 3 * sigma)
    if len(inliers) >= 3:
        # The MAD locates the outliers; the spread of what is left is the sharper estimate
        # (the MAD alone is only 37 % efficient: from 30 figures it is often off by a third).
        sigma = statistics.pstdev(inliers, ref) * TRUNCATED_3SIGMA
    if higher_is_better and config.expected_gbps is not None and len(kept) < config.min_baseline:
        ref = config.expected_gbps
    return Baseline(ref, sigma, len(kept))


def _within(ordered: list[float], ref: float, limit: float) -> list[float]:
    """The figures ``v`` with ``abs(v - ref) <= limit``, found by bisection in sorted figures.

    ``abs(v - ref)`` falls (in floating point too) as ``v`` rises to ``ref`` and grows
    after it, so the figures within the limit are one run; each side is bisected with
    the very test a filter would apply, so the run is the same.
    """
    mid = bisect.bisect_left(ordered, ref)
    lo = bisect.bisect_left(ordered, True, hi=mid, key=lambda v: abs(v - ref) <= limit)
    hi = bisect.bisect_left(ordered, True, lo=mid, key=lambda v: abs(v - ref) > limit)
    return ordered[lo:hi]


def _tail(z: float) -> float:
    """One-sided normal tail: how likely noise alone puts a healthy figure z sigmas out."""
    return 0.5 * math.erfc(z / math.sqrt(2))


def scale(kind: str) -> str:
    """Kinds whose figures share a scale: pair and group tests both report all_reduce busbw,
    which nccl-tests defines to be comparable across group sizes; round 0's star exchange
    is a different measurement and keeps its own baseline."""
    return "star" if kind == "star" else "busbw"


def baselines(measurements: Iterable[Measurement], config: LocalizeConfig) -> tuple[dict[str, Baseline],
                                                                                   dict[str, Baseline]]:
    """Bandwidth and latency baselines per scale (see :func:`scale`), from completed measurements."""
    bw: dict[str, list[float]] = defaultdict(list)
    lat: dict[str, list[float]] = defaultdict(list)
    for m in measurements:
        if m.status != OK:
            continue
        if m.gbps is not None:
            bw[scale(m.kind)].append(m.gbps)
        if m.latency_us is not None:
            lat[scale(m.kind)].append(m.latency_us)
    return ({k: healthy_reference(v, config) for k, v in bw.items()},
            {k: healthy_reference(v, config, higher_is_better=False) for k, v in lat.items()})


class _Limits(msgspec.Struct, frozen=True):
    """What every figure of one scale is compared with, worked out once per judgement."""

    bw: Baseline | None
    threshold: float | None
    lat: Baseline | None
    lat_limit: float | None


def _limits(bw: Baseline | None, lat: Baseline | None, config: LocalizeConfig) -> _Limits:
    threshold = bw.threshold(config) if bw is not None else config.floor_gbps
    limit = None
    if lat is not None:
        limit = lat.reference * config.latency_factor
        if lat.kept >= config.min_baseline:
            limit = max(limit, lat.reference + config.mad_z * lat.sigma)
        if config.latency_ceiling_us is not None:
            limit = min(limit, config.latency_ceiling_us)
    return _Limits(bw, threshold, lat, limit)


def judge(measurements: list[Measurement], config: LocalizeConfig) -> list[Observation]:
    """One observation per measurement and rail; a whole-test failure is expanded to every rail."""
    bw_base, lat_base = baselines(measurements, config)
    limits = {s: _limits(bw_base.get(s), lat_base.get(s), config) for s in ("busbw", "star")}
    every_rail = list(range(config.rails))
    out: list[Observation] = []
    for m in measurements:
        lim = limits[scale(m.kind)]
        if m.rail is not None:
            out.append(_judge_one(m, m.rail, lim, config))
        else:
            out.extend(_judge_one(m, rail, lim, config) for rail in every_rail)
    return out


def _obs(m: Measurement, rail: int, positive: bool, reason: str, threshold: float | None = None,
         fluke: float = 0.5) -> Observation:
    return Observation(m.test_id, m.round, m.members, rail, m.kind, positive, reason, m.gbps, m.latency_us,
                       threshold, fluke)


def _judge_one(m: Measurement, rail: int, lim: _Limits, config: LocalizeConfig) -> Observation:
    if m.status != OK:
        return _obs(m, rail, True, m.status, fluke=config.error_fluke)
    threshold = lim.threshold
    if m.gbps is not None and threshold is not None and m.gbps < threshold:
        if config.floor_gbps is not None and m.gbps < config.floor_gbps:
            return _obs(m, rail, True, "below_floor", threshold, 1e-6)
        return _obs(m, rail, True, "slow", threshold, _fluke(lim.bw, m.gbps, config))
    lat = lim.lat
    if m.latency_us is not None and lat is not None and lim.lat_limit is not None and m.latency_us > lim.lat_limit:
        z = (m.latency_us - lat.reference) / max(lat.spread(config), 0.01 * lat.reference, 1e-9)
        return _obs(m, rail, True, "latency", threshold, max(_tail(z), 1e-6))
    return _obs(m, rail, False, "ok", threshold)


def _fluke(bw: Baseline | None, value: float, config: LocalizeConfig) -> float:
    """How likely noise alone put a healthy figure this low (capped at a coin toss)."""
    if bw is None:
        return 0.5
    sigma = max(bw.spread(config), 0.01 * bw.reference, 1e-9)
    return min(max(_tail((bw.reference - value) / sigma), 1e-9), 0.5)
