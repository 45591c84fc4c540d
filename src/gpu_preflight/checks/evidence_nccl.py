"""Judging collectives: nccl-tests results and the logs of failed NCCL / torch.distributed jobs.

``nccl_tests.correctness``: FAIL when any ``#wrong`` count is above 0, when out-of-bounds
values were found, when the legacy ``error`` column exceeds ``evidence.nccl_max_error``,
or when the test aborted (``Test NCCL failure ...``, classified like a job log): one finding
per failure signature and host, with the exact count of its lines and its first few, however
many lines an aborted job repeated. A run that stopped (a failure line, or no ``Out of bounds``
summary) is also judged on its ``NCCL WARN`` lines that name a failure: the test's line says what
NCCL returned ('unhandled cuda error'), the WARN above it why (an IB completion error: the link,
``check_mechanicals``), so each such signature is a FAIL of its own with its job-log action.
``nccl_tests.bandwidth``: FAIL when the best out-of-place bus bandwidth at
``perf.busbw_floor_min_bytes`` or more is below its floor: a site's ``evidence.nccl_busbw_min_gbps``
(any collective), else, for every collective (busbw is scaled per collective to read as the
hardware's bandwidth), on one host the node-local floor of the GPUs' profile (matched from the
GPU names the log lists, or ``--profile``: NVSwitch for GPUs sold only on NVSwitch boards, PCIe
otherwise), across hosts what the profile's NICs allow that collective (``floors.network_floor``).
A log without device lines is read under a stated assumption (``perf.node_gpus``). WARN, with the
measured peak and the reason, when no floor applies: a run whose main measure was not judged is
never SUCCESS. SKIP for one rank or a sweep of latency-bound sizes only.

``nccl_log.triage``: one finding per failure signature found in a job log (see
:data:`ADVICE`), naming the ranks and hosts the lines came from, with what to do next.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import msgspec

from ..actions import Action
from ..config.evidence import evidence_config
from ..model import Finding, Status
from ..registry import declare
from .evidence import judges
from .floors import Floor, log_allreduce_floor, network_floor

if TYPE_CHECKING:
    from ..config import Config
    from ..records.nccl import NcclFailureGroup, NcclLogRecord, NcclSignature, NcclTestsRecord


NCCL_LOG_ACTIONS = {
    **dict.fromkeys(("watchdog_timeout", "remote_error", "connection_refused", "invalid_usage", "duplicate_gpu",
                     "system_error", "cuda_error", "out_of_memory", "internal_error", "rendezvous_timeout",
                     "collective_failed", "cuda_kernel_fault",
                     "segfault", "rank_exited", "ras_error"), Action.RESTART_JOB),
    "cuda_ecc_uncorrectable": Action.RESET_GPU,
    "cuda_nvlink_uncorrectable": Action.RESET_GPU,
    "cuda_no_device": Action.REBOOT_NODE,
    "cuda_driver_mismatch": Action.REBOOT_NODE,
    "ib_completion_error": Action.CHECK_MECHANICALS,
    "ib_qp_error": Action.CHECK_MECHANICALS,
    "ib_async_event": Action.CHECK_MECHANICALS,
    "net_plugin_error": Action.CHECK_MECHANICALS,
    "store_listen_failed": Action.RESTART_JOB,
    # Slurm's lines (parsers/slurm_job.py, docs/repertoire/slurm-job.md): a node Slurm lost, or one that could not
    # start the step, is kept out until repaired; an OOM kill, a task's exit and a failed step are the job's.
    "node_failure": Action.ISOLATE_NODE,
    "task_launch_failed": Action.ISOLATE_NODE,
    **dict.fromkeys(("oom_killed", "task_exited", "step_aborted", "step_create_failed", "exec_failed"),
                    Action.RESTART_JOB),
}
"""A job log shows that the job died, not which node is bad: restart it (GPU faults behind a CUDA
error are judged by the Xids of the node's kernel log, which name their own action). IB completion
and queue-pair errors, and errors the fabric's own plugin reports, are the link between hosts: cable,
transceiver, switch port (or the security group on EFA). A missing or
bypassed network plugin is a software install, no routing action. A CUDA error whose own words name a
hardware fault takes that fault's Xid action: uncorrectable ECC (Xid 48/95: WORKFLOW_XID_48, RESET_GPU) and
uncorrectable NVLink (Xid 74: WORKFLOW_NVLINK_ERR) reset the GPU; no device, no driver or a driver that cannot
run the job's CUDA are nvidia-smi's no_devices/nvml_init_failed (reboot_node, once the driver is fixed); a
kernel's own fault (illegal address, device-side assert, launch failure: Xid 13/31/43, RESTART_APP) restarts
the job."""
NCCL_LOG_TRIAGE = declare(
    "nccl_log.triage", "No known failure signature in the job log",
    """A job's NCCL / torch.distributed log is searched for known failure signatures (timeouts,
    unhandled system errors, remote-peer closes, IB/EFA errors...): one finding per signature,
    with the ranks and hosts its lines came from and what to do next. When none is found, PASS if the
    log shows its communicators initialised (every "Init START" followed by "Init COMPLETE"), else SKIP:
    a log that shows no failure but no finished init either is no evidence the job ran.""",
    group=(), component="network_infrastructure", actions=NCCL_LOG_ACTIONS)


class Advice(msgspec.Struct, frozen=True):
    """What an NCCL failure signature means for the verdict: its status, a title and what to do."""

    status: Status
    title: str
    recommendation: str


ADVICE: dict[str, Advice] = {
    "watchdog_timeout": Advice(Status.FAIL, "collective timed out (a rank stopped making progress)",
                               "Find the rank that never entered the collective: a hung or slow node, an Xid on "
                               "its GPU, or ranks issuing collectives in different orders (TORCH_NCCL_DUMP_ON_TIMEOUT"
                               ", py-spy dump)."),
    "remote_error": Advice(Status.FAIL, "a peer rank died or the network dropped",
                           "This rank is a victim: find the rank that exited first (torchrun 'Root Cause', OOM "
                           "kills, Xid errors on its GPU, node preemption) and start there."),
    "ib_completion_error": Advice(Status.FAIL, "InfiniBand completion error between hosts",
                                  "Check the link between this host and the peer (ibstat, port error counters, "
                                  "cables, switch port); error 12 is a transport retry timeout. Run ib_write_bw "
                                  "between the pair and drain the node whose port misbehaves."),
    "connection_refused": Advice(Status.FAIL, "a connection to a peer failed (refused, timed out or unreachable)",
                                 "Check that the peer host is up and every rank started, that NCCL_SOCKET_IFNAME "
                                 "names a reachable interface, and that no firewall blocks the ports."),
    "net_plugin_missing": Advice(Status.FAIL, "the NCCL network plugin is missing",
                                 "Install the fabric's NCCL net plugin (aws-ofi-nccl for EFA/Slingshot) and put "
                                 "libnccl-net*.so on LD_LIBRARY_PATH; check NCCL_NET / NCCL_NET_PLUGIN."),
    "net_plugin_fallback": Advice(Status.WARN, "NCCL fell back to its internal network transport",
                                  "No external net plugin was loaded: on EFA or Slingshot NCCL then uses sockets, "
                                  "far slower. Install the plugin or set NCCL_NET_PLUGIN."),
    # The transport NCCL_DEBUG=INFO lines state (parsers/nccl_log.py _judge_transport): a job that runs, slower than
    # the node was built for; a software or configuration cause as often as a device, so no operator action.
    "net_socket_transport": Advice(Status.WARN, "NCCL carries traffic between ranks over TCP sockets, not IB/RoCE "
                                                "or EFA",
                                   "The job runs several times slower than on the fabric. If NET/IB found no device: "
                                   "check the HCAs on the node (ibstat, ibv_devinfo), that the RDMA stack is up and "
                                   "the devices reach the container (/dev/infiniband); on EFA install aws-ofi-nccl "
                                   "and put libnccl-net*.so on LD_LIBRARY_PATH; unset NCCL_IB_DISABLE and "
                                   "NCCL_NET=Socket."),
    "p2p_unavailable": Advice(Status.WARN, "GPUs of one node exchange through host shared memory: P2P is off",
                              "NCCL says P2P between these GPUs is unavailable (NCCL_P2P_DISABLE, the PCIe topology, "
                              "or peer access refused: ACS or IOMMU on the PCIe switches, a VM without P2P): unset "
                              "NCCL_P2P_DISABLE, check nvidia-smi topo -m and that ACS is off on bare metal."),
    "net_plugin_error": Advice(Status.FAIL, "the network below NCCL failed (aws-ofi-nccl / libfabric error)",
                               "The fabric reported the error, not NCCL: check the EFA/NIC devices on both hosts "
                               "(fi_info -p efa, the instance's EFA count), the security group allowing all traffic "
                               "between the nodes, and the aws-ofi-nccl and libfabric versions against the driver."),
    "invalid_usage": Advice(Status.FAIL, "NCCL reported invalid usage (a configuration error)",
                            "Not a hardware fault: check the rank-to-GPU mapping (LOCAL_RANK, "
                            "CUDA_VISIBLE_DEVICES), the world size and the launcher flags; NCCL_DEBUG=WARN says why. "
                            "A truncated message means the ranks disagree on a collective's size or on NCCL's "
                            "settings (NCCL_PROTO, NCCL_ALGO, the NCCL version) between ranks."),
    "duplicate_gpu": Advice(Status.FAIL, "two ranks share one GPU",
                            "Set each rank's device from LOCAL_RANK (torch.cuda.set_device) and make "
                            "--nproc-per-node match the GPUs visible to the job."),
    "ib_qp_error": Advice(Status.FAIL, "an InfiniBand/RoCE queue pair could not be connected to its peer",
                          "The NICs cannot reach each other (error 110 INIT -> RTR: no route between these "
                          "ports, e.g. rails not cross-connected, a wrong GID index or a down port): check "
                          "ibstat/ibv_devinfo on both hosts, NCCL_IB_GID_INDEX, and NCCL_CROSS_NIC=0 on "
                          "rail-optimised fabrics; run ib_write_bw between the pair."),
    "ib_async_event": Advice(Status.FAIL, "the InfiniBand adapter reported an error event",
                             "The HCA or its link failed under NCCL ('port error' is a link going down, often a "
                             "flapping cable or transceiver; 'local catastrophic error' is the adapter itself): check "
                             "ibstat and the port error counters on the host that logged it, reseat or replace the "
                             "cable, and drain the node until ib_write_bw runs clean."),
    "system_error": Advice(Status.FAIL, "a system call failed inside NCCL",
                           "Check /dev/shm size, the locked-memory limit (ulimit -l), open-file limits and the "
                           "network interface NCCL chose (NCCL_SOCKET_IFNAME)."),
    "cuda_error": Advice(Status.FAIL, "a CUDA call failed (inside NCCL or in the job's own code)",
                         "Check the GPU (Xid errors in dmesg, nvidia-smi) and that the CUDA runtime matches the "
                         "driver."),
    "cuda_ecc_uncorrectable": Advice(Status.FAIL, "a GPU reported an uncorrectable ECC error (CUDA's own words)",
                                     "A fault of the GPU's memory (Xid 48/94/95 in the node's kernel log name the "
                                     "GPU): drain the GPU and reset it (nvidia-smi -r), then check nvidia-smi -q -d "
                                     "ECC,ROW_REMAPPER; replace the GPU if the errors return or a row cannot be "
                                     "remapped."),
    "cuda_nvlink_uncorrectable": Advice(Status.FAIL, "an uncorrectable NVLink error stopped the job (CUDA's words)",
                                        "An NVLink between GPUs failed (Xid 74 in the kernel log names the GPU and "
                                        "link): drain the node and reset its GPUs; check nvidia-smi nvlink -e and the "
                                        "fabric manager log, and reseat or replace the part if it recurs."),
    "cuda_no_device": Advice(Status.FAIL, "CUDA found no usable GPU (no device, or no driver)",
                             "Check that the NVIDIA driver is loaded and bound to the GPUs (nvidia-smi, lspci -k, the "
                             "kernel log) and that the job sees them (the container's --gpus or device plugin, "
                             "CUDA_VISIBLE_DEVICES); reboot once the driver is fixed."),
    "cuda_driver_mismatch": Advice(Status.FAIL, "the NVIDIA driver cannot run the job's CUDA (too old or mismatched)",
                                   "Match the driver to the job's CUDA: upgrade the driver or use a build for the "
                                   "CUDA it supports; forward compatibility (cuda-compat's libcuda) works only on "
                                   "data-centre GPUs; after a driver upgrade, reboot so the kernel module and the "
                                   "libraries agree."),
    "cuda_kernel_fault": Advice(Status.FAIL, "a CUDA kernel of the job faulted (illegal address, assert, launch "
                                "failure)",
                                "An application fault, not a node fault (Xid 13/31/43's kind): rerun with "
                                "CUDA_LAUNCH_BLOCKING=1 to find the kernel; suspect the GPU only when the same fault "
                                "repeats on it across jobs (its Xids in the kernel log)."),
    "out_of_memory": Advice(Status.FAIL, "a GPU ran out of memory",
                            "Lower the batch size or enable activation checkpointing; make sure no leftover "
                            "process holds GPU memory."),
    "internal_error": Advice(Status.FAIL, "NCCL internal error",
                             "Rerun with NCCL_DEBUG=INFO; check NCCL, plugin and driver versions for known bugs."),
    "collective_failed": Advice(Status.FAIL, "torch's watchdog found a collective that failed or timed out",
                                "The job stopped on a failed collective; the cause is the first error before this "
                                "line or on another rank (an NCCL WARN, a CUDA error, a rank that exited first)."),
    "rendezvous_timeout": Advice(Status.FAIL, "ranks did not all reach the rendezvous",
                                 "Check that every node started, that MASTER_ADDR:MASTER_PORT is reachable from "
                                 "all nodes, and the job's node count."),
    "store_listen_failed": Advice(Status.FAIL, "the rendezvous store could not listen on its port",
                                  "torch's TCPStore on MASTER_ADDR could not bind MASTER_PORT: errno 98 (EADDRINUSE) "
                                  "means another process on that host holds the port (a previous job's torchrun or "
                                  "workers still running, a second job on the node; ss -ltnp shows it): end it or "
                                  "choose a free port, then restart the job. errno 99 means MASTER_ADDR is not an "
                                  "address of this host."),
    "segfault": Advice(Status.FAIL, "a process crashed (segmentation fault)",
                       "Find the first crash: check for mismatched NCCL/CUDA libraries and Xid errors at that time."),
    "nccl_warn": Advice(Status.WARN, "NCCL printed a warning no known signature names",
                        "Read the WARN line: NCCL warns before most of its failures and when it corrects a setting "
                        "(a thread or socket count capped); if the job failed, the first WARN is where to start."),
    "ras_error": Advice(Status.FAIL, "NCCL's RAS reports a communicator error",
                        "RAS lists processes it considers dead or has no data from, and communicators that are "
                        "incomplete, aborted or in error: start with the processes and nodes it names (their logs, "
                        "Xids, OOM kills), then restart the job."),
    "ras_warning": Advice(Status.WARN, "NCCL's RAS reports a communicator whose ranks disagree",
                          "Ranks at different collective counts or states: if it persists across RAS queries the job "
                          "is hung behind the ranks that lag (ncclras -v names them; py-spy dump them)."),
    # Slurm's own lines (docs/repertoire/slurm-job.md): the node a line names is the finding's host.
    "node_failure": Advice(Status.FAIL, "Slurm lost a node of the job (NODE FAILURE)",
                           "srun's 'Node failure on <node>' names the node that stopped answering slurmctld; the "
                           "stepd's 'CANCELLED ... DUE TO NODE FAILURE' names only where the job was cancelled, and "
                           "slurmctld's log or 'sinfo -R' names the failed node. Drain it and keep it out until its "
                           "kernel log (Xids, panics), BMC and health checks are clean, then resubmit the job."),
    "task_launch_failed": Advice(Status.FAIL, "Slurm could not start the job's tasks on a node",
                                 "The node named refused the step: the words after it say why ('Job prolog failed': "
                                 "its prolog or health check failed, and Slurm drains it as 'Prolog error'; a slurmd "
                                 "or credential error). Drain the node, read its slurmd log and prolog output, and "
                                 "resubmit the job on other nodes."),
    "oom_killed": Advice(Status.FAIL, "the kernel's OOM killer killed the job's tasks (host memory)",
                         "The step used more host memory than its cgroup allows (--mem, --mem-per-cpu, "
                         "--mem-per-gpu): request more or use less (dataloader workers, pinned buffers, a checkpoint "
                         "loaded on every rank). A job's memory, not a node fault."),
    "task_exited": Advice(Status.FAIL, "a task of the job ended with an error",
                          "srun names the node and task: start with that task's own output, whose first error is "
                          "the cause. An exit code or signal is the job's failure, not a node's fault unless that "
                          "output shows one (an Xid, a CUDA or NCCL error); 'Killed' is a SIGKILL (the OOM killer, "
                          "the scheduler or an operator)."),
    "step_aborted": Advice(Status.FAIL, "the job step was aborted",
                           "srun stopped the step after a task failed or the job was cancelled; this text does not "
                           "say which: the first error in the tasks' output, or in the other nodes' logs, is the "
                           "cause."),
    "step_create_failed": Advice(Status.FAIL, "srun could not create the job step",
                                 "Not a node fault: the words after the colon say why (the job already ending, more "
                                 "tasks, GPUs or memory than the allocation holds, nodes busy with another step). "
                                 "Fix the srun request or resubmit."),
    "exec_failed": Advice(Status.FAIL, "a task's program could not be started (execve failed)",
                          "The command or its interpreter is missing or not executable on that node ('No such file "
                          "or directory', 'Permission denied'): check the job's PATH, container image and the "
                          "shared file systems it runs from."),
    "job_time_limit": Advice(Status.WARN, "Slurm stopped the job at its time limit: it did not finish",
                             "Not a node fault: ask for more time (--time) or checkpoint and resume. If the job "
                             "stopped making progress long before its limit, its last lines (a collective timeout, "
                             "a rank that stopped) say where."),
    "job_cancelled": Advice(Status.WARN, "the job was cancelled before it finished (scancel, a signal, preemption "
                                         "or requeue)",
                            "Not a node fault by itself: sacct -j <job> shows who or what ended it. Judge the run "
                            "by the errors before the cancel, if any: before 25.05 the same banner also follows a "
                            "task that failed under --kill-on-bad-exit, whose srun line ('task N: Exited ...') names "
                            "it."),
    "rank_exited": Advice(Status.FAIL, "the rank that exited first (root cause)",
                          "Start triage with this rank's own log: its first error is the cause, the other ranks' "
                          "errors are consequences."),
}
_UNKNOWN = Advice(Status.FAIL, "NCCL failure", "Rerun with NCCL_DEBUG=INFO and read the first WARN line.")


@judges("nccl-tests")
def judge_nccl_tests(record: NcclTestsRecord, config: Config, source: str) -> Iterator[Finding]:
    """Correctness and bandwidth of an nccl-tests run."""
    yield from _correctness(record, config, source)
    yield from _bandwidth(record, config, source)


def _correctness(record: NcclTestsRecord, config: Config, source: str) -> Iterator[Finding]:
    check = "nccl_tests.correctness"
    for group in record.failures_by_group():
        yield _aborted(check, group, source)
    causes = _causes(record)
    for group in causes:
        yield _warned(check, group, source)
    bad_sizes = record.wrong_sizes
    limit = evidence_config(config).nccl_max_error
    flagged = record.failure_count() > 0 or bool(causes)
    if record.wrong_total:
        flagged = True
        yield Finding(check, Status.FAIL, source, "wrong_results",
                      f"{record.wrong_total} wrong value(s) at {len(bad_sizes)} size(s), first at {bad_sizes[0]} B",
                      observed=record.wrong_total, expected=0, unit="values", details={"sizes": bad_sizes},
                      recommendation="Data corruption in a collective: run the test per node pair to isolate the "
                                     "GPU or link, check Xid errors and NVLink/IB error counters, drain the node.")
    if record.out_of_bounds:
        flagged = True
        yield Finding(check, Status.FAIL, source, "out_of_bounds",
                      f"{record.out_of_bounds} out-of-bounds value(s)", observed=record.out_of_bounds, expected=0,
                      recommendation="Writes outside the result buffer: treat as data corruption (see #wrong).")
    if record.max_error is not None and record.max_error > limit:
        flagged = True
        yield Finding(check, Status.FAIL, source, "error_too_large",
                      f"largest result deviation {record.max_error:g} exceeds {limit:g}",
                      observed=record.max_error, expected=f"<= {limit:g}",
                      recommendation="Results deviate beyond rounding: check GPUs and links as for #wrong.")
    if flagged or not record.rows:
        return
    if record.wrong_total is None and record.max_error is None:
        yield Finding(check, Status.SKIP, source, "not_validated",
                      "the run printed no #wrong or error values (validation off?)")
        return
    yield Finding(check, Status.PASS, source, "ok",
                  f"{record.test or 'collective'}: no wrong values over {record.rows_total} size(s)",
                  observed=record.wrong_total if record.wrong_total is not None else record.max_error,
                  expected=0 if record.wrong_total is not None else f"<= {limit:g}")


def _aborted(check: str, group: NcclFailureGroup, source: str) -> Finding:
    """One (signature, host) group of ``Test ... failure`` lines as one FAIL: an aborted job prints the same
    failure for every rank and iteration, so a finding per line would bury the cause under its repeats.
    The count is exact; the details list the group's first lines."""
    kind = group.signature or "nccl_failure"
    subject = f"{source}/{group.host}" if group.host else source
    first = group.examples[0] if group.examples else None
    where = f"{first.kind} failure at {first.file}:{first.line}" if first else "failure"
    message = first.message if first else kind
    others = " on further hosts (too many hosts to count apart)" if group.other_hosts else ""
    summary = (f"test aborted {group.count} times{others}: {message} (the first: {where})"
               if group.count > 1 or others else f"test aborted ({where}): {message}")
    return Finding(check, Status.FAIL, subject, kind, summary,
                   observed=group.count, unit="lines", recommendation=ADVICE.get(kind, _UNKNOWN).recommendation,
                   details={"file": first and first.file, "line": first and first.line, "count": group.count,
                            "examples": [f"{e.host + ': ' if e.host else ''}Test {e.kind} failure {e.file}:{e.line} "
                                         f"'{e.message}'" for e in group.examples]})


def _causes(record: NcclTestsRecord) -> list[NcclFailureGroup]:
    """The ``NCCL WARN`` groups that say why a run stopped: none for a run that reached its summary without a
    failure line (a warning NCCL recovered from is the job log's business, not this run's verdict); of the rest,
    those whose signature FAILs a job log (:data:`ADVICE`)."""
    if record.failure_count() == 0 and record.out_of_bounds is not None:
        return []
    return [group for group in record.warn_causes
            if (advice := ADVICE.get(group.signature or "")) is not None and advice.status is Status.FAIL]


def _warned(check: str, group: NcclFailureGroup, source: str) -> Finding:
    """One (signature, host) group of ``NCCL WARN`` lines of a run that stopped, as one FAIL: the cause the
    test's own failure line does not name, with the job log's advice (and so its action)."""
    kind = group.signature or "nccl_failure"
    subject = f"{source}/{group.host}" if group.host else source
    first = group.examples[0] if group.examples else None
    where = f" ({first.file}:{first.line})" if first and first.file else ""
    times = f" {group.count} times" if group.count > 1 else ""
    others = " on further hosts (too many hosts to count apart)" if group.other_hosts else ""
    return Finding(check, Status.FAIL, subject, kind,
                   f"NCCL warned{times}{others} before the run stopped: {first.message if first else kind}{where}",
                   observed=group.count, unit="lines", recommendation=ADVICE[kind].recommendation,
                   details={"file": first and first.file, "line": first and first.line, "count": group.count,
                            "examples": [f"{e.host + ': ' if e.host else ''}{f'{e.file}:{e.line} ' if e.file else ''}"
                                         f"NCCL WARN {e.message}" for e in group.examples]})


def _bandwidth(record: NcclTestsRecord, config: Config, source: str) -> Iterator[Finding]:
    check = "nccl_tests.bandwidth"
    peak = record.peak_busbw_gbps
    if peak is None:
        yield Finding(check, Status.SKIP, source, "no_results", "no bandwidth measured (no result rows)")
        return
    ranks = f", {record.nranks} ranks{' (inferred)' if record.nranks_inferred else ''}" if record.nranks else ""
    what = (f"{record.test or 'collective'} peak busbw {peak:g} GB/s at {record.peak_size_bytes} B{ranks}, "
            f"avg {record.avg_busbw_gbps:g} GB/s ({record.avg_busbw_source})" if record.avg_busbw_gbps is not None
            else f"{record.test or 'collective'} peak busbw {peak:g} GB/s at {record.peak_size_bytes} B{ranks}")
    details: dict[str, Any] = {"avg_busbw_gbps": record.avg_busbw_gbps, "nranks": record.nranks, "hosts": record.hosts,
               "peak_busbw_in_place_gbps": record.peak_busbw_in_place_gbps,
               "gpu_names": sorted({g.name for g in record.gpus})}
    if record.avg_busbw_failed:  # nccl-tests held the run to its own floor and said so: its verdict stands
        yield Finding(check, Status.FAIL, source, "busbw_check_failed",
                      f"{what}; the run's own bandwidth check failed ('Avg bus bandwidth : ... FAILED', the "
                      "floor NCCL_TESTS_MIN_BW set)", observed=record.avg_busbw_gbps, unit="GB/s", details=details,
                      recommendation="Run the test per node and per node pair to find the slow link; check NCCL "
                      "topology (NCCL_DEBUG=INFO), NVLink/PCIe and NIC state.")
        return
    floor, judged, why = _floor(record, config)
    if floor is None or judged is None:
        # one rank, or a latency sweep below the floors' sizes: nothing to hold to a floor; else not judged
        status = Status.SKIP if floor is not None or why.startswith("one rank") else Status.WARN
        yield Finding(check, status, source, "no_floor", f"{what}; not judged: {why}", observed=peak,
                      unit="GB/s", details=details,
                      recommendation=None if status is Status.SKIP else
                      "The run's bandwidth was not judged, so it cannot pass: name the GPU model (--profile) or set "
                      "evidence.nccl_busbw_min_gbps.")
        return
    value, size = judged
    details["floor_basis"] = floor.basis
    if value < floor.gbps:
        yield Finding(check, Status.FAIL, source, "busbw_low",
                      f"{what}; {value:g} GB/s at {size} B is below the {floor.gbps:g} GB/s floor ({floor.basis})",
                      observed=value, expected=f">= {floor.gbps:g}", unit="GB/s", details=details,
                      recommendation="Run the test per node and per node pair to find the slow link; check NCCL "
                                     "picked the fast transport (NCCL_DEBUG=INFO: NVLS/P2P within a node, NET/IB "
                                     "or OFI across nodes, not Socket) and NVLink health (nvidia-smi nvlink -s).")
    else:
        yield Finding(check, Status.PASS, source, "ok", f"{what}; floor {floor.gbps:g} ({floor.basis})",
                      observed=value, expected=f">= {floor.gbps:g}", unit="GB/s", details=details)


def _floor(record: NcclTestsRecord, config: Config) -> tuple[Floor | None, tuple[float, int] | None, str]:
    """The floor this run is held to, the (busbw, size) judged against it, or why it is not judged.

    A site's ``evidence.nccl_busbw_min_gbps`` judges any run's peak. Otherwise every collective
    is judged by its busbw (which nccl-tests scales per collective so that it reads as the
    hardware's bandwidth): on one node against the node-local floor of the GPUs' profile
    (NVSwitch or PCIe, from the GPU names the log lists, or the named profile's board when it
    lists none); across nodes against what the profile's NICs allow for that collective
    (:func:`~.floors.network_floor`; a site's ``perf.network_busbw_min_gbps`` for all_reduce).
    A log that lists no hosts is read under a stated assumption from ``perf.node_gpus``: its
    ranks on one node when they fit, else on full nodes. Each at messages of
    ``perf.busbw_floor_min_bytes`` or more.
    """
    site = evidence_config(config).nccl_busbw_min_gbps
    if site is not None:
        assert record.peak_busbw_gbps is not None and record.peak_size_bytes is not None
        return Floor(site, "evidence.nccl_busbw_min_gbps"), (record.peak_busbw_gbps, record.peak_size_bytes), ""
    perf = config.perf
    nodes, assumed = _nodes(record, perf)
    if nodes is None:
        return None, None, ("the output lists no devices ('# Using devices'), so its hosts and GPUs are unknown; "
                            "pass --profile (its GPUs per node), or set evidence.nccl_busbw_min_gbps")
    if (record.nranks or 0) < 2:
        return None, None, "one rank: nothing crossed a link"
    names = [g.name for g in record.gpus]
    node_floor = log_allreduce_floor(perf, names) if names or perf.allreduce_nvswitch_busbw_min_gbps is None \
        else Floor(perf.allreduce_nvswitch_busbw_min_gbps, "NVSwitch board (the profile's; the log names no GPU)")
    collective = "all_reduce" if _is_all_reduce(record) else record.test
    floor = node_floor
    if nodes > 1:
        if collective == "all_reduce" and perf.network_busbw_min_gbps is not None:
            floor = Floor(perf.network_busbw_min_gbps, f"across {nodes} hosts")
        else:
            floor = network_floor(perf, collective, record.nranks or 0, nodes, node_floor)
        if floor is None:
            return None, None, (f"{nodes} hosts: the network sets the pace and no profile states its NICs; pass "
                                "--profile, or set perf.network_nics_per_node and perf.network_nic_gbps")
    elif floor is None:
        listed = ", ".join(sorted(set(names))) or "unnamed GPUs"
        return None, None, (f"no floor for {listed} (no shipped profile matched: pass --profile, or set "
                            "evidence.nccl_busbw_min_gbps)")
    if assumed:
        floor = Floor(floor.gbps, f"{floor.basis}; {assumed}")
    large = record.best_busbw(perf.busbw_floor_min_bytes)
    if large is None:
        return floor, None, (f"the largest message is below {perf.busbw_floor_min_bytes} B "
                             "(perf.busbw_floor_min_bytes): latency-bound sizes are not held to bandwidth floors")
    return floor, large, ""


def _nodes(record: NcclTestsRecord, perf: Any) -> tuple[int | None, str]:
    """How many nodes the run spanned, and the assumption it was read under ('' when the log lists its hosts)."""
    hosts = {g.host for g in record.gpus} | set(record.hosts)
    if hosts:
        return len(hosts), ""
    per_node, ranks = perf.node_gpus, record.nranks
    if not per_node or not ranks:
        return None, ""
    nodes = -(-ranks // per_node)
    inferred = " (inferred from busbw/algbw)" if record.nranks_inferred else ""
    if nodes == 1:
        return 1, f"assumed one node: the log lists no hosts and its {ranks} ranks{inferred} fit in {per_node} GPUs"
    return nodes, (f"assumed {nodes} nodes of {per_node} GPUs: the log lists no hosts and has {ranks} "
                   f"ranks{inferred}")


_TYPE_BYTES = {"float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2, "double": 8, "float64": 8,
               "int32": 4, "uint32": 4, "int": 4, "int64": 8, "uint64": 8, "int8": 1, "uint8": 1, "char": 1}


def _is_all_reduce(record: NcclTestsRecord) -> bool:
    """all_reduce by name, or an unnamed table that can only be one (many logs omit the binary's name).

    Only all_reduce and reduce_scatter print a reduction with root -1; all_reduce alone keeps
    every element on every rank (count x type size = size) and has busbw >= algbw.
    """
    if record.test is not None:
        return record.test == "all_reduce"
    row = max(record.rows, key=lambda r: r.size_bytes, default=None)
    if row is None or row.redop in (None, "none") or row.root not in (None, -1) or not row.count:
        return False
    width = _TYPE_BYTES.get((row.type or "").lower())
    return (width is not None and row.count * width == row.size_bytes and row.algbw_gbps is not None
            and row.busbw_gbps is not None and row.busbw_gbps >= 0.99 * row.algbw_gbps)


def _no_signature(record: NcclLogRecord, source: str) -> Finding:
    """A log without a failure signature: PASS only on what it states, communicators that finished their init.

    A healthy NCCL_DEBUG=INFO log says so itself ("... - Init COMPLETE" per communicator rank), as does a RAS
    report whose communicators run without errors or warnings; a
    fragment without those lines, or one whose last init never completed (a hang, or a paste cut
    there), shows no failure and no success either: SKIP, which is no evidence the job ran.
    """
    details = {"nccl_version": record.nccl_version, "comms_initialised": record.comms_initialised,
               "comms_unfinished": record.comms_unfinished}
    none = f"no known NCCL/torch.distributed failure signature in {record.lines} line(s)"
    if record.comms_initialised and not record.comms_unfinished:
        return Finding("nccl_log.triage", Status.PASS, source, "ok",
                       f"{none}; {record.comms_initialised} communicator rank(s) initialised (Init COMPLETE, or "
                       "past init in a RAS report)"
                       f"{f', NCCL {record.nccl_version}' if record.nccl_version else ''}",
                       observed=record.comms_initialised, unit="ranks", details=details)
    if record.comms_unfinished:
        none += (f"; {record.comms_unfinished} communicator rank(s) started init without completing it "
                 "(a hang in init, or the paste stops there)")
    return Finding("nccl_log.triage", Status.SKIP, source, "no_signature", none, details=details)


@judges("nccl-log")
def judge_nccl_log(record: NcclLogRecord, config: Config, source: str) -> Iterator[Finding]:
    """One finding per failure signature in a job log, worst first in the report."""
    by_kind: dict[str, list[NcclSignature]] = {}
    for sig in record.signatures:
        by_kind.setdefault(sig.kind, []).append(sig)
    if not by_kind:
        yield _no_signature(record, source)
        return
    for kind, sigs in by_kind.items():
        advice = ADVICE.get(kind, _UNKNOWN)
        ranks = sorted({s.rank for s in sigs if s.rank is not None})
        hosts = sorted({s.host for s in sigs if s.host})
        peers = sorted({s.peer for s in sigs if s.peer})
        where = ", ".join(filter(None, (f"rank {', '.join(map(str, ranks))}" if ranks else "",
                                        f"host {', '.join(hosts)}" if hosts else "",
                                        f"peer {', '.join(peers)}" if peers else "")))
        subject = f"{source}/rank{ranks[0]}" if len(ranks) == 1 else (f"{source}/{hosts[0]}" if len(hosts) == 1
                                                                        else source)
        count = sum(s.count for s in sigs)
        yield Finding("nccl_log.triage", advice.status, subject, kind,
                      f"{advice.title}{f' ({where})' if where else ''}: {sigs[0].detail}"[:400],
                      observed=count, unit="lines", recommendation=advice.recommendation,
                      details={"ranks": ranks, "hosts": hosts, "peers": peers, "first_line": sigs[0].line,
                               "nccl_version": record.nccl_version})
