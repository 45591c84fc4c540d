"""nccl-tests output forms taken from its own source across its releases (issue 27, docs/repertoire/nccl-tests.md).

Each fixture is rendered from nccl-tests' printf formats (``tests/fixtures/repertoire/nccl-tests/PROVENANCE.md``
names the tag and file:line of each); these tests hold what ``judge`` must do with each form.
"""

from __future__ import annotations

from pathlib import Path

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.nccl_tests import parse

FIXTURES = Path(__file__).parent / "fixtures" / "repertoire" / "nccl-tests"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def statuses(text: str) -> dict[str, Status]:
    findings = judge_text(text, Config(), source="all_reduce_perf.txt")
    return {check: Status.worst(f.status for f in findings if f.check_id == check)
            for check in dict.fromkeys(f.check_id for f in findings)}


def test_a_wrong_count_in_g_notation_is_a_count() -> None:
    """``%6g`` prints 33554432 wrong values as ``3.35544e+07``: before, the cell was 'unreadable' and the
    correctness check PASSed on the rows it could read (only the cut made the run ERROR)."""
    text = fixture("all_reduce-2.19.6-wrong-count-g-notation-cut.txt")
    record = parse(text)
    assert [r.wrong for r in record.rows] == [0, 0, 33554400]
    assert record.rows[-1].in_place is not None and record.rows[-1].in_place.wrong == 33554400
    assert record.wrong_sizes == [134217728]
    got = statuses(text)
    assert got["nccl_tests.correctness"] is Status.FAIL
    assert got["evidence.complete"] is Status.ERROR  # cut before its summary
    assert not any("unreadable" in p for p in record.incomplete)


def test_a_legacy_error_cell_is_not_read_as_a_count() -> None:
    """The legacy ``error`` column (``%5.0le``, before 2.13) keeps its float reading."""
    text = ("#   size   count   type   redop   time   algbw   busbw  error   time   algbw   busbw  error\n"
            "     128      32  float     sum  20.34    0.01    0.01  1e+00  20.12    0.01    0.01  0e+00\n")
    record = parse(text)
    assert record.rows[0].error == 1.0 and record.rows[0].wrong is None and record.max_error == 1.0


def test_the_timestamp_column_of_report_timestamps_is_two_cells() -> None:
    """``-S 1`` (2.18+) ends the header with ``timestamp`` and each row with ``2026-03-06 12:00:00``: the rows
    were 'more values than columns', a parse ERROR for the whole run, its wrong values unjudged."""
    ok = fixture("all_reduce-2.19.6-timestamps-ok.txt")
    record = parse(ok)
    assert record.rows_total == 4 and record.out_of_bounds == 0 and not record.incomplete
    assert record.peak_busbw_gbps == 102.27 and record.wrong_total == 0
    assert statuses(ok)["nccl_tests.correctness"] is Status.PASS
    cut = fixture("all_reduce-2.19.6-timestamps-wrong-cut.txt")
    assert parse(cut).wrong_sizes == [1024]
    assert statuses(cut)["nccl_tests.correctness"] is Status.FAIL
    # the same rows quoted from below their header, with the summary line
    rows = "".join(line + "\n" for line in cut.splitlines() if not line.startswith("#"))
    tail = rows + "# Out of bounds values : 0 OK\n"
    assert parse(tail).wrong_sizes == [1024]
    assert statuses(tail)["nccl_tests.correctness"] is Status.FAIL


def test_the_per_iteration_columns_are_read_by_their_names() -> None:
    """``-I 1`` adds ``i_min i_max i_p99 i_cv%`` to each placement: the busbw and #wrong cells are still found
    by their names (out-of-place first, in-place second)."""
    record = parse(fixture("all_reduce-2.19.6-per-iteration-ok.txt"))
    assert record.rows_total == 4 and not record.incomplete and record.out_of_bounds == 0
    assert record.peak_busbw_gbps == 102.27 and record.peak_busbw_in_place_gbps == 102.27
    assert record.wrong_total == 0
