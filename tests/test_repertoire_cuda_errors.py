"""CUDA's own error texts as training jobs print them, derived from source (issue 27; docs/repertoire/cuda-errors.md).

Each fixture under ``tests/fixtures/repertoire/cuda-errors/`` renders one framework's framing of a CUDA error from its
format string (the PROVENANCE.md there names each): torch's ``CUDA error: <cudaGetErrorString>`` and its driver
sentences, cupy's ``<cudaGetErrorName>: <words>``, TensorFlow/XLA's ``failed call to cuInit: CUDA_ERROR_<NAME>``,
NCCL's ``Cuda failure '<words>'`` and nccl-tests' ``Test CUDA failure``. Before, a job log that said only
``RuntimeError: CUDA error: uncorrectable ECC error encountered`` was exit 3 (no tool recognised), as was every form
here without an NCCL line. Each is now a job log whose signature is what CUDA's words say about the node: a
hardware fault takes its Xid's action (ECC ~ Xid 48/95, NVLink ~ Xid 74: reset_gpu), no GPU or no usable driver
nvidia-smi's (reboot_node), a kernel's own fault (Xid 13/31/43's kind) restarts the job.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.actions import Action, action_of
from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind
from gpu_preflight.parsers.nccl_log import CUDA_ERROR_KINDS, CUDA_ERRORS, classify

from .nccl_log_judging import kinds, triage

FORMS = Path(__file__).parent / "fixtures" / "repertoire" / "cuda-errors"

ACTION = {"cuda_ecc_uncorrectable": Action.RESET_GPU, "cuda_nvlink_uncorrectable": Action.RESET_GPU,
          "cuda_no_device": Action.REBOOT_NODE, "cuda_driver_mismatch": Action.REBOOT_NODE,
          "cuda_kernel_fault": Action.RESTART_JOB, "cuda_error": Action.RESTART_JOB,
          "out_of_memory": Action.RESTART_JOB}

# (fixture, the signature CUDA's words stand for)
JOB_LOG = (
    ("torch-c10-cuda-check-ecc.txt", "cuda_ecc_uncorrectable"),
    ("torch-2.8-accelerator-error-ecc.txt", "cuda_ecc_uncorrectable"),
    ("torch-c10-cuda-check-nvlink.txt", "cuda_nvlink_uncorrectable"),
    ("torch-c10-cuda-check-illegal-address.txt", "cuda_kernel_fault"),
    ("torch-c10-cuda-check-device-assert.txt", "cuda_kernel_fault"),
    ("torch-c10-cuda-check-launch-failure.txt", "cuda_kernel_fault"),
    ("torch-c10-cuda-check-unknown-error.txt", "cuda_error"),
    ("torch-thc-cuda-runtime-error-59.txt", "cuda_kernel_fault"),
    ("torch-cublas-execution-failed.txt", "cuda_error"),
    ("torch-cublas-alloc-failed.txt", "out_of_memory"),
    ("torch-found-no-driver.txt", "cuda_no_device"),
    ("torch-driver-too-old.txt", "cuda_driver_mismatch"),
    ("torch-no-cuda-gpus.txt", "cuda_no_device"),
    ("torch-cuda-init-warning-804.txt", "cuda_driver_mismatch"),
    ("torch-cuda-init-warning-driver-init-failed.txt", "cuda_no_device"),
    ("torch-cuda-init-warning-unknown-error.txt", "cuda_error"),
    ("cupy-runtime-ecc.txt", "cuda_ecc_uncorrectable"),
    ("cupy-driver-illegal-address.txt", "cuda_kernel_fault"),
    ("cupy-runtime-devices-unavailable.txt", "cuda_error"),
    ("tensorflow-cuinit-no-device.txt", "cuda_no_device"),
    ("tensorflow-1.x-cuinit-no-device-name-only.txt", "cuda_no_device"),
    ("tensorflow-cuinit-unknown-303.txt", "cuda_no_device"),
    ("xla-2024-cuinit-unknown-303.txt", "cuda_no_device"),
    ("tensorflow-cudagetdevice-insufficient-driver.txt", "cuda_driver_mismatch"),
    ("xla-cuinit-compat-not-supported.txt", "cuda_driver_mismatch"),
    ("xla-synchronize-ecc.txt", "cuda_ecc_uncorrectable"),
    ("xla-synchronize-illegal-address.txt", "cuda_kernel_fault"),
    ("nccl-warn-cucheck-ecc.txt", "cuda_ecc_uncorrectable"),
    ("nccl-warn-cudacheck-nvlink.txt", "cuda_nvlink_uncorrectable"),
)
# nccl-tests quotes cudaGetErrorString in its own failure line: judged by nccl_tests.correctness, same signature.
NCCL_TESTS = (("nccl-tests-cuda-failure-ecc.txt", "cuda_ecc_uncorrectable"),)
# A CUDA header's enum is no log.
NOT_LOG = ("cuda-header-enum-excerpt.txt",)


@pytest.mark.parametrize(("name", "kind"), JOB_LOG)
def test_a_cuda_error_form_is_the_fault_its_words_name(name: str, kind: str) -> None:
    text = (FORMS / name).read_text()
    assert detect_kind(text) == "nccl-log"
    assert set(kinds(text)) == {kind}
    assert triage(text) == [(Status.FAIL, kind)]
    (finding,) = [f for f in judge_text(text, Config(), source="job.log") if f.check_id == "nccl_log.triage"]
    assert action_of(finding.details) is ACTION[kind]


@pytest.mark.parametrize(("name", "kind"), NCCL_TESTS)
def test_nccl_tests_cuda_failure_is_the_fault_its_words_name(name: str, kind: str) -> None:
    text = (FORMS / name).read_text()
    assert detect_kind(text) == "nccl-tests"
    failed = [f for f in judge_text(text, Config(), source="run.log")
              if f.check_id == "nccl_tests.correctness" and f.status is Status.FAIL]
    assert [f.code for f in failed] == [kind]
    assert action_of(failed[0].details) is ACTION[kind]


@pytest.mark.parametrize("name", NOT_LOG)
def test_a_header_naming_cuda_errors_is_no_log(name: str) -> None:
    assert detect_kind((FORMS / name).read_text()) is None


def test_every_fixture_is_covered() -> None:
    """A fixture added to the folder without a row here would test nothing."""
    assert {p.name for p in FORMS.glob("*.txt")} == {n for n, _ in JOB_LOG + NCCL_TESTS} | set(NOT_LOG)


@pytest.mark.parametrize(("kind", "runtime", "driver", "words"), CUDA_ERRORS)
def test_every_framing_of_every_listed_error_reads_as_its_kind(kind: str, runtime: str, driver: str,
                                                              words: str) -> None:
    """Each error in the table, in each framing that prints its words or its name, names its signature."""
    lines = [f"RuntimeError: CUDA error: {words}", f"RuntimeError: cuda runtime error (1) : {words} at x.cu:1",
             f"NCCL WARN Cuda failure 1 '{words}'",
             f"UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
             f"functions before calling NumCudaDevices() that might have already set an error? Error 1: {words}",
             f"CUDARuntimeError: {runtime}: {words}", f"failed call to cuInit: {runtime}"]
    if driver:
        lines += [f"CUDADriverError: {driver}: {words}", f"failed call to cuInit: {driver}"]
    for line in lines:
        found = classify(line)
        assert found is not None and found[0] == kind, line
        assert detect_kind(line + "\n") == "nccl-log", line


def test_every_name_and_sentence_names_a_signature_with_advice() -> None:
    from gpu_preflight.checks.evidence_nccl import ADVICE, NCCL_LOG_ACTIONS

    assert set(CUDA_ERROR_KINDS.values()) <= set(ADVICE) & set(NCCL_LOG_ACTIONS)
    assert {NCCL_LOG_ACTIONS[k] for k in CUDA_ERROR_KINDS.values()} == {ACTION[k] for k in CUDA_ERROR_KINDS.values()}


def test_nccl_words_after_a_cuda_framing_stay_nccl_results() -> None:
    """'unhandled cuda error' is NCCL's result (cuda_error), and 'invalid argument' after NCCL's framing is NCCL's
    invalid usage: the CUDA table does not take them."""
    assert triage("RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)\n") == [
        (Status.FAIL, "cuda_error")]
    assert triage("RuntimeError: NCCL error: invalid argument\n") == [(Status.FAIL, "invalid_usage")]
