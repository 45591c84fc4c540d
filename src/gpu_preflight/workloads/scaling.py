"""Collective message sizes and timed iterations by the size of the job (docs/distributed.md).

A ring all-reduce over ``n`` ranks of a message of ``S`` bytes costs about ``2(n-1)·α`` of
latency plus ``2(n-1)/n·S/B`` of transfer, so it measures the link's bandwidth only once ``S``
is well above ``n·α·B``. With ``α`` ≈ 10 µs between nodes and ``B`` ≈ 50 GB/s per GPU, ``n·α·B``
is about 4 MB at 8 ranks and 250 MB at 512: a largest message fixed at 256 MiB measures
latency, not bandwidth, on a large job, while two GPUs of one node saturate their link with far
less. So the largest GPU message grows with the world size (the quick sweep's smallest with it,
so every default sweep has as many sizes), a multi-node job is never in a one-node tier (a network's
latency is ten times NVLink's), and the smallest jobs run fewer timed iterations.

The configured values (``workload.collective_max_bytes_quick_gpu``, ``collective_iters``) are
those of the ``node`` tier (one node of up to 8 GPUs); the full sweep's configured largest
message is also the most any tier allocates (three buffers of it live at once). CPU workers
share one host's cores and run a correctness smoke, not a bandwidth measurement: their sizes
and iterations are the configured ones at every size of job. ``workload.collective_scaling =
false`` (set by the acceptance suite's ``--iters`` and ``--numel``) keeps the configured values.

Pure: a function of the world size, the node count, the device kind, the suite and the config.
"""

from __future__ import annotations

import msgspec

from ..config.schema import WorkloadConfig

__all__ = ["GPU_TIERS", "Sweep", "Tier", "collective_sweep", "tier_of"]


class Tier(msgspec.Struct, frozen=True):
    """One row of the table: jobs up to ``max_ranks`` ranks (``None``: any), how their largest
    message and timed iterations compare with the configured (``node``) ones."""

    name: str
    max_ranks: int | None
    one_node: bool  # only jobs on one node fall in this tier
    size_factor: float
    iters_factor: float


GPU_TIERS = (
    Tier("pair", 2, True, 0.25, 0.5),  # two GPUs of one node: NVLink/PCIe saturate by 64 MiB
    Tier("node", 8, True, 1.0, 1.0),  # the configured values
    Tier("cluster", 64, False, 2.0, 1.0),
    Tier("large", 512, False, 4.0, 1.0),
    Tier("huge", None, False, 8.0, 1.0),
)
QUICK_START, QUICK_STEP = 1 << 20, 8  # the quick sweep (node tier): 1 MiB, each 8x the last, up to the largest
FULL_START, FULL_STEP = 8, 2  # the full sweep: 8 B doubling up to the largest (nccl-tests' -b 8 -f 2)
CPU_START, CPU_STEP = 1 << 10, 32


class Sweep(msgspec.Struct, frozen=True):
    """The collective sizes and iterations a job runs, and the tier that chose them (for the report)."""

    tier: str
    sizes: list[int]
    iters: int


def tier_of(world_size: int, num_nodes: int) -> Tier:
    """The table's row for a job of ``world_size`` ranks on ``num_nodes`` nodes."""
    for tier in GPU_TIERS:
        if (tier.max_ranks is None or world_size <= tier.max_ranks) and (num_nodes <= 1 or not tier.one_node):
            return tier
    return GPU_TIERS[-1]


def _sizes(start: int, top: int, step: int) -> list[int]:
    sizes, size = [], max(1, min(start, top))
    while size < top:
        sizes.append(size)
        size *= step
    return [*sizes, top]


def collective_sweep(w: WorkloadConfig, suite: str, cuda: bool, world_size: int | None, num_nodes: int = 1) -> Sweep:
    """The sizes (bytes of the larger buffer) and timed iterations of every collective of the job
    (``world_size`` ``None``: a job of unknown size, which gets the configured values)."""
    if not cuda:
        return Sweep("cpu", _sizes(CPU_START, w.collective_max_bytes_cpu, CPU_STEP), w.collective_iters_cpu)
    full = suite == "full"
    configured = w.collective_max_bytes_full_gpu if full else w.collective_max_bytes_quick_gpu
    scaled = w.collective_scaling and world_size is not None
    tier = tier_of(world_size or 1, num_nodes) if scaled else Tier("configured", None, False, 1.0, 1.0)
    cap = max(configured, w.collective_max_bytes_full_gpu)
    top = max(1, min(int(configured * tier.size_factor), cap))
    iters = max(1, round(w.collective_iters * tier.iters_factor))
    if full:
        return Sweep(tier.name, _sizes(FULL_START, top, FULL_STEP), iters)
    return Sweep(tier.name, _sizes(max(1, int(QUICK_START * tier.size_factor)), top, QUICK_STEP), iters)
