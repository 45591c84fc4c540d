"""nccl-tests as people paste it (issue 27): a device list whose host was rewritten into words, the tail of a
run quoted from below its column header, and rccl-tests' JSON records (--output_file). Each is read as the tool
writes it, so the run is judged on what it shows rather than refused or judged without its devices.

The inputs are built here (the field texts they stand for are nccl-tests#347, ROCm/rccl#2075 and
ROCm/rccl-tests#93, with their provenance in ``tests/fixtures/field/nccl-tests/SOURCES.toml``), so these run in a
clone without ``../shared``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.cli.main import main
from gpu_preflight.parsers.detect import detect_kind
from gpu_preflight.parsers.nccl_tests import parse

HEADER = """\
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""
ROW_8G = ("  8589934592    2147483648     float     sum      -1    31356  273.95  479.41      0"
          "    31308  274.36  480.14      0\n")
TAIL = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 479.775\n"


def devices(hosts: list[str]) -> str:
    """Eight H100 device lines as nccl-tests prints them, rank r on ``hosts[r * len(hosts) // 8]``."""
    return "".join(f"#  Rank {r} Group  0 Pid {1000 + r} on {hosts[r * len(hosts) // 8]} device  {r % 8} "
                   f"[0000:{r:02x}:00] NVIDIA H100 80GB HBM3\n" for r in range(8))


def judge(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, dict[str, Any]]]:
    code = main(["judge", str(path), "--format", "json"])
    findings = json.loads(capsys.readouterr().out)["findings"]
    return code, {f["check_id"]: f for f in findings}


@pytest.mark.parametrize("host", ["NODE A", "node 1 (redacted)", "gpu-node-07"])
def test_a_host_written_as_words_is_one_host(host: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """'on NODE A device 0': the words between 'on' and 'device' are the host, so the eight ranks are one node of
    H100s and the 479 GB/s all_reduce is held to the NVSwitch floor (it was 'lists no devices': not judged)."""
    text = devices([host]) + "#\n" + HEADER + ROW_8G + TAIL
    record = parse(text)
    assert record.hosts == [host] and record.nranks == 8 and not record.nranks_inferred
    assert {g.name for g in record.gpus} == {"NVIDIA H100 80GB HBM3"}
    log = tmp_path / "one-node.txt"
    log.write_text(text)
    code, by_check = judge(log, capsys)
    assert code == 0
    assert by_check["nccl_tests.bandwidth"]["status"] == "PASS"
    assert "NVSwitch" in by_check["nccl_tests.bandwidth"]["details"]["floor_basis"]


def test_two_hosts_written_as_words_are_two_hosts() -> None:
    record = parse(devices(["NODE A", "NODE B"]) + "#\n" + HEADER + ROW_8G + TAIL)
    assert record.hosts == ["NODE A", "NODE B"] and record.nranks == 8


def test_a_device_list_alone_with_worded_hosts_is_nccl_tests() -> None:
    """A paste cut in its device list is still nccl-tests (an unfinished run), with the host written as words."""
    assert detect_kind(devices(["NODE A"])[:300]) == "nccl-tests"


BROADCAST_TAIL = """\
      262144         65536     float    none       0    43.00    6.10    6.10      0    42.86    6.12    6.12      0
     1048576        262144     float    none       0    151.9    6.90    6.90      0    149.8    7.00    7.00      0
   134217728      33554432     float    none       0    18781    7.15    7.15      0    18756    7.16    7.16      0
# Errors with asterisks indicate errors that have exceeded the maximum threshold.
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 3.41227
#
# Collective test concluded: broadcast_perf
"""


def test_the_tail_of_a_run_below_its_header_is_read_by_its_rows(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Rows and summary quoted without the column header above them: each row's cells (datatype, reduction,
    root, then the two time/algbw/busbw/#wrong groups) say the columns, so the rows are read, not reported as
    'only the summary lines were shown (no result row)', and the run is judged on them."""
    record = parse(BROADCAST_TAIL)
    assert record.test == "broadcast" and record.rows_total == 3 and record.incomplete == []
    assert record.peak_busbw_gbps == 7.15 and record.out_of_bounds == 0
    assert [r.root for r in record.rows] == [0, 0, 0] and record.rows[0].redop == "none"
    log = tmp_path / "tail.txt"
    log.write_text(BROADCAST_TAIL)
    code, by_check = judge(log, capsys)
    assert by_check["nccl_tests.correctness"]["status"] == "PASS"
    assert "evidence.complete" not in by_check
    # no device list and no profile: the bandwidth is reported, not judged, so the run is a WARN, never SUCCESS
    assert code == 1 and by_check["nccl_tests.bandwidth"]["status"] == "WARN"


def test_a_headerless_legacy_row_reads_its_error_column() -> None:
    """The legacy layout (no root, a float error column) below a cut: the error cell names the column."""
    text = ("   134217728      33554432     float     sum    13882   19.34   16.92  2e-07"
            "    13874   19.35   16.93  2e-07\n# Out of bounds values : 0 OK\n")
    record = parse(text)
    assert record.rows_total == 1 and record.rows[0].error == 2e-07 and record.rows[0].wrong is None
    assert record.rows[0].busbw_gbps == 16.92 and record.rows[0].root is None


@pytest.mark.parametrize("line", [
    "nccl-test-0   1/1   Running   0   2m51s   10.68.5.7   gke-node   <none>   <none>",
    "  1024  256  float  sum  -1  18.66  1.76  3.07",  # too few cells: not a whole row
    "  1024  256  matrix  sum  -1  18.66  1.76  3.07  0  17.95  1.83  3.20  0",  # no nccl-tests datatype
])
def test_numbers_that_are_not_a_result_row_are_not_read(line: str) -> None:
    """Only a line with a whole row's cells implies a header: a pod listing or a short line before the table is
    skipped as before."""
    record = parse(line + "\n" + HEADER + ROW_8G + TAIL)
    assert record.rows_total == 1 and record.rows[0].size_bytes == 8589934592


# rccl-tests' --output_file json (ROCm/rccl-tests#93's sample, abridged): one record per size and placement
JSON_RECORDS = """\
{"#wrong":"0","algBw":0.05337739748698796,"busBw":0.08006609623048194,"gpus":4,"inPlace":0,"name":"AllReduce","redop":"sum","size":1024,"time":19.184150000000002,"type":"float"}
{"#wrong":"0","algBw":0.05146336376406259,"busBw":0.07719504564609389,"gpus":4,"inPlace":1,"name":"AllReduce","redop":"sum","size":1024,"time":19.897650000000002,"type":"float"}
{"#wrong":"0","algBw":0.10542219065047241,"busBw":0.1581332859757086,"gpus":4,"inPlace":0,"name":"AllReduce","redop":"sum","size":2048,"time":19.426650000000002,"type":"float"}
"""


def test_rccl_tests_json_records_are_read_and_never_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each size's out-of-place and in-place records make one row; the records carry no end-of-run line, so a run
    that died between sizes reads the same as one that finished: judged, but never SUCCESS (ERROR)."""
    assert detect_kind(JSON_RECORDS) == "nccl-tests"
    record = parse(JSON_RECORDS)
    assert record.test == "all_reduce" and record.nranks == 4 and record.rows_total == 2
    first = record.rows[0]
    assert (first.size_bytes, first.redop, first.wrong, first.busbw_gbps) == (1024, "sum", 0, 0.08006609623048194)
    assert first.in_place is not None and first.in_place.busbw_gbps == 0.07719504564609389
    assert record.rows[1].in_place is None
    assert any("no end-of-run line" in problem for problem in record.incomplete)
    log = tmp_path / "rccl.json"
    log.write_text(JSON_RECORDS)
    code, by_check = judge(log, capsys)
    assert code == 3 and by_check["evidence.complete"]["status"] == "ERROR"
    assert by_check["nccl_tests.correctness"]["status"] == "PASS"


def test_rccl_tests_json_record_with_wrong_values_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Wrong values in a record FAIL the run, complete or not; the numeric 'wrong' key of other builds reads the
    same as rccl-tests#93's string '#wrong'."""
    bad = ('{"numCycle":1,"name":"allreduce","size":1048576,"type":"float","redop":"sum","inPlace":0,'
           '"time":20.5,"algBw":51.1,"busBw":95.8,"wrong":12}\n')
    record = parse(JSON_RECORDS + bad)
    assert record.wrong_total == 12 and record.wrong_sizes == [1048576]
    log = tmp_path / "rccl.json"
    log.write_text(JSON_RECORDS + bad)
    code, by_check = judge(log, capsys)
    assert code == 2 and by_check["nccl_tests.correctness"]["status"] == "FAIL"


def test_a_cut_json_record_is_named() -> None:
    record = parse(JSON_RECORDS + '{"#wrong":"0","algBw":0.2051934584565905,"busBw":0.30779\n')
    assert record.rows_total == 2
    assert any(problem.startswith("unreadable JSON record (line 4)") for problem in record.incomplete)


def test_a_pasted_command_line_names_the_collective() -> None:
    """nccl-tests before 2.14 prints no test name: the binary on the pasted command line names it (the judge's
    floors depend on the collective), where the output itself names none."""
    command = "root@autodl-container-xxxxx:~/nccl-tests# ./build/broadcast_perf -b 8 -e 1024M -f 2 -g2\n"
    assert parse(command + HEADER + ROW_8G + TAIL).test == "broadcast"
    started = "# Collective test starting: all_gather_perf\n"
    assert parse(command + started + HEADER + ROW_8G + TAIL).test == "all_gather"  # the output's own name wins
