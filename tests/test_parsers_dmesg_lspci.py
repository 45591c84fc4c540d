"""Kernel-log evidence (Xid, PCIe ``limited by``, GPU-library segfaults, refused reads) and lspci."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.parsers.dmesg import parse as parse_dmesg
from gpu_preflight.parsers.errors import ParseError
from gpu_preflight.parsers.lspci import parse as parse_lspci

from .evidence_facts import parsed

FIXTURES = Path(__file__).parent / "fixtures" / "evidence"


def test_xid_burst(corpus: Path) -> None:
    data = parsed(corpus, "kernel-xid/gpud-dmesg-decode-iso-xid13-xid43-burst.log")
    events = data["xid_events"]
    assert len(events) == 636
    assert [e["xid"] for e in events].count(13) == 629 and [e["xid"] for e in events].count(43) == 7
    assert {e["pci_bus_id"] for e in events} == {"0000:38:00"}
    xid43 = next(e for e in events if e["xid"] == 43)
    assert (xid43["pid"], xid43["process"], xid43["message"]) == (2815167, "pt_main_thread", "Ch 00000008")
    assert events[0]["timestamp"] == "2025-01-21T02:21:33.498559+00:00"
    assert data["readable"] is True


def test_xid63_bare_line(corpus: Path) -> None:
    data = parsed(corpus, "kernel-xid/stas00-xid63-row-remapper.log")
    assert data["xid_events"] == [{
        "xid": 63, "pci_bus_id": "0000:10:1c", "pid": 1896, "process": None, "timestamp": None,
        "message": "Row Remapper: New row marked for remapping, reset gpu to activate.",
        "raw": "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, "
               "reset gpu to activate.", "kind": "xid"}]


def test_refused_read_is_not_a_clean_log(corpus: Path) -> None:
    data = parsed(corpus, "kernel-xid/hcdeep-dmesg-permission-denied-gke.txt")
    assert data["readable"] is False and data["xid_events"] == []
    assert data["denied"] == "dmesg: read kernel buffer failed: Operation not permitted"


def test_segfault_in_libnccl(corpus: Path) -> None:
    data = parsed(corpus, "kernel-xid/gpud-dmesg-libnccl-segfault.log")
    assert [(s["process"], s["pid"], s["library"]) for s in data["segfaults"]] == [
        ("pt_main_thread", 2536443, "libnccl.so.2")] * 2
    assert data["xid_events"] == []


def test_pcie_limited_by(corpus: Path) -> None:
    data = parsed(corpus, "lspci/stas00-dmesg-pcie-limited-by.txt")
    assert data["pcie_limits"] == [
        {"device": "0000:04:00.0", "available_gbps": 252.048, "limited_by_speed_gts": 16.0, "limited_by_width": 16,
         "limited_at": "0000:01:00.0", "capable_gbps": 504.112, "capable_speed_gts": 32.0, "capable_width": 16},
        {"device": "0000:8b:00.0", "available_gbps": 252.048, "limited_by_speed_gts": 16.0, "limited_by_width": 16,
         "limited_at": "0000:87:00.0", "capable_gbps": 504.112, "capable_speed_gts": 32.0, "capable_width": 16}]


def test_garbled_timestamp_keeps_the_event_undated() -> None:
    record = parse_dmesg("2025-01-21T27:61:33,1+00:00 NVRM: Xid (PCI:0000:38:00): 79, GPU has fallen off the bus.\n")
    assert [(e.xid, e.timestamp) for e in record.xid_events] == [(79, None)]


def test_text_that_is_no_kernel_log() -> None:
    with pytest.raises(ParseError, match="no kernel log line"):
        parse_dmesg("just a note\n")


def test_plain_lspci_gb200(corpus: Path) -> None:
    data = parsed(corpus, "lspci/gpud-lspci-gb200.txt")
    assert len(data["devices"]) == 87 and data["verbose"] is False
    gpus = [d for d in data["devices"] if d["device_class"] == "3D controller"]
    assert len(gpus) == 4 and {d["name"] for d in gpus} == {"NVIDIA Corporation Device 2941 (rev a1)"}
    assert [d["address"][:4] for d in gpus][:2] == ["0008", "0009"]
    assert all(d["downgraded"] is None for d in data["devices"])


def test_lspci_nn_ids(corpus: Path) -> None:
    data = parsed(corpus, "lspci/gpud-lspci-nn-a100x8.txt")
    gpus = [d for d in data["devices"] if d["class_id"] == "0302"]
    assert len(gpus) == 8 and {(d["vendor_id"], d["device_id"]) for d in gpus} == {("10de", "20b2")}
    switches = [d for d in data["devices"] if d["class_id"] == "0680" and d["vendor_id"] == "10de"]
    assert len(switches) == 6 and {d["device_id"] for d in switches} == {"1af1"}


def test_lspci_vvv_link_status() -> None:
    record = parse_lspci((FIXTURES / "lspci-vvv-gpu-nic.txt").read_text())
    by_address = {d.address: d for d in record.devices}
    assert record.verbose and len(record.devices) == 5
    ok, narrow, slow_gpu, nic, bridge = (by_address[a] for a in ("1b:00.0", "43:00.0", "52:00.0", "ca:00.0", "00:00.0"))
    assert (ok.cap_speed_gts, ok.cap_width, ok.sta_speed_gts, ok.sta_width) == (32.0, 16, 32.0, 16)
    assert ok.downgraded is False
    assert (narrow.sta_width, narrow.width_downgraded, narrow.speed_downgraded, narrow.downgraded) == (
        8, True, False, True)
    assert (slow_gpu.sta_speed_gts, slow_gpu.speed_downgraded, slow_gpu.downgraded) == (2.5, True, True)
    assert (nic.device_class, nic.sta_speed_gts, nic.speed_downgraded) == ("Infiniband controller", 16.0, True)
    assert bridge.downgraded is None and bridge.cap_speed_gts is None


def test_old_pciutils_without_annotations() -> None:
    record = parse_lspci("01:00.0 3D controller: NVIDIA Corporation GV100GL (rev a1)\n"
                         "\t\tLnkCap:\tPort #0, Speed 8GT/s, Width x16, ASPM not supported\n"
                         "\t\tLnkSta:\tSpeed 8GT/s, Width x4, TrErr- Train- SlotClk+ DLActive- BWMgmt- ABWMgmt-\n")
    device = record.devices[0]
    assert (device.sta_width, device.width_downgraded, device.speed_downgraded) == (4, True, False)


def test_lspci_rejects_what_is_not_a_device_line() -> None:
    with pytest.raises(ParseError, match="not an lspci device line"):
        parse_lspci("hello world\n")
