"""Slurm's failure texts in a job's stderr, derived from SchedMD/slurm 20.11-25.05 (issue 27;
docs/repertoire/slurm-job.md).

Each fixture under ``tests/fixtures/repertoire/slurm-job/`` renders srun's or slurmstepd's format strings (its
PROVENANCE.md names the file:line at a tag). They are job-log signatures (parsers/slurm_job.py, read by the nccl-log
reader), so a log holding NCCL's lines as well yields both findings. The node a line names is the finding's host:
a node failure names the node that failed (isolate_node), a task's exit names the node and task without claiming a
node fault, an OOM kill is the job's memory (restart_job), a time limit or a cancel is a WARN that the job did not
finish, naming no node. Before, every one of these texts was exit 3 (no tool recognised).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.actions import Action
from gpu_preflight.checks.evidence_nccl import NCCL_LOG_ACTIONS
from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Finding, Status
from gpu_preflight.parsers.detect import detect_kind

from .nccl_log_judging import kinds, triage

FORMS = Path(__file__).parent / "fixtures" / "repertoire" / "slurm-job"

# (fixture, the signature kinds read in order, the findings (status, code), the hosts the first finding names)
CASES: tuple[tuple[str, list[str], list[tuple[Status, str]], list[str]], ...] = (
    ("srun-node-failure.txt", ["node_failure", "node_failure"], [(Status.FAIL, "node_failure")], ["gpu-node-08"]),
    ("stepd-node-failure-banner.txt", ["node_failure"], [(Status.FAIL, "node_failure")], []),
    ("stepd-time-limit.txt", ["job_time_limit", "job_time_limit"], [(Status.WARN, "job_time_limit")], []),
    ("stepd-cancelled-20.11.txt", ["job_cancelled", "job_cancelled"], [(Status.WARN, "job_cancelled")], []),
    ("stepd-cancelled-signal-25.05.txt", ["job_cancelled"], [(Status.WARN, "job_cancelled")], []),
    ("stepd-preempted.txt", ["job_cancelled"], [(Status.WARN, "job_cancelled")], []),
    ("stepd-task-failure-25.05.txt", ["step_aborted", "step_aborted"], [(Status.FAIL, "step_aborted")], []),
    ("srun-task-exit-code.txt", ["task_exited"], [(Status.FAIL, "task_exited")], ["gpu-node-03"]),
    ("srun-task-killed.txt", ["task_exited"], [(Status.FAIL, "task_exited")], ["gpu-node-[03-04]"]),
    ("srun-task-segfault.txt", ["task_exited"], [(Status.FAIL, "task_exited")], ["gpu-node-03"]),
    ("stepd-oom-20.11.txt", ["oom_killed", "oom_killed"], [(Status.FAIL, "oom_killed")], ["gpu-node-02"]),
    ("stepd-oom-23.02.txt", ["oom_killed"], [(Status.FAIL, "oom_killed")], []),
    ("srun-unable-to-create-step.txt", ["step_create_failed"], [(Status.FAIL, "step_create_failed")], []),
    ("srun-task-launch-prolog-failed.txt", ["task_launch_failed"], [(Status.FAIL, "task_launch_failed")],
     ["gpu-node-05"]),
    ("stepd-execve.txt", ["exec_failed", "task_exited"],
     [(Status.FAIL, "exec_failed"), (Status.FAIL, "task_exited")], []),
    ("slurm-and-nccl.txt", ["ib_completion_error", "task_exited"],
     [(Status.FAIL, "ib_completion_error"), (Status.FAIL, "task_exited")], ["gpu-node-03"]),
)


def _findings(text: str) -> list[Finding]:
    return [f for f in judge_text(text, Config(), source="job.log") if f.check_id == "nccl_log.triage"]


@pytest.mark.parametrize(("name", "expected", "verdicts", "hosts"), CASES)
def test_a_slurm_form_is_the_failure_it_names(name: str, expected: list[str], verdicts: list[tuple[Status, str]],
                                              hosts: list[str]) -> None:
    text = (FORMS / name).read_text()
    assert detect_kind(text) == "nccl-log"
    assert [k for k in kinds(text)] == expected
    assert triage(text) == verdicts
    assert _findings(text)[0].details["hosts"] == hosts


def test_a_node_failure_names_the_failed_node_not_the_one_that_printed_the_cancel() -> None:
    """srun's 'Node failure on gpu-node-08' is the node to isolate; the stepd's banner 'ON gpu-node-01' is where the
    step was cancelled (a survivor), so it is named nowhere as the failed node."""
    finding = _findings((FORMS / "srun-node-failure.txt").read_text())[0]
    assert finding.subject == "job.log/gpu-node-08"
    assert "gpu-node-01" not in finding.details["hosts"]
    assert NCCL_LOG_ACTIONS["node_failure"] is Action.ISOLATE_NODE
    assert NCCL_LOG_ACTIONS["task_launch_failed"] is Action.ISOLATE_NODE


def test_a_task_exit_names_node_and_task_without_claiming_a_node_fault() -> None:
    finding = _findings((FORMS / "srun-task-exit-code.txt").read_text())[0]
    assert finding.subject == "job.log/gpu-node-03"
    assert "task 5: Exited with exit code 1" in finding.summary
    assert NCCL_LOG_ACTIONS["task_exited"] is Action.RESTART_JOB
    assert NCCL_LOG_ACTIONS["oom_killed"] is Action.RESTART_JOB


def test_a_time_limit_or_cancel_is_no_success_and_blames_no_node() -> None:
    for name in ("stepd-time-limit.txt", "stepd-cancelled-20.11.txt", "stepd-cancelled-signal-25.05.txt"):
        findings = _findings((FORMS / name).read_text())
        assert [f.status for f in findings] == [Status.WARN]
        assert findings[0].details["hosts"] == []
        assert "job_time_limit" not in NCCL_LOG_ACTIONS and "job_cancelled" not in NCCL_LOG_ACTIONS


def test_the_step_abort_is_a_finding_only_alone() -> None:
    """srun's 'Job step aborted' follows every other failure; alone it still says the step did not finish."""
    alone = "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n"
    assert detect_kind(alone) == "nccl-log"
    assert triage(alone) == [(Status.FAIL, "step_aborted")]


def test_srun_lines_that_are_no_failure_are_not_read_as_one() -> None:
    """srun's verbose() 'Completed' (no 'error:') and an author's note quoting a node failure are no signature."""
    assert kinds("gpu-node-03:81234:81401 [2] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
                 "srun: gpu-node-03: task 0: Completed\n"
                 "# srun: error: Node failure on gpu-node-08\n") == []


def test_every_fixture_is_covered() -> None:
    """A fixture added to the folder without a row here would test nothing."""
    assert {p.name for p in FORMS.glob("*.txt")} == {c[0] for c in CASES}


def test_a_cancel_after_a_task_failure_is_the_task_s_failure() -> None:
    """Before 25.05 a step ended by a failed task (SIG_TERM_KILL, --kill-on-bad-exit) printed the plain cancel banner
    (req.c:773 @ 20.11): with srun's task line beside it the job FAILs on that task and node, the cancel WARNs."""
    text = ("srun: error: gpu-node-03: task 5: Exited with exit code 1\n"
            + (FORMS / "stepd-cancelled-20.11.txt").read_text())
    assert triage(text) == [(Status.FAIL, "task_exited"), (Status.WARN, "job_cancelled")]
