"""An nccl-tests run that stopped is judged on the ``NCCL WARN`` lines that say why, not only on its own failure line.

nccl-tests' ``Test NCCL failure common.cu:343 'unhandled cuda error'`` names what NCCL returned to the test; with
``NCCL_DEBUG=WARN`` the cause is the WARN line above it. Seen in the field (NVIDIA/nccl-tests#24, two 4x V100
servers over RoCE): ``NET/IB : Got completion with error 12`` on both hosts, then the test's 'unhandled cuda
error'. Judged on the failure line alone the run was a CUDA error (restart_job) where the log shows the link
failing (check_mechanicals). The inputs below are built here in NCCL's and nccl-tests' own formats.
"""

from __future__ import annotations

from gpu_preflight.actions import Action, action_of
from gpu_preflight.checks.evidence import judge_record
from gpu_preflight.config import Config
from gpu_preflight.model import Finding, Status
from gpu_preflight.parsers import nccl_tests

HEAD = ("# nThread 1 nGpus 4 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
        "#\n# Using devices\n"
        "#   Rank  0 Pid  35902 on       gpu4 device  0 [0x1a] Tesla V100-PCIE-32GB\n"
        "#   Rank  4 Pid  35917 on       gpu5 device  0 [0x1a] Tesla V100-PCIE-32GB\n")
IB = ("{host}:35917:35994 [0] transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 12, "
      "opcode 1, len 0, vendor err 129\n")
ABORT = "gpu5: Test NCCL failure common.cu:343 'unhandled cuda error'\n .. gpu5: Test failure common.cu:393\n"
TABLE = ("#       size         count      type   redop    root     time   algbw   busbw #wrong"
         "     time   algbw   busbw #wrong\n"
         "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
         "            (us)  (GB/s)  (GB/s)\n"
         "   134217728      33554432     float     sum      -1   1211.2  110.81  207.77      0"
         "   1211.8  110.76  207.67      0\n")
SUMMARY = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 207.7\n"


def judged(text: str) -> list[Finding]:
    return judge_record("nccl-tests", nccl_tests.parse(text), Config(), source="run.log")


def correctness(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.check_id == "nccl_tests.correctness"]


def test_an_aborted_run_names_the_warn_that_caused_it_with_its_own_action() -> None:
    findings = correctness(judged(HEAD + IB.format(host="gpu5") + IB.format(host="gpu4") + ABORT))
    ib = [f for f in findings if f.code == "ib_completion_error"]
    assert {f.subject for f in ib} == {"run.log/gpu4", "run.log/gpu5"}
    assert all(f.status is Status.FAIL and action_of(f.details) is Action.CHECK_MECHANICALS for f in ib)
    assert "Got completion with error 12" in ib[0].summary and "net_ib.cu:788" in ib[0].summary
    assert [f.code for f in findings if f.code != "ib_completion_error"] == ["cuda_error"]  # the test's own line


def test_the_warn_lines_of_an_aborted_job_are_counted_not_listed() -> None:
    record = nccl_tests.parse(HEAD + IB.format(host="gpu5") * 5000 + ABORT)
    (group,) = record.warn_causes
    assert (group.signature, group.host, group.count, len(group.examples)) == ("ib_completion_error", "gpu5", 5000, 1)


def test_a_run_cut_after_a_failing_warn_fails_on_it_rather_than_only_being_incomplete() -> None:
    text = HEAD + TABLE + IB.format(host="gpu5")
    assert nccl_tests.parse(text).incomplete  # no 'Out of bounds' line: the run stopped (or the paste was cut)
    assert [f.code for f in correctness(judged(text))] == ["ib_completion_error"]  # no PASS beside it


def test_a_run_that_reached_its_summary_is_not_failed_by_a_warning_it_survived() -> None:
    findings = correctness(judged(HEAD + IB.format(host="gpu5") + TABLE + SUMMARY))
    assert [(f.code, f.status) for f in findings] == [("ok", Status.PASS)]


def test_a_warn_that_names_no_failure_is_not_a_cause() -> None:
    plugin = "gpu5:35917:35917 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
    other = "gpu5:35917:35994 [0] init.cc:512 NCCL WARN Some setting was capped to 16\n"
    record = nccl_tests.parse(HEAD + plugin + other + ABORT)
    assert record.warn_causes == []
    assert [f.code for f in correctness(judged(HEAD + plugin + other + ABORT))] == ["cuda_error"]
