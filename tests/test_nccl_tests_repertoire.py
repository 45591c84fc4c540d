"""nccl-tests output forms taken from its own source across its releases (issue 27, docs/repertoire/nccl-tests.md).

Each fixture is rendered from nccl-tests' printf formats (``tests/fixtures/repertoire/nccl-tests/PROVENANCE.md``
names the tag and file:line of each); these tests hold what ``judge`` must do with each form.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind
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


def test_the_json_report_is_read_like_the_run_it_records() -> None:
    """``-J FILE.json`` (2.17.3+) writes one JSON document: it was no tool's text (exit 3), a run with 7 wrong
    values included. Its devices, results (doubles for #wrong) and summary are read as the stdout's would be."""
    text = fixture("all_reduce-2.19.6-report-wrong.json")
    assert detect_kind(text) == "nccl-tests"
    record = parse(text)
    assert record.test == "all_reduce" and record.nccl_version == "2.28.5"
    assert record.nranks == 2 and record.hosts == ["node01"]
    assert [g.name for g in record.gpus] == ["NVIDIA H100 80GB HBM3"] * 2
    assert [(r.size_bytes, r.wrong, r.root) for r in record.rows] == [(8, 0, -1), (1024, 7, -1)]
    assert record.out_of_bounds == 0 and record.avg_busbw_gbps == 51.2 and not record.incomplete
    assert statuses(text)["nccl_tests.correctness"] is Status.FAIL
    # the same report pretty-printed (jq .), and 2.17.3-2.17.8's "average_bus_bandwidith" spelling
    for name in ("all_reduce-2.19.6-report-pretty.json", "all_reduce-2.17.3-report-bandwidith.json"):
        other = fixture(name)
        assert detect_kind(other) == "nccl-tests"
        record = parse(other)
        assert record.rows_total == 4 and record.out_of_bounds == 0 and record.avg_busbw_gbps == 51.2
        assert record.peak_busbw_gbps == 102.27 and record.wrong_total == 0 and not record.incomplete
        assert statuses(other)["nccl_tests.correctness"] is Status.PASS


def test_a_json_report_that_does_not_close_is_incomplete() -> None:
    """The report is closed only when the run ends: one cut (or left by a run that died) keeps its whole result
    objects and is an unfinished run, never a pass."""
    text = fixture("all_reduce-2.19.6-report-cut.json")
    assert detect_kind(text) == "nccl-tests"
    record = parse(text)
    assert [r.size_bytes for r in record.rows] == [8, 1024] and record.nranks == 2 and record.test == "all_reduce"
    assert record.incomplete and "does not close" in record.incomplete[0]
    assert statuses(text)["evidence.complete"] is Status.ERROR


def test_a_compact_report_pasted_after_the_command_is_read() -> None:
    report = fixture("all_reduce-2.19.6-report-wrong.json")
    text = "$ ./build/all_reduce_perf -b 8 -e 128M -f 2 -J out.json\n# Writing JSON output to out.json\n" + report
    assert detect_kind(text) == "nccl-tests"
    assert parse(text).wrong_sizes == [1024]
    assert statuses(text)["nccl_tests.correctness"] is Status.FAIL


@pytest.mark.parametrize("lines", [
    # NVIDIA/nccl-tests v2.19.6 src/util.cu:680-682 (writeDeviceReport), after its parameter lines or alone
    "# nThread 1 nGpus 16 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 "
    "validation: 1 graph: 0 unalign: 0\n#\n# Using devices\nInvalid number of GPUs: 16 requested but only 8 were "
    "found.\nPlease check the number of processes and GPUs per process.\n",
    "Invalid number of GPUs: 16 requested but only 8 were found.\n",
    # v2.19.6 src/common.cu:1054 (a -D device implementation the test has none of)
    "Device implementation 1 is not supported by this test\n",
    # ROCm/rccl-tests ae3e635 src/common.cu:1151 and :1199
    "[ERROR] The number of requested GPUs (8) is greater than the number of GPUs available (4)\n",
    "[ERROR] The number of requested GPUs (16) is greater than the number of GPUs available (8) on node (mi250-01)\n",
])
def test_a_refusal_to_run_is_a_run_that_measured_nothing(lines: str) -> None:
    """Its refusals alone were no tool's text (exit 3): a run that measured nothing, ERROR, never a pass."""
    assert detect_kind(lines) == "nccl-tests"
    record = parse(lines)
    assert not record.rows and record.incomplete[0].startswith("nccl-tests refused to run")
    got = statuses(lines)
    assert got["evidence.complete"] is Status.ERROR and Status.PASS not in got.values()


def test_the_device_lines_of_nccl_tests_1_0_are_read() -> None:
    """v1.0.0 (2018, src/common.cu:660) printed '#   Rank %2d on %10s device %2d [0x%02x] %s', without Pid: the
    ranks and their GPUs are read (the rank count was only inferred from the bandwidths)."""
    text = ("nThread 1 nGpus 2 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20 validation: 1 \n"
            "# Using devices\n#   Rank  0 on       dgx1 device  0 [0x06] Tesla V100-SXM2-16GB\n"
            "#   Rank  1 on       dgx1 device  1 [0x07] Tesla V100-SXM2-16GB\n")
    record = parse(text)
    assert record.nranks == 2 and record.hosts == ["dgx1"] and not record.nranks_inferred
    assert [g.name for g in record.gpus] == ["Tesla V100-SXM2-16GB"] * 2


def test_an_option_warning_that_goes_on_is_no_refusal() -> None:
    """v2.19.6 src/common.cu:1418-1434 and :1346: '... (-I) is incompatible with CUDA graph mode (-G). Disabling.'
    and '... (-V) must be positive ... Using default value 16.' turn the option off and run on: not a refusal."""
    params = ("# nThread 1 nGpus 8 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 "
              "validation: 1 graph: 1 unalign: 0\n")
    for warning in ("per-iteration timing (-I) is incompatible with CUDA graph mode (-G). Disabling.\n",
                    "device_cta_count (-V) must be positive and less than 128, got 0. Using default value 16.\n"):
        record = parse(warning + params)
        assert not any("refused" in problem for problem in record.incomplete)
        assert "before its first result" in record.incomplete[0]


def test_the_table_of_nccl_tests_1_0_is_read_by_its_own_names() -> None:
    """v1.0.0 (2018) headed its table '# bytes N type op|root time algbw busbw res' (src/broadcast.cu:13,
    src/all_reduce.cu:12): one placement for broadcast, whose rows no other rule reads. ``res`` is the largest
    deviation (``%7.0le``, common.cu:573), read as the legacy ``error``; the time is in ms, kept out of ``time_us``."""
    text = ("nThread 1 nGpus 2 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20 validation: 1 \n"
            "# Using devices\n#   Rank  0 on       dgx1 device  0 [0x06] Tesla V100-SXM2-16GB\n\n"
            "#      bytes             N    type    root     time  algbw  busbw      res\n"
            "           8             2   float       0    0.025   0.33   0.33    0e+00\n"
            "        1024           256   float       0    0.025   0.33   0.33    1e+00\n"
            "\n Out of bounds values : 0 OK\n Avg bus bandwidth    : 0.33 \n\n")
    record = parse(text)
    assert [(r.size_bytes, r.error, r.root, r.time_us) for r in record.rows] == [(8, 0.0, 0, None),
                                                                                 (1024, 1.0, 0, None)]
    assert record.max_error == 1.0 and not record.incomplete
    assert statuses(text)["nccl_tests.correctness"] is Status.FAIL


def test_the_relay_line_without_its_pid_is_read() -> None:
    """v2.0.0-v2.10.x's TESTCHECK printed ' .. %s: Test failure %s:%d' (src/common.h:57), the pid came in 2.11:
    alone (its cause cut from the paste) it is an aborted run, as the later form is."""
    for line in (" .. node01: Test failure common.cu:401\n", " .. node01 pid 1234: Test failure common.cu:401\n"):
        assert detect_kind(line) == "nccl-tests"
        assert [g.host for g in parse(line).failure_groups] == ["node01"]
        assert statuses(line)["nccl_tests.correctness"] is Status.FAIL


def test_a_pretty_report_pasted_under_its_command_and_followed_by_more_is_read() -> None:
    """'$ cat out.json | jq .' above the indented report, another prompt after it: the report between is read whole
    (it was 'no nccl-tests result row', ERROR)."""
    pretty = fixture("all_reduce-2.19.6-report-pretty.json")
    for text in ("$ jq . out.json\n" + pretty, "$ jq . out.json\n" + pretty + "$ echo done\ndone\n"):
        record = parse(text)
        assert record.rows_total == 4 and record.out_of_bounds == 0 and not record.incomplete
        assert statuses(text)["nccl_tests.correctness"] is Status.PASS
