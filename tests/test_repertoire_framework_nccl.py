"""The NCCL failures as the frameworks raise them, derived from their source (issue 27;
docs/repertoire/framework-nccl.md).

Each fixture under ``tests/fixtures/repertoire/nccl-log/framework/`` renders one framework's report of a failed NCCL
call from its format string (the PROVENANCE.md there names the repository, revision and function of each): XLA/JAX,
cupy, vLLM, Horovod, TensorFlow, Paddle and torch's c10d put ncclGetErrorString's words after their own framing.
Users paste these far more often than NCCL's own WARN lines; before, most were no log at all (exit 3) or a log with
no failure named. Each must be read as a job log and give the signature NCCL's own return code stands for
(``NCCL_RESULT_KINDS``), so the verdict and the operator's action are those of the same result in NCCL's WARN.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind
from gpu_preflight.parsers.nccl_log import NCCL_RESULT_KINDS, NCCL_RESULT_TEXTS

from .nccl_log_judging import kinds, triage

FORMS = Path(__file__).parent / "fixtures" / "repertoire" / "nccl-log" / "framework"

# (fixture, the signature its ncclResult_t stands for)
FRAMEWORK = (
    ("jax-xla-nccl-utils-init-unhandled-cuda.txt", "cuda_error"),
    ("jax-xla-nccl-api-group-end-system-error.txt", "system_error"),
    ("jax-xla-nccl-errors-init-config-internal-error.txt", "internal_error"),
    ("xla-async-error-aborting-communicator.txt", "remote_error"),
    ("cupy-nccl-error-unhandled-cuda.txt", "cuda_error"),
    ("cupy-nccl-error-internal.txt", "internal_error"),
    ("vllm-pynccl-nccl-check-system-error.txt", "system_error"),
    ("vllm-pynccl-nccl-check-invalid-usage.txt", "invalid_usage"),  # 'invalid argument' (NCCL < 2.18)
    ("horovod-error-check-internal.txt", "internal_error"),
    ("horovod-async-error-remote.txt", "remote_error"),
    ("tensorflow-nccl-manager-system-error.txt", "system_error"),
    ("tensorflow-nccl-manager-invoking-invalid-argument.txt", "invalid_usage"),
    ("paddle-nccl-error-invalid-usage.txt", "invalid_usage"),
    ("paddle-nccl-error-internal.txt", "internal_error"),
    ("torch-c10d-nccl-error-in-invalid-argument.txt", "invalid_usage"),
)

# A framework's traceback that names no NCCL failure stays what it was: no tool recognised (exit 3).
NOT_NCCL = ("jax-xla-resource-exhausted-no-nccl.txt",)


@pytest.mark.parametrize(("name", "kind"), FRAMEWORK)
def test_a_framework_form_is_the_failure_its_result_names(name: str, kind: str) -> None:
    text = (FORMS / name).read_text()
    assert detect_kind(text) == "nccl-log"
    assert set(kinds(text)) == {kind}  # Paddle's hint line names the result again ('ncclInvalidUsage')
    assert triage(text) == [(Status.FAIL, kind)]


def test_every_fixture_is_covered() -> None:
    """A fixture added to the folder without a row here would test nothing."""
    assert {p.name for p in FORMS.glob("*.txt")} == {name for name, _ in FRAMEWORK} | set(NOT_NCCL)


@pytest.mark.parametrize("name", NOT_NCCL)
def test_a_framework_traceback_without_an_nccl_failure_is_not_a_job_log(name: str) -> None:
    assert detect_kind((FORMS / name).read_text()) is None


@pytest.mark.parametrize("words", sorted(NCCL_RESULT_TEXTS))
@pytest.mark.parametrize("framing", (
    "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:297: NCCL operation "
    "ncclCommInitRank(&comm, nranks, id, rank) failed: {}",
    "E1107 09:14:22.120413   81301 nccl_utils.cc:190] Aborting communicator: 0x7f3a2c004e00 due to async NCCL "
    "error: {}",
    "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: failed to allocate 1.00GiB (1073741824 bytes) from device "
    "collective memory: {}, Last NCCL warning(error) log entry (may be unrelated): ",
    "cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_SYSTEM_ERROR: {}",
    "RuntimeError: NCCL error: {}",
    "horovod.common.exceptions.HorovodInternalError: ncclCommInitRank failed: {}",
    "RuntimeError: NCCL async error: {}",
    "tensorflow.python.framework.errors_impl.InternalError: NCCL: {}. Set NCCL_DEBUG=WARN for detail.",
    "  (0) Unknown: Error invoking NCCL: {}",
    "OSError: (External) NCCL error(2), {}. ",
    "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:290, {}",
    "RuntimeError: NCCL Error 2: {}",
))
def test_each_framing_reads_every_result_as_nccl_s_own_code(framing: str, words: str) -> None:
    """The words are ncclGetErrorString's for each code (init.cc): whichever framework framed them, the line is the
    signature NCCL's own return of that code is (a ``[Proxy Service N] ... retcode N`` line, nccl-tests' quote)."""
    line = framing.format(words) + "\n"
    assert detect_kind(line) == "nccl-log", line
    assert kinds(line) == [NCCL_RESULT_KINDS[NCCL_RESULT_TEXTS[words]]], line


def test_the_2_18_wording_reads_as_the_older() -> None:
    """NCCL 2.18+ appends a hint to the same words: the code they name does not change."""
    older = kinds("RuntimeError: NCCL error: invalid argument\n")
    assert kinds("RuntimeError: NCCL error: invalid argument (run with NCCL_DEBUG=WARN for details)\n") == older
    assert kinds("RuntimeError: NCCL error: internal error - please report this issue to the NCCL developers\n") == \
        kinds("RuntimeError: NCCL error: internal error\n") == ["internal_error"]


def test_a_note_that_quotes_a_framework_error_is_no_log() -> None:
    """The reader skips an author's ``#`` note; a text whose only NCCL words are in one is not claimed as a job log
    it then could not read (it stays unrecognised, exit 3)."""
    assert detect_kind("# cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_UNHANDLED_CUDA_ERROR: unhandled cuda "
                       "error\nsome notes\n") is None


def test_a_cause_the_same_line_quotes_is_read_as_that_cause() -> None:
    """XLA appends NCCL's last warning to the status; where it names a signature read before a framework's report
    (an InfiniBand completion error here), the line is that cause, as torch's 'Original reason' is. Otherwise the
    code decides: a quoted CUDA out-of-memory under 'unhandled cuda error' stays ``cuda_error``."""
    status = "jax.errors.JaxRuntimeError: INTERNAL: NCCL operation ncclGroupEnd() failed: {}. Last NCCL warning(error) "
    quoted = ("log entry (may be unrelated) 'NET/IB : Got completion from peer 10.1.0.7<47123> with "
              "status=IBV_WC_RETRY_EXC_ERR(12) opcode=0 len=0 vendor err 129 (Recv)'.\n")
    remote = status.format("remote process exited or there was a network error")
    assert kinds(remote + quoted) == ["ib_completion_error"]
    assert kinds(status.format("unhandled cuda error (run with NCCL_DEBUG=INFO for details)")
                 + "log entry (may be unrelated) 'Cuda failure 2 'out of memory''.\n") == ["cuda_error"]
