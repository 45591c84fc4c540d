"""Typed facts gathered by probes and read by checks: what was read, never what it means.

One package, split by theme: :mod:`.node` (NVML, host, kernel log), :mod:`.cluster` (what
rank 0 gathered), :mod:`.columns` (per-rank results as columns) and :mod:`.tools` (what the
external tools' parsers produce). Records sit below parsers, backends, probes and checks:
they import only the model and config, so every layer above may read them.

A reading that could not be taken is an :class:`~gpu_preflight.model.NA` carrying the
reason ("not supported", "GPU is lost"), so a check can tell "0 errors" from "unknown"
and the report can say why a check was skipped.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .node import (
    BoolR,
    DiskUsage,
    FloatR,
    GpuFacts,
    GpuProcess,
    GpuRecord,
    IntR,
    KernelLogFacts,
    NvLink,
    StrR,
    SystemFacts,
)

if TYPE_CHECKING:
    from .cluster import ClusterFacts, ClusterView, pingpong_client_text, pingpong_pairs, subject_name

# What rank 0 gathered is loaded on first use: a node run never reads it.
_LAZY = {name: ".cluster" for name in
         ("ClusterFacts", "ClusterView", "pingpong_client_text", "pingpong_pairs", "subject_name")}

__all__ = [
    "BoolR", "ClusterFacts", "ClusterView", "DiskUsage", "FloatR", "GpuFacts", "GpuProcess", "GpuRecord", "IntR",
    "KernelLogFacts", "NvLink", "StrR", "SystemFacts", "pingpong_client_text", "pingpong_pairs", "subject_name",
]


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(where, __name__), name)
    globals()[name] = value
    return value
