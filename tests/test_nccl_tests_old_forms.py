"""nccl-tests texts of the third field round (issue 27): the pre-2019 failure line and the summary line alone.

nccl-tests before its 2019 resync with NCCL 2.4 (commit cbe7f65, src/common.h) printed a failed NCCL or CUDA
call as ``NCCL failure common.cu:874 'unhandled system error'`` / ``Cuda failure <file>:<line> '<error>'``,
without the host and "Test" of today's ``host: Test NCCL failure ...`` (NVIDIA/nccl-tests#14, #6). And a
user who quotes only the line that said FAILED pastes ``Out of bounds values : 56 FAILED`` alone
(NVIDIA/nccl-tests#356): nccl-tests' own verdict over every size it ran. Before these rules both texts were
not recognised at all (exit 3) though each shows a failed run.
"""

from __future__ import annotations

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text

PARAMS = ("nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 "
          "validation: 1\n")


def statuses(text: str) -> dict[str, Status]:
    findings = judge_text(text, Config(), source="all_reduce_perf.txt")
    return {check: Status.worst(f.status for f in findings if f.check_id == check)
            for check in dict.fromkeys(f.check_id for f in findings)}


@pytest.mark.parametrize(("line", "signature"), [
    ("NCCL failure common.cu:874 'unhandled system error'", "system_error"),
    ("NCCL failure common.cu:908 'unhandled cuda error'.", "cuda_error"),
    ("Cuda failure common.cu:513 'out of memory'", "out_of_memory"),
])
def test_the_pre_2019_failure_line_is_an_aborted_nccl_tests_run(line: str, signature: str) -> None:
    for text in (PARAMS + line + "\n", "$ ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 4\n" + line + "\n"):
        assert detect_kind(text) == "nccl-tests"
        _kind, record = parse_text(text, "nccl-tests")
        assert [(g.signature, g.count) for g in record.failure_groups] == [(signature, 1)]
        assert statuses(text)["nccl_tests.correctness"] is Status.FAIL


def test_nccls_own_cuda_failure_warn_is_not_read_as_nccl_tests() -> None:
    """NCCL's WARN "Cuda failure 'invalid argument'" names no file:line after "failure": still a job log."""
    text = "node:1:2 [0] transport/nvls.cc:254 NCCL WARN Cuda failure 1 'invalid argument'\n"
    assert detect_kind(text) == "nccl-log"


def test_the_summary_line_alone_is_judged_on_what_it_says() -> None:
    failed = "./hypercube_perf -b 8 -e 8g -f 2 -g 4 -d 0,1,2,3\n Out of bounds values : 56 FAILED\n"
    assert detect_kind(failed) == "nccl-tests"
    _kind, record = parse_text(failed, "nccl-tests")
    assert record.out_of_bounds == 56 and not record.rows
    assert statuses(failed)["nccl_tests.correctness"] is Status.FAIL
    # "0 OK" alone says the values were right, not that the run was fit: its bandwidth was never shown
    ok = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 21.9736\n"
    assert detect_kind(ok) == "nccl-tests"
    assert Status.worst(statuses(ok).values()) is not Status.PASS


def test_a_table_abridged_to_size_time_algbw_busbw_is_read_by_its_header() -> None:
    """An author who kept only the columns that matter (elizabetht/spark's DGX Spark tutorial: "size time algbw
    busbw") still pasted nccl-tests' table: its rows are read by the header's names; without the out-of-bounds
    line the paste is incomplete, and with no device list its bandwidth is not judged: never a PASS."""
    text = ("#       size      time   algbw   busbw\n#        (B)      (us)  (GB/s)  (GB/s)\n"
            " 17179869184   387603   44.32   22.16\n# Avg bus bandwidth    : 21.9736\n")
    assert detect_kind(text) == "nccl-tests"
    _kind, record = parse_text(text, "nccl-tests")
    assert [(r.size_bytes, r.busbw_gbps) for r in record.rows] == [(17179869184, 22.16)]
    got = statuses(text)
    assert got["evidence.complete"] is Status.ERROR and got["nccl_tests.bandwidth"] is Status.WARN
