"""The job-log forms NCCL and torch's ProcessGroupNCCL print, derived from their source (issue 27;
docs/repertoire/nccl-log.md).

Each fixture under ``tests/fixtures/repertoire/nccl-log/`` renders one format string (the README there names the
repository, tag and file:line of each) after an NCCL INFO preamble whose communicator reached ``Init COMPLETE``: a
line the reader did not know would leave that log a PASS. Each must be read as a job log and give the failure
signature its words stand for, a FAIL of ``nccl_log.triage``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind

from .nccl_log_judging import kinds, triage

FORMS = Path(__file__).parent / "fixtures" / "repertoire" / "nccl-log"

# torch's watchdog and communicator texts (ProcessGroupNCCL.cpp, NCCLUtils): before, a log whose communicators
# initialised and that then showed only these PASSed.
TORCH = (
    ("torch-2.4-exception-detected-by-watchdog.txt", "collective_failed"),
    ("torch-2.5-failure-detected-by-watchdog.txt", "collective_failed"),
    ("torch-some-nccl-operations-failed.txt", "collective_failed"),
    ("torch-taking-the-process-down.txt", "collective_failed"),
    ("torch-communicator-aborted.txt", "collective_failed"),
    ("torch-flight-recorder-signal-from-another-rank.txt", "collective_failed"),
    ("torch-abort-future-timed-out.txt", "collective_failed"),
    ("torch-dump-signal-collective-timeout.txt", "watchdog_timeout"),
)

# NCCL WARNs that stop a job, by the ncclResult_t NCCL returns after them or what they say; before, all but two
# were the unnamed 'nccl_warn' (WARN).
NCCL = (
    ("nccl-2.23-ib-got-async-error-event.txt", "ib_async_event"),
    ("nccl-2.30-ib-error-is-fatal.txt", "ib_completion_error"),
    ("nccl-2.21-socket-poll-connect-returned.txt", "connection_refused"),
    ("nccl-2.16-socket-poll-connect-exceeded-timeouts.txt", "connection_refused"),
    ("nccl-2.16-socket-start-connect-exceeded-retries.txt", "connection_refused"),
    ("nccl-2.28-connect-exceeded-error-retry-count.txt", "connection_refused"),
    ("nccl-2.28-try-accept-failed.txt", "system_error"),
    ("nccl-2.25-shm-create-failed.txt", "system_error"),
    ("nccl-2.19-uds-socket-creation-error.txt", "system_error"),
    ("nccl-2.27-mnnvl-imex-not-working.txt", "system_error"),
    ("nccl-2.12-no-transport-for-rank.txt", "system_error"),
    ("nccl-2.14-async-job-failed.txt", "system_error"),  # job error 2: ncclSystemError
    ("nccl-2.21-proxy-uds-call-failed.txt", "remote_error"),  # ... failed : 6: ncclRemoteError
    ("nccl-2.12-p2p-disabled-nvlink.txt", "cuda_error"),
    ("nccl-2.4-collective-mismatch-hang.txt", "invalid_usage"),
    ("nccl-2.4-bootstrap-rank-count-mismatch.txt", "invalid_usage"),
    ("nccl-2.28-bootstrap-message-truncated.txt", "invalid_usage"),
    ("nccl-2.21-ib-merge-different-link-layer.txt", "invalid_usage"),
    ("nccl-2.14-use-before-success.txt", "invalid_usage"),
    ("nccl-2.12-send-to-self-without-recv.txt", "invalid_usage"),
    ("nccl-2.30-nvls-same-nvml-device.txt", "duplicate_gpu"),
    ("nccl-2.4-ring-does-not-contain-rank.txt", "internal_error"),
    ("nccl-2.8-no-transport-found.txt", "internal_error"),
    ("nccl-2.23-no-algorithm-protocol.txt", "internal_error"),
)

# The same format strings with what a healthy run prints through them: no failure named.
HEALTHY = ("nccl-2.23-ib-benign-async-events-sm-handover.txt",)


@pytest.mark.parametrize(("name", "kind"), TORCH + NCCL)
def test_a_source_form_is_the_failure_it_names(name: str, kind: str) -> None:
    text = (FORMS / name).read_text()
    assert detect_kind(text) == "nccl-log"
    assert kinds(text) == [kind]
    assert triage(text) == [(Status.FAIL, kind)]


def test_every_fixture_is_covered() -> None:
    """A fixture added to the folder without a row here would test nothing."""
    assert {p.name for p in FORMS.glob("*.txt")} == {name for name, _ in TORCH + NCCL} | set(HEALTHY)


def test_a_watchdog_line_that_names_its_cause_is_read_as_that_cause() -> None:
    """The generic watchdog words come after every specific signature: the cause in the same line wins."""
    text = ("RuntimeError: NCCL communicator was aborted on rank 3. Original reason for failure was: [Rank 3] "
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=167, OpType=ALLREDUCE) ran for 600032 "
            "milliseconds before timing out.\n")
    assert kinds(text) == ["watchdog_timeout"]
    text = ("[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] Process group watchdog thread terminated with "
            "exception: CUDA error: an illegal memory access was encountered\n")
    assert kinds(text) == ["cuda_kernel_fault"]  # CUDA's words name the fault (docs/repertoire/cuda-errors.md)


def test_async_events_a_healthy_fabric_raises_are_no_ib_failure() -> None:
    """NCCL prints every non-fatal verbs event through the same WARN ('port active', 'SM change', 'client
    reregistration'...): an SM handover on a healthy fabric is not an HCA failure (it stays the unnamed WARN, as
    before 2.23's form was read); 'port error' still is, in every version's wording."""
    healthy = (FORMS / HEALTHY[0]).read_text()
    assert kinds(healthy) == ["nccl_warn", "nccl_warn"]
    assert triage(healthy) == [(Status.WARN, "nccl_warn")]
    for line in ("NCCL WARN NET/IB : Got async event : port active", "NCCL WARN NET/IB : Got async event :  SM change",
                 "NCCL WARN NET/IB : mlx5_0:1 Got non-fatal async event: client reregistration(18)",
                 "NCCL WARN NET/IB : Got async event : GID table change"):
        assert "ib_async_event" not in kinds(line + "\n"), line
    assert kinds("NCCL WARN NET/IB : mlx5_0:1 Got non-fatal async event: port error(10)\n") == ["ib_async_event"]


def test_the_non_fatal_async_events_of_2_23_read_as_the_later_forms_do() -> None:
    """2.23-2.27's 'Got async error event' is the event 2.28+ prints as 'Got non-fatal async event' (and before 2.23
    as 'Got async event :')."""
    later = "gpu-node-07:48213:48390 [3] NCCL WARN NET/IB : mlx5_2:1 Got non-fatal async event: port error(10)\n"
    assert kinds(later) == kinds((FORMS / "nccl-2.23-ib-got-async-error-event.txt").read_text())
