"""NCCL's RAS report (``ncclras``, NCCL >= 2.24) read as job-log evidence (issue 27).

The texts follow ras/client_support.cc's format strings: the "Job summary" and the communicator table
("Group Comms Nodes Ranks Ranks Ranks Status Errors", statuses NOCOMM/INIT/RUNNING/FINALIZE/ABORT), then
"Errors" (INCOMPLETE "Missing communicator data from %d job process%s", DEAD "%d job process%s considered dead
(unreachable via the RAS network)", "#%d-%d (%016lx) INCOMPLETE|ERROR") and "Warnings" (TIMEOUT "Encountered %d
communication timeout%s while gathering communicator data", "#%d-%d (%016lx) MISMATCH"). NCCL's own split is the
verdict: what it lists as an error FAILs, a warning WARNs; a report of running communicators with neither is a
job that runs. Real reports: NVIDIA/nccl#1730 (tests/fixtures/field/nccl-log).
"""

from __future__ import annotations

from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind

from .nccl_log_judging import kinds, triage

HEAD = ("NCCL version 2.27.5 compiled with CUDA 12.9\nCUDA runtime version 12090, driver version 12090\n\n"
        "Job summary\n===========\n\n  Nodes  Processes         GPUs  Processes     GPUs\n"
        "(total)   per node  per process    (total)  (total)\n      2          8            1         16       16\n\n"
        "Communicators... (0.00s)\n=============\n\n"
        "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
        "    #  in group  per comm  per node  per comm  in group\n")


def report(row: str, errors: str = "", warnings: str = "") -> str:
    return HEAD + row + "\nErrors\n======\n\n" + errors + "Warnings\n========\n\n" + warnings


def test_a_report_of_running_communicators_without_errors_is_a_job_that_runs() -> None:
    text = report("    0         1         2         8        16        16   RUNNING      OK\n")
    assert detect_kind(text) == "nccl-log"
    assert triage(text) == [(Status.PASS, "ok")]


def test_what_ras_lists_as_errors_fails() -> None:
    text = report("    0         1         2         8        16        16   RUNNING  INCOMPLETE,ERROR\n",
                  errors="DEAD\n  1 job process considered dead (unreachable via the RAS network)\n"
                         "  Process 4242 on node 10.0.0.2 managing GPU 3\n\n"
                         "#0-0 (0123456789abcdef) ERROR\n  Asynchronous error on 1 rank\n\n")
    assert kinds(text) == ["ras_error", "ras_error"]
    assert {s for s, _ in triage(text)} == {Status.FAIL}


def test_an_aborted_communicator_fails_and_one_still_in_init_is_not_a_pass() -> None:
    assert triage(report("    0         1         2         8        16        16     ABORT      OK\n")) == [
        (Status.FAIL, "ras_error")]
    assert [s for s, _ in triage(report("    0         1         2         8        16        16      INIT      OK\n"))
            ] == [Status.SKIP]


def test_what_ras_lists_as_warnings_warns() -> None:
    text = report("    0         1         2         8        16        16   RUNNING  MISMATCH\n",
                  warnings="#0-0 (0123456789abcdef) MISMATCH\n  Communicator ranks have different AllReduce "
                           "operation counts\n  15 ranks have launched up to operation 12\n")
    assert kinds(text) == ["ras_warning"]
    assert triage(text) == [(Status.WARN, "ras_warning")]
