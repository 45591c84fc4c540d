"""Every ncclResult_t an NCCL call can fail with is named by its signature, in NCCL's own words.

nccl-tests' failure line quotes ``ncclGetErrorString`` (NCCL's init.cc): ``Test NCCL failure common.cu:959
'internal error - please report this issue to the NCCL developers / '`` (NVIDIA/nccl-tests#219 and #204 in the
field corpus). Those words were not a signature, so the abort was an unnamed "NCCL failure" with no operator
action, where ``[Proxy Service N] ... retcode 3`` (the same ncclInternalError by number) was ``internal_error``.
The strings below are ncclGetErrorString's, one per code of :data:`NCCL_RESULT_KINDS`.
"""

from __future__ import annotations

import pytest

from gpu_preflight.actions import Action, action_of
from gpu_preflight.checks.evidence import judge_record
from gpu_preflight.config import Config
from gpu_preflight.parsers import nccl_tests
from gpu_preflight.parsers.nccl_log import NCCL_RESULT_KINDS, classify

GET_ERROR_STRING = {  # ncclResult_t -> ncclGetErrorString(code), NCCL src/init.cc
    1: "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
    2: "unhandled system error (run with NCCL_DEBUG=INFO for details)",
    3: "internal error - please report this issue to the NCCL developers",
    4: "invalid argument (run with NCCL_DEBUG=WARN for details)",
    5: "invalid usage (run with NCCL_DEBUG=WARN for details)",
    6: "remote process exited or there was a network error",
}


def test_the_table_covers_every_failing_code() -> None:
    assert set(GET_ERROR_STRING) == set(NCCL_RESULT_KINDS)


@pytest.mark.parametrize("code", sorted(GET_ERROR_STRING))
def test_ncclGetErrorString_names_the_signature_of_its_code(code: int) -> None:
    found = classify(GET_ERROR_STRING[code])
    assert found is not None and found[0] == NCCL_RESULT_KINDS[code]


@pytest.mark.parametrize("code", sorted(GET_ERROR_STRING))
def test_an_aborted_nccl_tests_run_carries_the_signature_and_its_action(code: int) -> None:
    text = (f"#  Rank  0 Group  0 Pid 3164639 on    fengyun device  0 [0x01] NVIDIA RTX A6000\n"
            f"fengyun: Test NCCL failure common.cu:959 '{GET_ERROR_STRING[code]} / '\n"
            " .. fengyun pid 3164639: Test failure common.cu:844\n")
    (finding,) = [f for f in judge_record("nccl-tests", nccl_tests.parse(text), Config(), source="log")
                  if f.check_id == "nccl_tests.correctness"]
    assert finding.code == NCCL_RESULT_KINDS[code]
    assert action_of(finding.details) is Action.RESTART_JOB


def test_a_cuda_invalid_argument_stays_a_cuda_error() -> None:
    found = classify("node23:12098:12141 [2] transport/nvls.cc:244 NCCL WARN Cuda failure 1 'invalid argument'")
    assert found is not None and found[0] == "cuda_error"
