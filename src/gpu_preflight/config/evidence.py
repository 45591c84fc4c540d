"""Thresholds for judging external evidence: DCGM, nccl-tests, fabric and InfiniBand outputs.

One section, ``[evidence]``, so a site file can state what its fabric must deliver. A
bandwidth floor left unset means "report, do not judge": the finding is a SKIP that
carries the measured value, because no number is right for every cluster and a guessed
floor would either cry wolf or wave a slow fabric through.
"""

from __future__ import annotations

import msgspec

from .fields import setting

__all__ = ["EvidenceConfig", "evidence_config"]


class EvidenceConfig(msgspec.Struct):
    """How ``gpu-preflight judge`` (and the tool runners) judge external diagnostics."""

    dcgm_ignore_tests: list[str] = setting(
        [], "DCGM tests (names, case-insensitive, e.g. 'EUD Test') whose failures are reported as SKIP."
    )
    nccl_busbw_min_gbps: float | None = setting(
        None, "Peak bus bandwidth an nccl-tests run must reach; below FAILs. Unset: reported, not judged.", "GB/s",
        above=0, max=100_000
    )
    nccl_max_error: float = setting(
        1e-2, "Largest deviation the legacy nccl-tests 'error' column may show; above FAILs (newer versions "
              "count #wrong instead, where any wrong value FAILs).", min=0, max=100
    )
    fi_info_min_entries: int = setting(
        1, "Provider entries fi_info must list; fewer (fi_getinfo -61 is none) FAIL.", "entries", min=0, max=100_000
    )
    pingpong_min_mb_per_s: float | None = setting(
        None, "fi_pingpong bandwidth at its largest message size must reach this; below FAILs. Unset: not judged.",
        "MB/s", above=0, max=10**7
    )
    ib_expected_ports: int | None = setting(
        None, "Active InfiniBand/RoCE ports a node must have (ibstat, ibstatus, ibv_devinfo); fewer FAIL.",
        min=0, max=64
    )
    ib_min_rate_gbps: float | None = setting(
        None, "Active ports slower than this rate WARN (a cable or switch port that trained low).", "Gb/s",
        above=0, max=10_000
    )
    perftest_min_bw_gbps: float | None = setting(
        None, "perftest (ib_*_bw) best average bandwidth must reach this; below FAILs. Unset: not judged.", "Gb/s",
        above=0, max=10_000
    )


def evidence_config(config: object) -> EvidenceConfig:
    """The ``evidence`` section of a resolved config, or the defaults where none is registered."""
    section = getattr(config, "evidence", None)
    return section if isinstance(section, EvidenceConfig) else EvidenceConfig()
