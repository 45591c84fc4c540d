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

NCCL: tuple[tuple[str, str], ...] = ()


@pytest.mark.parametrize(("name", "kind"), TORCH + NCCL)
def test_a_source_form_is_the_failure_it_names(name: str, kind: str) -> None:
    text = (FORMS / name).read_text()
    assert detect_kind(text) == "nccl-log"
    assert kinds(text) == [kind]
    assert triage(text) == [(Status.FAIL, kind)]


def test_every_fixture_is_covered() -> None:
    """A fixture added to the folder without a row here would test nothing."""
    assert {p.name for p in FORMS.glob("torch-*.txt")} == {name for name, _ in TORCH + NCCL}


def test_a_watchdog_line_that_names_its_cause_is_read_as_that_cause() -> None:
    """The generic watchdog words come after every specific signature: the cause in the same line wins."""
    text = ("RuntimeError: NCCL communicator was aborted on rank 3. Original reason for failure was: [Rank 3] "
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=167, OpType=ALLREDUCE) ran for 600032 "
            "milliseconds before timing out.\n")
    assert kinds(text) == ["watchdog_timeout"]
    text = ("[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] Process group watchdog thread terminated with "
            "exception: CUDA error: an illegal memory access was encountered\n")
    assert kinds(text) == ["cuda_error"]
