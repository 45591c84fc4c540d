"""NCCL job logs of the fifth field round (issue 27): an NCCL 2.1 WARN line pasted with only its host and device,
torch's watchdog dump naming the work that never finished, P2P's CUDA IPC import failing, and a process that crashed
inside NCCL as a signal handler reports it.

The texts follow the tools' format strings and the field texts they came from (tests/fixtures/field/nccl-log):
NCCL before 2.3 printed "<file>:<line> WARN" without "NCCL" (horovod/horovod#98 pasted "machine [0]
misc/ibvwrap.cu:269 WARN Call to ibv_create_qp failed"); torch 2.2-2.3's ProcessGroupNCCL logs "[PG <id> Rank <r>]
Timeout at NCCL work: <seq>, last enqueued NCCL work: ..., last completed NCCL work: ..." (modelscope/FunASR#2006);
transport/p2p.cc (p2p.cu before 2.3) warns "failed to open CUDA IPC handle : %d %s" and returns
ncclUnhandledCudaError (horovod/horovod#785); UCX's handler prints "[host:pid:tid:thread] Caught signal 11 (...)"
then "==== backtrace" frames " N  <lib>(<sym>+0x<off>) [0x<addr>]" (NVIDIA/nccl#1996), Open MPI's "[host:pid] ***
Process received signal ***" (NVIDIA/nccl#1669).
"""

from __future__ import annotations

from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind

from .nccl_log_judging import kinds, triage

OLD_WARN = ("node7 [0] misc/ibvwrap.cu:269 WARN Call to ibv_create_qp failed\n"
            "Failed, NCCL error test_nccl.c:99 'unhandled system error'\n")


def test_a_pre_2_3_warn_with_only_host_and_device_is_a_job_log() -> None:
    assert detect_kind(OLD_WARN) == "nccl-log"
    assert kinds(OLD_WARN) == ["system_error", "system_error"]
    assert triage(OLD_WARN) == [(Status.FAIL, "system_error")]


def test_a_bare_host_and_device_before_prose_is_no_log() -> None:
    """The host-and-device form needs a path in NCCL's source tree before its WARN."""
    assert detect_kind("server [0] said WARN twice and then stopped\n") is None


def test_torchs_timeout_at_nccl_work_is_the_watchdog() -> None:
    text = ("host-0:140:220 [3] NCCL INFO comm 0x9bc5a80 rank 11 nranks 16 cudaDev 3 busId 4e000 - Abort COMPLETE\n"
            "[rank11]:[E ProcessGroupNCCL.cpp:1537] [PG 1 Rank 11] Timeout at NCCL work: 15734, last enqueued NCCL "
            "work: 15735, last completed NCCL work: 15733.\n")
    assert kinds(text) == ["watchdog_timeout"]
    assert triage(text) == [(Status.FAIL, "watchdog_timeout")]


def test_a_cuda_ipc_handle_that_cannot_be_opened_is_a_cuda_error() -> None:
    text = ("host-a:2753:2762 [0] transport/p2p.cu:548 NCCL WARN failed to open CUDA IPC handle : 64 peer access is "
            "not supported between these two devices\n"
            "host-a:2753:2762 [0] NCCL INFO init.cu:568 -> 1\n")
    assert kinds(text) == ["cuda_error"]
    assert triage(text) == [(Status.FAIL, "cuda_error")]


def test_a_ucx_backtrace_through_libnccl_is_a_job_log_that_crashed() -> None:
    text = ("[n1-011-039:288505:0:296459] Caught signal 11 (Segmentation fault: address not mapped to object at "
            "address 0x48)\n"
            "==== backtrace (tid: 296459) ====\n"
            " 0  /usr/lib/libucs.so.0(ucs_handle_error+0x2d4) [0x7fedc925c274]\n"
            " 1  /opt/nccl/lib/libnccl.so(+0x120057) [0x7ff1c18c1057]\n"
            " 2  /usr/lib/x86_64-linux-gnu/libc.so.6(+0x89144) [0x7ff1c151e144]\n")
    assert detect_kind(text) == "nccl-log"
    assert kinds(text) == ["segfault"]
    assert triage(text) == [(Status.FAIL, "segfault")]


def test_a_backtrace_without_nccl_in_it_is_not_read_as_an_nccl_log() -> None:
    text = ("[h:1:0:1] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x48)\n"
            " 0  /usr/lib/libucs.so.0(ucs_handle_error+0x2d4) [0x7fedc925c274]\n"
            " 1  /usr/lib/x86_64-linux-gnu/libc.so.6(+0x89144) [0x7ff1c151e144]\n")
    assert detect_kind(text) != "nccl-log"


def test_open_mpis_process_received_signal_after_nccl_lines_is_a_crash() -> None:
    text = ("host-1:405884:407462 [0] NCCL INFO RAS client listening socket at ::1<28028>\n"
            "[host-1:405884] *** Process received signal ***\n")
    assert kinds(text) == ["segfault"]
    assert triage(text) == [(Status.FAIL, "segfault")]
