"""A bracketed wall-clock stamp is not the kernel's (issue 27, nccl-tests#180): UCX and other programs stamp their
log lines with seconds since 1970 ('[1700554343.440877] [host:7356 :0] sock.c:323 UCX ERROR ...'), the kernel with
seconds since boot. Read as dmesg, an MPI launch that failed before NCCL started was judged 'no Xid events' and
passed; it is no kernel log, so no tool's text we read (exit 3). Inputs are built here."""

from __future__ import annotations

from gpu_preflight.parsers.detect import detect_kind

UCX = """\
 mpirun --allow-run-as-root  -np 4 -hostfile hostfile ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 4
[1700554343.440877] [10-192-80-132:7356 :0]            sock.c:323  UCX  ERROR   connect(fd=48, dest_addr=172.17.0.1:42887) failed: Connection refused
[10-192-80-132:07356] *** An error occurred in MPI_Allgather
"""  # noqa: E501


def test_an_epoch_stamped_program_log_is_not_a_kernel_log() -> None:
    assert detect_kind(UCX) is None


def test_the_kernel_s_uptime_stamps_still_read_as_dmesg() -> None:
    """Seconds since boot: a few digits, or nine after three years up (999999999 s is 31 years)."""
    assert detect_kind("[    5.123456] usb 1-1: new high-speed USB device number 2 using xhci_hcd\n") == "dmesg"
    assert detect_kind("[123456789.123456] e1000e 0000:00:1f.6 eno1: NIC Link is Up 1000 Mbps Full Duplex\n") == "dmesg"
