"""The localiser's plain settings (:class:`.model.LocalizeConfig`) from the ``[localize]`` config
section, for GPU (NCCL) or CPU (gloo) workers.

The pure scheduler and judge take plain values and never see the config system; this is
the one place that reads the section and picks the GPU or the CPU value of each setting
that has both.
"""

from __future__ import annotations

from ..config.localize import LocalizeSettings
from .model import LocalizeConfig

__all__ = ["localize_config"]


def localize_config(settings: LocalizeSettings | None = None, *, cpu: bool = False, mode: str = "quick",
                    floor_gbps: float | None = None, test_timeout_s: float = 60.0, rails: int = 1) -> LocalizeConfig:
    """The localiser's settings for one run: the section's rules, the run's mode, floor and time limit."""
    s = settings or LocalizeSettings()
    return LocalizeConfig(
        mode=mode, repeat_k=s.repeat_k, repeat_n=s.repeat_k + s.clear_after - 1, fail_ratio=s.fail_ratio,
        slow_fraction=s.slow_fraction_cpu if cpu else s.slow_fraction_gpu, mad_z=s.mad_z, floor_gbps=floor_gbps,
        latency_factor=s.latency_factor_cpu if cpu else s.latency_factor_gpu, latency_ceiling_us=s.latency_ceiling_us,
        min_baseline=s.min_baseline, assumed_noise=s.assumed_noise_cpu if cpu else s.assumed_noise_gpu,
        decisive_fluke=s.decisive_fluke, error_fluke=s.error_fluke, rails=rails, group_size=s.group_size,
        pairing=s.pairing, cover_passes=s.cover_passes, round_robin_upto=s.round_robin_upto,
        max_extra_rounds=s.max_extra_rounds, test_timeout_s=test_timeout_s)
