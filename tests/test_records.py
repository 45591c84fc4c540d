"""The records package: one home for the typed facts, and the name tables it shares with the checks."""

from __future__ import annotations

from gpu_preflight.checks.gpu_thermal import CLOCK_REASONS
from gpu_preflight.records.smi import CLOCK_REASON_BITS


def test_clock_reason_names_and_bits_agree_with_the_thermal_check() -> None:
    """nvidia-smi records, the Prometheus exporter and gpu.thermal name the same NVML bits the same way."""
    assert {name: bit for bit, (name, _) in CLOCK_REASONS.items()} == CLOCK_REASON_BITS
    assert list(CLOCK_REASON_BITS.values()) == sorted(CLOCK_REASONS)  # exported in bit order, as before
