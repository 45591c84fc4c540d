"""Rules issue 27's field corpus taught the kernel-log reader (in-repository texts only).

* ``journalctl -k -o short-iso`` lines with a ``+0800`` offset, and syslog files whose lines come
  from other programs (``systemd-networkd``), are kernel logs; a log with nothing wrong PASSes.
* RDMA NIC driver messages are judged as ``kernel.nic`` by the code the parser names them with
  (``parsers/nic_log.py`` → ``NIC_VERDICTS``): an EFA/ConnectX device that stopped answering
  FAILs, an event (a failed admin command, nvidia-peermem's invalid context) WARNs.
* ``<iface>: Lost carrier`` is ``kernel.link_flap``: FAIL on InfiniBand, WARN on another
  physical interface, nothing for container ends.
* Non-fatal SXids WARN (MONITOR); an SXid's ``Severity``/``Data`` continuation lines belong to
  its headline, and one without a headline in the text stays an SXid of unknown severity.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpu_preflight.checks.evidence_fabric import NIC_VERDICTS
from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text
from gpu_preflight.parsers.kernel_log import KernelLineReader, line_timestamp
from gpu_preflight.parsers.nic_log import NIC_MESSAGES, carrier_change, interface_class, nic_message

KERNEL = Path(__file__).parent / "fixtures" / "field" / "kernel"
SHORT_ISO = (KERNEL / "gpud-journalctl-short-iso-a800-docker.txt").read_text()
PEERMEM = (KERNEL / "gpud-kmsg-raw-peermem.txt").read_text()
FLAPS = (KERNEL / "azhpc-syslog-ib6-6-flaps.txt").read_text()
NO_FLAPS = (KERNEL / "azhpc-syslog-no-flaps.txt").read_text()
SXID_README = (KERNEL / "gpud_sxid_readme_79_20034.txt").read_text()


def judged(text: str, check: str) -> list[tuple[Status, str]]:
    return [(f.status, f.code) for f in judge_text(text, Config(), source="n1") if f.check_id == check]


def exit_zero(text: str) -> bool:
    return Status.worst(f.status for f in judge_text(text, Config(), source="n1")) in (Status.PASS, Status.SKIP)


# --------------------------------------------------------------------------- formats

def test_short_iso_with_a_compact_offset_is_a_kernel_log_and_dated() -> None:
    assert detect_kind(SHORT_ISO) == "dmesg"
    assert line_timestamp(SHORT_ISO.splitlines()[0]) == datetime(2025, 1, 2, 7, 20, 12, tzinfo=UTC)
    assert judged(SHORT_ISO, "gpu.xid")[0][0] is Status.PASS and exit_zero(SHORT_ISO)


def test_a_syslog_file_of_other_programs_is_a_kernel_log() -> None:
    assert detect_kind(NO_FLAPS) == "dmesg"
    assert exit_zero(NO_FLAPS)


def test_prose_with_a_month_name_is_not_a_syslog() -> None:
    assert detect_kind("Aug 17 was the day we saw it.\nNothing else here.\n") is None


# --------------------------------------------------------------------------- NIC driver messages

def test_every_nic_code_has_a_verdict() -> None:
    assert {code for code, _ in NIC_MESSAGES} == set(NIC_VERDICTS)


@pytest.mark.parametrize(("line", "code", "device", "status"), [
    ("kernel: infiniband rdmap16s27: The device didn't send any completion for admin cmd CREATE_QP(6) status 0",
     "efa_admin_cmd_timeout", "rdmap16s27", Status.FAIL),
    ("Sep  4 10:00:00 host kernel: infiniband rdmap0s6: Admin queue is closed", "efa_admin_queue_closed",
     "rdmap0s6", Status.FAIL),
    ("efa 0000:00:06.0: Device isn't ready, abort com init", "efa_device_not_ready", "0000:00:06.0", Status.FAIL),
    ("infiniband rdmap0s6: Failed to process command CREATE_QP (opcode 6) comp_status 1 err -22",
     "efa_admin_cmd_failed", "rdmap0s6", Status.WARN),
    ("[ 12.3] mlx5_core 0000:3b:00.0: wait_func:1158:(pid 1): ACCESS_REG(0x805) timeout. Will cause a leak of a "
     "command resource", "mlx5_cmd_timeout", "0000:3b:00.0", Status.FAIL),
    ("[ 12.3] mlx5_core 0000:3b:00.0 ens1np0: TX timeout detected", "mlx5_tx_timeout", None, Status.WARN),
])
def test_nic_driver_messages_are_judged_by_their_code(line: str, code: str, device: str | None,
                                                      status: Status) -> None:
    found = nic_message(line)
    assert found is not None and found[:2] == (code, device)
    assert judged(line + "\n", "kernel.nic") == [(status, code)]


def test_the_efa_patterns_are_anchored_on_the_driver_prefix() -> None:
    """ENA, the network driver, shares some texts: without ``efa <bdf>:``/``infiniband rdmap…:`` it is not EFA."""
    assert nic_message("ena 0000:00:05.0: Device isn't ready, abort com init") is None
    assert nic_message("infiniband mlx5_0: Admin queue is closed") is None


def test_peermem_invalid_context_warns_once_for_many_lines() -> None:
    assert judged(PEERMEM, "kernel.nic") == [(Status.WARN, "peermem_invalid_context")]
    assert not exit_zero(PEERMEM)


def test_nic_messages_older_than_the_window_are_counted_not_judged() -> None:
    text = ("2025-01-01T00:00:00+00:00 host kernel: infiniband rdmap0s6: Admin queue is closed\n"
            "2025-01-01T03:00:00+00:00 host kernel: eth0: renamed\n")  # the 2 h window starts at 01:00
    assert judged(text, "kernel.nic") == [(Status.PASS, "older")]


# --------------------------------------------------------------------------- link flaps

@pytest.mark.parametrize(("name", "cls"), [("ib6", "infiniband"), ("ibp12s0", "infiniband"), ("eth0", "ethernet"),
                                           ("ens5", "ethernet"), ("veth9d4400a", "virtual"), ("cali1d5c6", "virtual"),
                                           ("docker0", "virtual"), ("ibverbs-ish", "ethernet")])
def test_interfaces_are_classed_by_name(name: str, cls: str) -> None:
    assert interface_class(name) == cls


def test_infiniband_carrier_losses_fail() -> None:
    record = parse_text(FLAPS)[1]
    [ib6] = record.carrier
    assert (ib6.interface, ib6.link, ib6.lost, ib6.gained) == ("ib6", "infiniband", 6, 6)
    assert judged(FLAPS, "kernel.link_flap") == [(Status.FAIL, "ib_link_flap")]


def test_an_ethernet_carrier_loss_warns_and_a_container_end_is_not_judged() -> None:
    text = ("Dec  6 19:25:33 node systemd-networkd[2385]: eth0: Lost carrier\n"
            "Dec  6 19:25:34 node systemd-networkd[2385]: veth1234: Lost carrier\n")
    assert judged(text, "kernel.link_flap") == [(Status.WARN, "link_flap")]
    assert carrier_change("eth0: Gained carrier") == ("eth0", False)


# --------------------------------------------------------------------------- SXids

def test_a_non_fatal_sxid_warns_with_monitor() -> None:
    text = "[73309.599396] nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short Error Rate\n"
    [f] = [f for f in judge_text(text, Config(), source="n1") if f.check_id == "gpu.xid"]
    assert (f.status, f.details["kind"], f.details["operator_action"]) == (Status.WARN, "sxid:nonfatal", "monitor")


def test_continuation_lines_belong_to_their_headline() -> None:
    reader = KernelLineReader()
    lines = ["nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20009, Non-fatal, Link 28 RX Short Error Rate",
             "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20009, Severity 0 Engine instance 28 Sub-engine instance 00",
             "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20009, Data {0x00000000, 0x00000000}"]
    events = [e for line in lines for e in reader.read(line)]
    assert [getattr(e, "kind", None) for e in events] == ["sxid:nonfatal"]


def test_a_continuation_line_without_its_headline_is_of_unknown_severity() -> None:
    reader = KernelLineReader()
    events = reader.read("nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine instance 60 "
                         "Sub-engine instance 00")
    assert [getattr(e, "kind", None) for e in events] == ["sxid"]
    kinds = {f.details.get("kind") for f in judge_text(SXID_README, Config(), source="n1") if f.check_id == "gpu.xid"}
    assert {"sxid", "sxid:fatal"} <= kinds  # nvswitch2's first line is a continuation seen before its headline
