"""Settings of bad-node localisation (``run --localize``): when a node, pair or link is called bad.

One section, ``[localize]``. Judging speed has a GPU and a CPU value for three settings:
NCCL pair figures on GPUs repeat within about 10 %, while gloo workers on CPUs share the
host's cores with every other worker and swing far more, so the CPU values call a pair
slow only below half the typical speed, against 30 % assumed noise (a threshold of
(1 - 0.5)² = a quarter of the typical speed while few figures exist); a capped or cut
link is still orders of magnitude below. The pure scheduler takes the resolved values as
plain numbers (:class:`gpu_preflight.localize.model.LocalizeConfig`); this section is
where they come from, so ``config defaults`` shows them and a site file can set them.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from .fields import setting

__all__ = ["LocalizeSettings", "localize_settings"]


class LocalizeSettings(msgspec.Struct):
    """The localiser's rules and budgets (the mode, floor and time limit come from the run)."""

    repeat_k: int = setting(
        2, "A node is called bad after this many failing tests with different partners (one of them known good); "
           "a pair is called a bad link after failing this many times.", "tests", min=1, max=100)
    clear_after: int = setting(
        2, "A node or pair is cleared after this many passing tests (k of n with n = repeat_k + clear_after - 1).",
        "tests", min=1, max=100)
    fail_ratio: float = setting(
        0.2, "A node must also fail at least this share of its distinct partners, so hundreds of pair tests "
             "(full mode) cannot add up to a false drain from noise alone.", "ratio", min=0, max=1)
    slow_fraction_gpu: float = setting(
        0.25, "GPUs: a test is slow below (1 - this) of the typical figure of its kind (and more than mad_z robust "
              "standard deviations below it).", "ratio", above=0, max=1)
    slow_fraction_cpu: float = setting(
        0.5, "CPU (gloo) workers: the same, for figures that swing with the host's load.", "ratio", above=0, max=1)
    assumed_noise_gpu: float = setting(
        0.1, "GPUs: the relative spread assumed for a kind's figures while fewer than min_baseline exist.", "ratio",
        min=0, max=1)
    assumed_noise_cpu: float = setting(
        0.3, "CPU workers: the same.", "ratio", min=0, max=1)
    latency_factor_gpu: float = setting(
        2.0, "GPUs: a test is slow when its latency exceeds this multiple of the typical latency.", "x",
        above=1, max=1000)
    latency_factor_cpu: float = setting(
        4.0, "CPU workers: the same (the exchange's time is its figure's inverse: 4x matches the CPU "
             "threshold (1 - 0.5)²).", "x", above=1, max=1000)
    latency_ceiling_us: float | None = setting(
        None, "A test whose latency exceeds this is slow whatever its peers do. Unset: judged against peers only.",
        "us", above=0, max=1e9)
    mad_z: float = setting(
        4.0, "Robust standard deviations (1.4826 x MAD) below the typical figure a slow test must also be.", "sd",
        above=0, max=100)
    min_baseline: int = setting(
        20, "Healthy figures of a kind needed before their spread (MAD) is used instead of the assumed noise.",
        "figures", min=1, max=1_000_000)
    decisive_fluke: float = setting(
        1e-3, "A failing test against known-good partners convicts only when noise explains it with a probability "
              "under this; a marginal one gets the node re-tested.", "probability", above=0, max=1)
    error_fluke: float = setting(
        0.05, "The chance taken that an error or hang was a transient, when weighing repeats of one pair.",
        "probability", above=0, max=1)
    group_size: int = setting(
        16, "Nodes per group test in group (bisection) mode.", "nodes", min=3, max=1_000_000)
    pairing: Literal["halves", "random"] = setting(
        "halves", "How quick mode pairs nodes: 'halves' (node i with node i + N/2, so pairs cross racks in a "
                  "rack-ordered job) or 'random'.")
    cover_passes: int = setting(
        1, "Quick mode looks at each node once; more passes add random re-pairings, for nodes that fail only "
           "some of the time.", "passes", min=1, max=100)
    round_robin_upto: int = setting(
        8, "Jobs of up to this many nodes test every pair (round robin) instead of pairing.", "nodes", min=0,
        max=1024)
    max_extra_rounds: int = setting(
        12, "Rounds after the cover rounds before the localiser stops and reports what is still undecided.",
        "rounds", min=0, max=10_000)


def localize_settings(config: object) -> LocalizeSettings:
    """The ``localize`` section of a resolved config, or the defaults where none is registered."""
    if isinstance(config, LocalizeSettings):
        return config
    section = getattr(config, "localize", None)
    return section if isinstance(section, LocalizeSettings) else LocalizeSettings()

