"""records/columns.py: packed rows on the wire, typed columns on rank 0.

The results go through the real path: workload result records' ``to_dict`` (what a rank
sends), :func:`columns_of` per node, :func:`unpack` over the nodes' parts.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from gpu_preflight.records.columns import (
    FIELDS,
    GemmColumns,
    MemoryColumns,
    ResultColumns,
    TrainColumns,
    columns_of,
    take_results,
    unpack,
)
from gpu_preflight.workloads.compute import GemmResult
from gpu_preflight.workloads.memory import MemoryResult
from gpu_preflight.workloads.training import TrainResult


def _payload(rank: int, *, memory: bool = True) -> dict[str, Any]:
    gemm = [GemmResult(dtype, 4096, 5, 600.0 + rank, 1e-3 * rank, rank != 2, "OOM" if rank == 3 else None).to_dict()
            for dtype in ("fp32", "bf16")]
    p: dict[str, Any] = {"rank": rank, "gemm": gemm,
                         "train": TrainResult("single", 20, 2.5, 0.5 + rank, True, rank != 1).to_dict()}
    if memory:
        p["memory"] = MemoryResult(1800.0 + rank, 50.0, None, 1 << 30, rank, ["0xAA"]).to_dict()
    return p


def _over_the_wire(packed: dict[str, Any]) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(json.dumps(packed))
    return loaded


def test_typed_columns_hold_every_ranks_fields_in_node_order() -> None:
    node0 = {r: _payload(r) for r in (1, 0)}
    node1 = {r: _payload(r, memory=r != 3) for r in (2, 3)}
    cols = unpack([_over_the_wire(columns_of(node0)), _over_the_wire(columns_of(node1))])
    assert isinstance(cols, ResultColumns)
    assert list(cols.gemm) == ["bf16", "fp32"]  # precision order, whatever order the ranks ran them in
    bf16 = cols.gemm["bf16"]
    assert bf16.rank == [0, 1, 2, 3] and bf16.tflops == [600.0, 601.0, 602.0, 603.0]
    assert bf16.correct == [True, True, False, True] and bf16.error == [None, None, None, "OOM"]
    assert bf16.n == [4096] * 4 and len(bf16) == 4
    assert cols.memory.rank == [0, 1, 2] and cols.memory.d2h_gbps == [None] * 3  # rank 3 sent no memory result
    assert cols.memory.pattern_errors == [0, 1, 2]
    assert cols.train.improved == [True, False, True, True] and cols.train.loss_end == [0.5, 1.5, 2.5, 3.5]


def test_a_row_is_the_result_as_its_rank_sent_it() -> None:
    payloads = {r: _payload(r) for r in range(4)}
    cols = unpack([columns_of(payloads)])
    sent = payloads[3]["gemm"][1]
    assert cols.gemm["bf16"].row(3) == {f: sent[f] for f in GemmColumns.FIELDS}
    assert cols.memory.row(1) == {f: payloads[1]["memory"][f] for f in MemoryColumns.FIELDS}
    assert list(cols.train.row(0)) == list(TrainColumns.FIELDS)


def test_a_column_is_sliced_once_on_first_read_and_the_columns_are_read_only() -> None:
    col = unpack([columns_of({r: _payload(r) for r in range(3)})]).gemm["fp32"]
    assert "tflops" not in vars(col)
    first = col.tflops
    assert vars(col)["tflops"] is first and col.tflops is first  # the same list: rank_names keys on it
    assert "rel_error" not in vars(col)
    with pytest.raises(AttributeError, match="read-only"):
        col.tflops = []  # type: ignore[misc]


def test_the_fields_are_what_the_workloads_send() -> None:
    """The typed columns name fields of the workload results; a renamed field fails here, not at 80,000 ranks."""
    for kind, result in (("gemm", GemmResult), ("memory", MemoryResult), ("train", TrainResult)):
        assert set(FIELDS[kind]) <= {f.name for f in msgspec.structs.fields(result)}, kind
    assert GemmColumns.NAMES == ("rank", "n", "tflops", "correct", "rel_error", "error")


def test_rows_that_do_not_divide_into_fields_are_refused() -> None:
    with pytest.raises(ValueError, match="packed memory results of 8 values are not rows of 7"):
        unpack([{"memory": [0] * 8}])


def test_nothing_gathered_is_empty_columns() -> None:
    cols = unpack([])
    assert cols.gemm == {} and cols.memory.rank == [] and cols.train.error == [] and len(cols.train) == 0


def test_the_node_leader_moves_the_results_out_of_the_payloads() -> None:
    payloads = {r: _payload(r) for r in (0, 1)}
    packed = take_results(payloads)
    assert all(not set(FIELDS) & set(p) for p in payloads.values())
    assert unpack([packed]).train.rank == [0, 1]
