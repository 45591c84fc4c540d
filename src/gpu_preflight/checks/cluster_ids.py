"""Ids of cluster checks that other layers read (history compares their measurements).

They live apart from the checks that register them so that naming one costs nothing: the
history of a node-only run must not import the cluster checks (about 0.1 s) to learn a name.
"""

from __future__ import annotations

__all__ = ["GEMM_ID", "MEMORY_BANDWIDTH_ID"]

GEMM_ID = "compute.gemm"  # registered by cluster_compute.gemm
MEMORY_BANDWIDTH_ID = "memory.bandwidth"  # registered by cluster_compute.memory_bandwidth
