"""Per-rank workload results as columns: the form in which rank 0 judges 80,000 GPUs.

A rank reports its GEMM, memory and training results as small dicts. Read back on rank 0
that is half a million dicts scattered over a gigabyte of heap, and every check touching
each of them once cost seconds (memory-bound, not arithmetic). Each node leader therefore
turns its ranks' results into columns (one list per field) before bundling them, and the
cluster checks screen whole columns with list comprehensions, looking at single ranks only
when a value is wrong, missing or below a floor.

Payloads that still hold their results (a node whose leader died, the self-launch
supervisor's rank files, small hand-built inputs) are turned into columns on rank 0 by the
same :func:`columns_of`, so there is one representation for the checks to read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import chain
from typing import Any

__all__ = ["FIELDS", "columns_of", "row", "take_results", "unpack"]

FIELDS: dict[str, tuple[str, ...]] = {
    "gemm": ("n", "tflops", "correct", "rel_error", "error"),
    "memory": ("device_copy_gbps", "h2d_gbps", "d2h_gbps", "pattern_bytes", "pattern_errors", "error"),
    "train": ("loss_start", "loss_end", "finite", "improved", "error"),
}
Columns = dict[str, Any]  # {"gemm": {dtype: {"rank": [...], field: [...]}}, "memory": {...}, "train": {...}}
Packed = dict[str, Any]  # {"gemm": {dtype: [rank, field..., rank, field...]}, "memory": [...], "train": [...]}


def columns_of(payloads: Mapping[int, Mapping[str, Any]]) -> Packed:
    """The GEMM (per precision), memory and training results of these payloads, packed for transport.

    Packed means one flat list per kind, each rank's row laid end to end (``rank`` then
    :data:`FIELDS`): a node sends six lists instead of thirty-seven, and rank 0 joins
    10,000 nodes' lists and slices out each field at C speed (:func:`unpack`).
    """
    out: Packed = {"gemm": {}, "memory": [], "train": []}
    for rank, p in sorted(payloads.items()):
        for g in p.get("gemm") or ():
            out["gemm"].setdefault(g["dtype"], []).extend([rank, *(g.get(f) for f in FIELDS["gemm"])])
        for kind in ("memory", "train"):
            result = p.get(kind)
            if result is not None:
                out[kind].extend([rank, *(result.get(f) for f in FIELDS[kind])])
    return out


def take_results(payloads: Mapping[int, dict[str, Any]]) -> Packed:
    """Node leader: its ranks' results packed, and removed from the payloads they came from."""
    packed = columns_of(payloads)
    for p in payloads.values():
        for kind in FIELDS:
            p.pop(kind, None)
    return packed


class _Sliced(dict):  # type: ignore[type-arg]
    """Columns sliced out of the joined rows on first use: a check that never reads a field
    (``n`` or ``rel_error`` of a passing GEMM) does not pay for copying 80,000 references."""

    def __init__(self, flat: list[Any], names: tuple[str, ...]) -> None:
        super().__init__()
        self.flat, self.names = flat, names

    def __missing__(self, key: str) -> list[Any]:
        if key not in self.names:
            raise KeyError(key)
        values = self[key] = self.flat[self.names.index(key)::len(self.names)]
        return values


def _split(flat: list[Any], kind: str) -> dict[str, list[Any]]:
    names = ("rank", *FIELDS[kind])
    if len(flat) % len(names):
        raise ValueError(f"packed {kind} results of {len(flat)} values are not rows of {len(names)}")
    return _Sliced(flat, names)


def unpack(parts: Iterable[Mapping[str, Any]]) -> Columns:
    """Columns (one list per field, ranks in the order given) from packed parts, nodes in order."""
    parts = list(parts)
    gemm: dict[str, list[Any]] = {}
    for part in parts:
        for dtype, flat in (part.get("gemm") or {}).items():
            gemm.setdefault(dtype, []).append(flat)
    out: Columns = {"gemm": {d: _split(list(chain.from_iterable(lists)), "gemm") for d, lists in sorted(gemm.items())}}
    for kind in ("memory", "train"):
        out[kind] = _split(list(chain.from_iterable(part.get(kind) or () for part in parts)), kind)
    return out


def row(col: Mapping[str, list[Any]], i: int) -> dict[str, Any]:
    """The ``i``-th rank's result as the dict it was sent as (for judging one flagged rank)."""
    names = col.names if isinstance(col, _Sliced) else tuple(col)
    return {f: col[f][i] for f in names if f != "rank"}
