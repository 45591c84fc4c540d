"""Per-rank workload results as columns: the form in which rank 0 judges 80,000 GPUs.

A rank reports its GEMM, memory and training results as small dicts. Read back on rank 0
that is half a million dicts scattered over a gigabyte of heap, and every check touching
each of them once cost seconds (memory-bound, not arithmetic). Each node leader therefore
turns its ranks' results into columns (one list per field) before bundling them, and the
cluster checks screen whole columns with list comprehensions, looking at single ranks only
when a value is wrong, missing or below a floor.

Two forms, one per side of the gather. On the wire a kind is *packed*: one flat list, each
rank's row laid end to end (:func:`columns_of`), so a node sends six lists instead of
thirty-seven and rank 0 joins 10,000 nodes' lists at C speed. On rank 0 :func:`unpack`
wraps the joined rows in typed columns (:class:`GemmColumns`, :class:`MemoryColumns`,
:class:`TrainColumns`, together a :class:`ResultColumns`) whose fields are attributes, each
sliced out of the rows on first read and kept: a check that never reads a field (``n`` or
``rel_error`` of a passing GEMM) does not pay for copying 80,000 references.

Payloads that still hold their results (a node whose leader died, the self-launch
supervisor's rank files, small hand-built inputs) are packed on rank 0 by the same
:func:`columns_of`, so there is one representation for the checks to read. The columns are
typed as the workloads' results (``workloads/``) send them; a field that a hand-built
result lacks reads ``None``, which the checks' screens send to the one-rank judgement.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import chain
from typing import Any, ClassVar, Generic, TypeVar, overload

import msgspec

__all__ = ["FIELDS", "GemmColumns", "MemoryColumns", "ResultColumns", "Rows", "TrainColumns", "columns_of",
           "take_results", "unpack"]

T = TypeVar("T")
Packed = dict[str, Any]  # {"gemm": {dtype: [rank, field..., rank, field...]}, "memory": [...], "train": [...]}


class Column(Generic[T]):
    """One field of a kind's rows: sliced out of the packed rows on first read, then kept on the
    instance (a non-data descriptor, so the kept list shadows it from then on)."""

    at = 0  # the field's place in a row; set by :meth:`Rows.__init_subclass__`

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, rows: None, owner: type) -> Column[T]: ...

    @overload
    def __get__(self, rows: Rows, owner: type) -> list[T]: ...

    def __get__(self, rows: Rows | None, owner: type) -> Column[T] | list[T]:
        if rows is None:
            return self
        values: list[T] = rows.flat[self.at::len(rows.NAMES)]
        rows.__dict__[self.name] = values
        return values


class Rows:
    """One kind's results for many ranks: the packed rows, read as typed columns.

    A subclass declares its fields as :class:`Column` attributes in transport order;
    ``FIELDS`` (what a rank's result contributes) and ``NAMES`` (``rank`` first) follow from
    them. Instances are immutable: only the columns' first reads are kept.
    """

    KIND: ClassVar[str]
    FIELDS: ClassVar[tuple[str, ...]]
    NAMES: ClassVar[tuple[str, ...]]
    rank: Column[int] = Column()

    def __init_subclass__(cls, kind: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = [(name, c) for name, c in vars(cls).items() if isinstance(c, Column)]
        for at, (_, c) in enumerate(own, start=1):
            c.at = at
        cls.KIND, cls.FIELDS = kind, tuple(name for name, _ in own)
        cls.NAMES = ("rank", *cls.FIELDS)

    def __init__(self, flat: list[Any]) -> None:
        if len(flat) % len(self.NAMES):
            raise ValueError(f"packed {self.KIND} results of {len(flat)} values are not rows of {len(self.NAMES)}")
        object.__setattr__(self, "flat", flat)

    flat: list[Any]  # every rank's row laid end to end, as packed

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __len__(self) -> int:
        return len(self.flat) // len(self.NAMES)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} ranks)"

    def row(self, i: int) -> dict[str, Any]:
        """The ``i``-th rank's result as the dict it was sent as (for judging one flagged rank)."""
        at, width = i * len(self.NAMES), len(self.NAMES)
        return dict(zip(self.FIELDS, self.flat[at + 1:at + width], strict=True))


class GemmColumns(Rows, kind="gemm"):
    """One GEMM precision on every rank that ran it."""

    n: Column[int] = Column()
    tflops: Column[float] = Column()
    correct: Column[bool] = Column()
    rel_error: Column[float] = Column()
    error: Column[str | None] = Column()


class MemoryColumns(Rows, kind="memory"):
    """The memory test on every rank that ran it (GB/s per direction, pattern words read back wrong)."""

    device_copy_gbps: Column[float | None] = Column()
    h2d_gbps: Column[float | None] = Column()
    d2h_gbps: Column[float | None] = Column()
    pattern_bytes: Column[int] = Column()
    pattern_errors: Column[int] = Column()
    error: Column[str | None] = Column()


class TrainColumns(Rows, kind="train"):
    """The single-GPU training smoke on every rank that ran it."""

    loss_start: Column[float] = Column()
    loss_end: Column[float] = Column()
    finite: Column[bool] = Column()
    improved: Column[bool] = Column()
    error: Column[str | None] = Column()


class ResultColumns(msgspec.Struct, frozen=True):
    """Every rank's GEMM (per precision, in precision order), memory and training results."""

    gemm: Mapping[str, GemmColumns]
    memory: MemoryColumns
    train: TrainColumns


FIELDS: dict[str, tuple[str, ...]] = {k.KIND: k.FIELDS for k in (GemmColumns, MemoryColumns, TrainColumns)}


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


def unpack(parts: Iterable[Mapping[str, Any]]) -> ResultColumns:
    """Typed columns (ranks in the order given) from packed parts, nodes in order."""
    parts = list(parts)
    gemm: dict[str, list[Any]] = {}
    for part in parts:
        for dtype, flat in (part.get("gemm") or {}).items():
            gemm.setdefault(dtype, []).append(flat)
    return ResultColumns(
        {d: GemmColumns(list(chain.from_iterable(lists))) for d, lists in sorted(gemm.items())},
        MemoryColumns(list(chain.from_iterable(part.get("memory") or () for part in parts))),
        TrainColumns(list(chain.from_iterable(part.get("train") or () for part in parts))))
