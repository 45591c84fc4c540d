"""Issue 27 (field corpus E): one test per rule learned from the new nccl-log, nccl-tests and fabric field cases.

Each rule was a pattern seen in a public paste (the field case named in the docstring); the
texts here are short lines of the same shape, so that the rule is held in place by the
repository alone, and each test also shows the line the rule must *not* take.
The nccl-tests completeness rules (cut after the header, last row cut) are in
``tests/test_nccl_tests_completeness.py``.
"""

from __future__ import annotations

from gpu_preflight.parsers.detect import detect_kind
from gpu_preflight.parsers.nccl_log import parse as parse_log
from gpu_preflight.parsers.perftest import parse as parse_perftest


def _kinds(text: str) -> set[str]:
    return {s.kind for s in parse_log(text).signatures}


def test_pdsh_host_prefix_before_the_nccl_prefix_is_stripped() -> None:
    """nccl#1029: pdsh puts 'host: ' before NCCL's own 'host:pid:tid [dev]': the host, pid and device are read."""
    text = ("worker-0: worker-0:19491:21059 [7] proxy.cc:1143 NCCL WARN Socket recv failed while polling for opId=1\n"
            "worker-0: worker-0:19491:21059 [7] NCCL INFO transport/net.cc:288 -> 3\n")
    record = parse_log(text)
    assert detect_kind(text) == "nccl-log"
    sig = record.signatures[0]
    assert (sig.kind, sig.host, sig.pid, sig.device) == ("remote_error", "worker-0", 19491, 7)


def test_ci_clock_prefix_is_stripped() -> None:
    """pytorch#30157: a CI log puts 'Nov 20 16:03:25 ' before each line."""
    text = ("Nov 20 16:03:25 RuntimeError: NCCL error in: /x/ProcessGroupNCCL.cpp:404, unhandled system error, "
            "NCCL version 2.5.6\nNov 20 16:04:11 AssertionError\n")
    assert detect_kind(text) == "nccl-log"
    assert _kinds(text) == {"system_error"}
    assert parse_log(text).nccl_version == "2.5.6"


def test_console_iso_time_column_is_stripped_with_its_bar_or_glued() -> None:
    """aws-ofi-nccl#889: a console's '| <ISO time with offset> | ' column, or the time glued to the message."""
    glued = ("  | 2025-05-16T16:39:51.208-07:00libfabric:85:1747438790::core:core:fi_getinfo_():1392<warn> "
             "fi_getinfo: provider efa output empty list | libfabric:85:1747438790::core:core:fi_getinfo_()\n")
    barred = "  | 2025-05-16T16:39:51.208-07:00 | ip-10-0-0-1:79:79 [0] NCCL INFO cudaDriverVersion 12040\n"
    assert detect_kind(barred) == "nccl-log" and detect_kind(glued) == "nccl-log"
    assert _kinds(barred + glued) == {"net_plugin_error"}


def test_efa_provider_with_no_device_is_a_plugin_error_but_another_provider_is_not() -> None:
    """aws-ofi-nccl#889: 'provider efa output empty list' leaves the OFI plugin no fabric; other providers' empty
    lists are libfabric's usual probing."""
    efa = "libfabric:85:1747438790::core:core:fi_getinfo_():1392<warn> fi_getinfo: provider efa output empty list\n"
    shm = efa.replace("provider efa", "provider shm")
    assert _kinds(efa) == {"net_plugin_error"}
    assert _kinds("host:1:1 [0] NCCL INFO x\n" + shm) == set()


def test_ib_plugin_completion_error_under_another_net_name_and_alone() -> None:
    """nccl#1664: an IB plugin naming itself NET/IBP, the line pasted alone without NCCL's prefix."""
    line = "NET/IBP:Got completion from peer 7.6.13.83<36315> with status=12 opcode=32698 len=32696 vendor err 129\n"
    assert detect_kind(line) == "nccl-log"
    sig = parse_log(line).signatures[0]
    assert (sig.kind, sig.peer) == ("ib_completion_error", "7.6.13.83<36315>")
    assert detect_kind("the NET/IBP plugin: Got completion from peer\n") is None  # prose, not a log line


def test_old_c10d_nccl_error_text_is_a_log() -> None:
    """cuad#9: torch 1.x's 'what(): NCCL Error 1: unhandled cuda error' pasted alone."""
    assert detect_kind("what(): NCCL Error 1: unhandled cuda error\n") == "nccl-log"
    assert detect_kind("NCCL Error 2: unhandled system error\n") == "nccl-log"
    assert _kinds("what(): NCCL Error 1: unhandled cuda error\n") == {"cuda_error"}
    assert detect_kind("We saw an NCCL Error 1: bad\n") is None


def test_heartbeat_monitor_hang_is_a_watchdog_timeout() -> None:
    """xDiT#147: torch's heartbeat monitor ('watchdog got stuck for 600 seconds', 'Heartbeat monitor timed out!')."""
    stuck = ("[rank0]:[F ProcessGroupNCCL.cpp:1169] [PG 5 Rank 0] ProcessGroupNCCL's watchdog got stuck for 600 "
             "seconds without making progress in monitoring enqueued collectives.\n")
    monitor = "[rank4]:[E ProcessGroupNCCL.cpp:1316] [PG 5 Rank 0] Heartbeat monitor timed out! Process will be\n"
    assert _kinds(stuck) == {"watchdog_timeout"} and _kinds(monitor) == {"watchdog_timeout"}
    assert _kinds("[rank0]:[I ProcessGroupNCCL.cpp:1538] heart beat monitor thread joined.\n") == set()


def test_socket_connect_failure_timed_out_or_cut_after_the_peer() -> None:
    """oneflow#3586: NCCL gave up connecting (timed out; the WARN cut after the peer's address); its
    'Call to connect returned ..., retrying' INFO lines alone are retries, not a failure."""
    retry = "worker:1:2 [0] NCCL INFO Call to connect returned Connection timed out, retrying\n"
    cut = "worker:1:2 [0] include/socket.h:403 NCCL WARN Connect to f\n"
    timed_out = "worker:1:2 [0] misc/socket.cc:483 NCCL WARN Connect to 10.0.0.2<45763> failed : Connection timed out\n"
    assert _kinds(retry) == set()
    assert _kinds(retry + cut) == {"connection_refused"}
    sig = parse_log(timed_out).signatures[0]
    assert (sig.kind, sig.peer) == ("connection_refused", "10.0.0.2<45763>")


def test_proxy_socket_recv_failure_is_a_remote_error() -> None:
    """nccl#1029: 'Socket recv failed while polling for opId': the proxy's link to a peer broke."""
    assert _kinds("h:1:2 [7] proxy.cc:1143 NCCL WARN Socket recv failed while polling for opId=1\n") == {
        "remote_error"}


def test_perftest_resource_and_rdma_cm_failures_are_perftest_failures() -> None:
    """perftest#105 and #54: a QP the device refused and a rejected RDMA CM connection, pasted alone."""
    qp = "Unable to create QP.\nFailed to create QP.\nCouldn't create IB resources\n"
    cm = "RDMA CM event error:\nEvent: RDMA_CM_EVENT_REJECTED; error: -111.\nFailed to handle RDMA CM event.\n"
    for text in (qp, cm):
        assert detect_kind(text) == "perftest"
        assert parse_perftest(text).errors and not parse_perftest(text).rows
    assert detect_kind("We could not create QP here\n") is None
