"""Slurm's own lines in a failed job's stderr: which node, task or limit ended the job (docs/repertoire/slurm-job.md).

A training job's Slurm output holds the framework's errors (NCCL, torch.distributed: the job-log reader's
signatures) and, around them, what srun and slurmstepd said about the job: a node that failed, a task that exited,
a time limit, a cancel, an OOM kill. These are read by the same reader as more signatures
(:data:`SLURM_SIGNATURES`, tried before NCCL's), so a log that holds both yields both findings.

Each pattern renders a format string of SchedMD/slurm 20.11-25.05 (log.c prefixes ``srun: error: `` or
``slurmstepd: error: ``). Where the text names the node at fault it is the ``node`` group, the finding's host.
slurmstepd's ``*** JOB <id> ON <node> CANCELLED AT <time> DUE TO NODE FAILURE ... ***`` names the node the
cancel was printed on, a survivor, not the one that failed (slurmctld's log names that): it names no host.
"""

from __future__ import annotations

import re

# A Slurm node or hostlist as srun prints it ("gpu-07", "gpu-[07-08,11]"): no colon, no space.
_NODE = r"(?P<node>[^\s:]{1,300})"
# slurmstepd's cancel banner (slurmd/slurmstepd/req.c _handle_signal_container): "*** JOB 123 ON gpu-07 CANCELLED AT
# 2024-05-01T10:00:00 ..." for the batch step, "*** STEP 123.0 ON ..." for a step; the time has no space unless a
# site's SLURM_TIME_FORMAT puts one there.
_CANCELLED = r"\*\*\* (?:JOB|STEP) [\w.+]{1,40} ON \S{1,300} CANCELLED AT [^*\n]{1,64}?"

CONSEQUENCE = "step_aborted"  # srun stopping the step after another failure: a finding only when nothing else is

# (kind, pattern), most specific first; nccl_log.SIGNATURES starts with these.
SLURM_SIGNATURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # srun/salloc told by slurmctld that a node of the allocation failed (api/step_launch.c _node_fail_handler,
    # srun/allocate.c): the node named is the one that failed; the stepd's cancel banner for the same names none.
    ("node_failure", re.compile(r"\b(?:srun|salloc): error: Node failure on " + _NODE
                                + "|" + _CANCELLED + r" DUE TO NODE FAILURE\b")),
    ("job_time_limit", re.compile(_CANCELLED + r" DUE TO TIME LIMIT\b")),
    # 25.05's cancel after a task failed (--kill-on-bad-exit) and the stepd's "FAILED (non-zero exit code ...)": the
    # task's own exit line names the failure; srun's "Job step aborted: Waiting up to 32 seconds for job step to
    # finish." (api/step_launch.c) follows any of them.
    ("step_aborted", re.compile(_CANCELLED + r" DUE TO TASK FAILURE\b"
                                r"|\*\*\* (?:JOB|STEP) [\w.+]{1,40} ON \S{1,300} FAILED \(non-zero exit code"
                                r"|\bsrun: Job step aborted\b")),
    # scancel, a signal (25.05: "DUE to SIGNAL Terminated"), preemption or requeue: the job did not finish.
    ("job_cancelled", re.compile(_CANCELLED + r"(?: DUE (?:TO|to) (?:PREEMPTION|JOB REQUEUE|SIGNAL [^*\n]{1,40}?))?"
                                 r" \*\*\*")),
    # task/cgroup's OOM report (20.11-22.05 "Detected 1 oom-kill event(s) in StepId=123.0 cgroup.", 23.02+ "Detected
    # 1 oom_kill event in StepId=123.0.") and srun's for a task the step reported as SIG_OOM (srun/launch.c).
    ("oom_killed", re.compile(r"\bDetected \d+ oom[-_]kill event(?:\(s\)|s)? in "
                              r"|\bsrun: error: " + _NODE + r": tasks? [\d,\-\[\]]{1,300}: Out Of Memory\b")),
    # srun's report of a task's end (srun/launch.c _task_finish; launch/slurm/launch_slurm.c before 23.02): the
    # node and the task, with the exit code or strsignal's name ("Killed", "Segmentation fault (core dumped)").
    ("task_exited", re.compile(r"\bsrun: error: " + _NODE + r": tasks? (?P<task>[\d,\-\[\]]{1,300}): "
                               r"(?:Exited with exit code \d+|[A-Z][\w ]{1,40}?(?: \(core dumped\))?)\s*$")),
    # The step's launch on a node failed (api/step_launch.c _launch_handler): "Task launch for StepId=123.0 failed
    # on node gpu-07: Job prolog failed" (slurm_strerror's words: a prolog, the node's slurmd, its credential).
    ("task_launch_failed", re.compile(r"\bTask launch for \S{1,80} failed on node " + _NODE + r": \S")),
    ("step_create_failed", re.compile(r"\bsrun: error: Unable to create step for job \d+: \S")),
    # slurmstepd could not start the task's program (slurmstepd/task.c exec_task): the job's command or interpreter.
    ("exec_failed", re.compile(r"\bslurmstepd(?:-\S+)?: error: execve\(\): ")),
)

# What detection looks for: srun's and slurmstepd's own error lines (and the stepd's banner, which a paste may keep
# without its prefix).
SLURM_SNIFF = re.compile(r"^(?:srun|salloc|slurmstepd(?:-\S+)?): error: (?:Node failure on |\S+: tasks? [\d,\-\[\]]+: "
                         r"|\*\*\* (?:JOB|STEP) |Detected \d+ oom[-_]kill event|Unable to create step for job "
                         r"|Task launch for |execve\(\): )"
                         r"|^" + _CANCELLED + r"(?: DUE (?:TO|to) [^*\n]{1,60}?)? \*\*\*"
                         r"|^srun: Job step aborted: Waiting up to \d+ seconds", re.M)
SLURM_SNIFF_SCORE = 60
