"""Kernel lines copied by hand or without their stamps (issue 27's kernel/fabric batch of 2026-12-07; texts built here).

* The driver prints ``NVRM: Xid (PCI:0000:0b:00): 32, ...``. A reporter who copied the line off the
  monitor of a mining rig posted ``NVRM Xid (PCI:0000:0b:00) : 32, Channel ID 00000009 intr 00008000``
  (fireice-uk/xmr-stak#2054): no colon after ``NVRM``, a space before the Xid's colon. It names Xid 32
  as plainly as the driver's own line, so it is that event, not a clean log; "NVRM Xid" in prose
  (without the parenthesis) stays no event at all, and a cut copy is still an unreadable Xid line.
* The AER lines dev_printk prints as ``<driver> <BDF>: ...`` are a kernel log when pasted without their
  stamps, as the same message without the driver's name already was.
"""

from __future__ import annotations

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind
from gpu_preflight.parsers.kernel_log import UnparsedXid, XidEvent, scan_xid_line

COPIED = ("[12146.826127] NVRM Xid (PCI:0000:0b:00) : 32, Channel ID 00000009 intr 00008000\n"
          "[12146.827566] NVRM Xid (PCI:0000:0b:00) : 32, Channel ID 00000009 intr 00008000\n")


def test_a_hand_copied_xid_line_is_the_event_it_names() -> None:
    event = scan_xid_line(COPIED.splitlines()[0])
    assert isinstance(event, XidEvent) and (event.xid, event.pci) == (32, "0000:0b:00")
    assert event.message.startswith("Channel ID 00000009")


def test_a_hand_copied_xid_32_warns_instead_of_passing() -> None:
    findings = [f for f in judge_text(COPIED, Config(), source="n1") if f.check_id == "gpu.xid"]
    assert Status.worst(f.status for f in findings) is Status.WARN
    assert any("32" in f.summary for f in findings if f.status is Status.WARN)


def test_a_bare_copied_line_is_still_read_as_a_kernel_log() -> None:
    assert detect_kind("NVRM Xid (PCI:0000:0b:00) : 79, GPU has fallen off the bus.\n") == "dmesg"


def test_prose_stays_nothing_and_a_cut_copy_is_an_unreadable_xid_line() -> None:
    assert scan_xid_line("the NVRM Xid errors are listed in NVIDIA's catalogue") is None
    assert isinstance(scan_xid_line("[  1.0] NVRM Xid (PCI:0000:0b:00) :"), UnparsedXid)


def test_dev_printk_aer_lines_copied_without_their_stamps_are_a_kernel_log() -> None:
    """The kernel's AER lines as dev_printk prints them, "<driver> <BDF>: ...", pasted with the dmesg stamps cut
    off (Dasharo/dasharo-issues#639's Wi-Fi card, stamps removed): still a kernel log, and its corrected errors
    still WARN; a driver's name is one word, so prose in front of the message is not read as one."""
    bare = ("pcieport 0000:00:1c.0: AER: Corrected error received: 0000:2d:00.0\n"
            "ath9k 0000:2d:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)\n"
            "ath9k 0000:2d:00.0:   device [168c:0034] error status/mask=00000001/00002000\n")
    assert detect_kind(bare) == "dmesg"
    findings = judge_text(bare, Config(), source="n1")
    assert Status.worst(f.status for f in findings if f.check_id == "kernel.pcie_aer") is Status.WARN
    assert detect_kind("we saw this: pcieport 0000:00:1c.0: AER: Corrected error received: 0000:2d:00.0\n") is None
