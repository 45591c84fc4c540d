"""Settings of the under-load sampler and of the checks that judge what it saw.

One section, ``[load]``. The clock and temperature rules follow what a healthy board does
under a dense GEMM: on our H100 recording (``tests/fixtures/captured/h100-run-2026-11-26``)
the GPU sat at its 700 W limit with the SM clock at a median 1365 MHz (345–1980) and
"SW power cap" set in 96 % of the samples — normal, not a fault — so clocks are judged
against the *loaded* clock a profile expects and against the GPU's peers, never against
its maximum, and only the hardware protection reasons fail.
"""

from __future__ import annotations

import msgspec

from .fields import setting

__all__ = ["LoadConfig", "load_config"]


class LoadConfig(msgspec.Struct):
    """The NVML sampler that runs beside the workloads, and the load.* checks."""

    sample_hz: float = setting(
        10.0, "Samples per second of each GPU while the workloads run (one small NVML read per GPU per tick; "
              "0 turns the sampler off).", "Hz", min=0, max=1000)
    min_samples: int = setting(
        3, "A phase with fewer samples than this is too short to judge (listed, not judged).", "samples",
        min=1, max=100_000)
    hw_reason_fail_share: float = setting(
        0.05, "FAIL when a hardware protection reason (HW slowdown, HW thermal, HW power brake) is active in more "
              "than this share of a phase's samples; any share above 0 WARNs.", "ratio", min=0, max=1)
    sw_thermal_warn_share: float = setting(
        0.0, "WARN when SW thermal slowdown is active in more than this share of a phase's samples.", "ratio",
        min=0, max=1)
    expected_gemm_sm_mhz: float | None = setting(
        None, "SM clock a healthy GPU of this model holds under a dense GEMM (power-capped, so below its "
              "maximum); set by the GPU-model profiles. Unset: only peers are compared.", "MHz", above=0, max=10_000)
    clock_drop_warn_fraction: float = setting(
        0.15, "WARN when the median SM clock of a GEMM phase is more than this fraction below "
              "expected_gemm_sm_mhz.", "ratio", min=0, max=1)
    clock_drop_fail_fraction: float = setting(
        0.35, "FAIL when it is more than this fraction below (the job would run a third slower or worse).", "ratio",
        min=0, max=1)
    temp_margin_c: float = setting(
        5.0, "WARN when the GPU (or its memory) comes within this many degrees of its own slowdown (or maximum "
             "operating) temperature under load; FAIL at or above it.", "C", min=0, max=50)
    gemm_power_min_fraction: float = setting(
        0.6, "WARN when a GPU's power never reaches this fraction of its enforced limit in any GEMM phase "
             "(the DCGM targeted-power idea: a board that cannot draw power cannot compute at speed).", "ratio",
        min=0, max=1)
    peer_fraction: float = setting(
        0.10, "WARN when a GPU's median SM clock or power in a phase is more than this fraction below the "
              "median of the other GPUs of its node in the same phase.", "ratio", min=0, max=1)
    efficiency_min_fraction: float = setting(
        0.85, "WARN when a GPU's GEMM work per watt (TFLOP/s over the median power of the GEMM phase) is below "
              "this fraction of the median of the other GPUs of its node for the same precision.", "ratio",
        min=0, max=1)
    max_points: int = setting(
        240, "Points of each GPU's downsampled series kept in the report for plots.", "points", min=0, max=100_000)


def load_config(config: object) -> LoadConfig:
    """The ``load`` section of a resolved config, or the defaults where none is registered."""
    section = getattr(config, "load", None)
    return section if isinstance(section, LoadConfig) else LoadConfig()
