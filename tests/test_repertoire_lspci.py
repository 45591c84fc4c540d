"""lspci's output forms across pciutils 3.5-3.14, rendered from its format strings (docs/repertoire/lspci.md).

The fixtures (tests/fixtures/repertoire/lspci, provenance in its PROVENANCE.md) render ls-caps.c,
ls-ecaps.c, lspci.c and pcilib's format strings. A link below its capability is judged in every
version's spelling (no mark, ``(ok)``/``(downgraded)``, ``" (downgraded)"``, ``unknown`` speeds);
an uncorrectable AER status bit set is never a pass (``pcie.aer``); ``<access denied>`` is an ERROR
of that reading; a device that reads all ones FAILs; pcilib's warnings and hex rows are read past.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Finding, Status
from gpu_preflight.parsers.detect import detect_kind, parse_text

FORMS = Path(__file__).parent / "fixtures" / "repertoire" / "lspci"


def form(name: str) -> str:
    return (FORMS / name).read_text(encoding="utf-8")


def pcie(name: str) -> list[Finding]:
    return [f for f in judge_text(form(name), Config(), source="n1") if f.check_id.startswith("pcie.")]


def outcomes(name: str) -> list[tuple[str, Status, str]]:
    return [(f.check_id, f.status, f.code) for f in pcie(name)]


@pytest.mark.parametrize(("name", "expected"), [
    ("v3.5-gpu-width-x8.txt", [("pcie.lnksta", Status.FAIL, "width_downgraded")]),
    ("v3.6-nic-speed-downgraded.txt", [("pcie.lnksta", Status.WARN, "speed_downgraded")]),
    ("v3.8-gpu-link-down-speed-unknown-x0.txt", [("pcie.lnksta", Status.FAIL, "width_downgraded")]),
    ("v3.6-gen5-gpu-speed-unknown-full-width.txt", [("pcie.lnksta", Status.PASS, "ok")]),
])
def test_a_link_is_judged_in_every_versions_spelling(name: str, expected: list[tuple[str, Status, str]]) -> None:
    assert detect_kind(form(name)) == "lspci"
    assert outcomes(name) == expected


def test_an_unknown_speed_is_not_read_as_a_number() -> None:
    device = parse_text(form("v3.6-gen5-gpu-speed-unknown-full-width.txt"))[1].devices[0]
    assert (device.cap_speed_gts, device.sta_speed_gts, device.cap_width, device.sta_width) == (None, None, 16, 16)


def test_an_uncorrectable_aer_status_bit_is_not_a_pass() -> None:
    name = "v3.12-aer-uesta-cmpltto.txt"
    device = parse_text(form(name))[1].devices[0]
    assert (device.ue_status, device.ue_masked) == (["CmpltTO"], [])
    assert device.ue_fatal == ["DLP", "SDES", "FCP", "RxOF", "MalfTLP"]
    assert outcomes(name) == [("pcie.aer", Status.WARN, "aer_uncorrectable"), ("pcie.lnksta", Status.PASS, "ok")]
    aer = pcie(name)[0]
    assert "CmpltTO+" in aer.summary and "(fatal)" not in aer.summary and aer.subject == "n1/18:00.0"


def test_pciutils_313_prints_uesta_on_three_lines_and_a_masked_bit_is_named_so() -> None:
    masked = parse_text(form("v3.13-aer-uesta-multiline-masked-unsupreq.txt"))[1].devices[0]
    assert (masked.ue_status, masked.ue_masked, masked.ue_fatal) == (["UnsupReq"], ["UnsupReq"], [])
    assert outcomes("v3.13-aer-uesta-multiline-masked-unsupreq.txt")[0] == ("pcie.aer", Status.PASS, "ok")
    text = form("v3.13-aer-uesta-multiline-masked-unsupreq.txt").replace("CmpltTO-", "CmpltTO+", 2)  # UESta, UEMsk
    assert [(f.check_id, f.status, f.code) for f in judge_text(text, Config(), source="n1")
            if f.check_id == "pcie.aer"] == [("pcie.aer", Status.WARN, "aer_uncorrectable_masked")]
    third = parse_text(form("v3.13-aer-uesta-multiline-third-line.txt"))[1].devices[0]
    assert third.ue_status == ["TLPXlatBlocked"]
    assert outcomes("v3.13-aer-uesta-multiline-third-line.txt")[0] == ("pcie.aer", Status.WARN, "aer_uncorrectable")


def test_an_unsupported_request_left_by_enumeration_is_not_an_error() -> None:
    """A healthy root port keeps the UR its enumeration probes drew (linux-pci, 2023-11-03): not a WARN; a UR
    beside another bit is named with it."""
    name = "v3.12-aer-root-port-unsupreq-after-enumeration.txt"
    assert parse_text(form(name))[1].devices[0].ue_status == ["UnsupReq"]
    assert outcomes(name)[0] == ("pcie.aer", Status.PASS, "ok")  # (a root port's own link is shown, not judged)
    assert "1 with only UnsupReq+" in pcie(name)[0].summary
    text = form("v3.12-aer-uesta-cmpltto.txt").replace("ECRC- UnsupReq-", "ECRC- UnsupReq+", 1)
    aer = [f for f in judge_text(text, Config(), source="n1") if f.check_id == "pcie.aer"]
    assert [(f.status, f.code) for f in aer] == [(Status.WARN, "aer_uncorrectable")]
    assert "CmpltTO+, UnsupReq+" in aer[0].summary


def test_a_clear_uesta_passes_and_says_what_it_read() -> None:
    assert outcomes("v3.13-aer-clear.txt") == [("pcie.aer", Status.PASS, "ok"), ("pcie.lnksta", Status.PASS, "ok")]


def test_capabilities_access_denied_is_an_error_of_that_reading() -> None:
    findings = pcie("capabilities-access-denied.txt")
    assert [(f.check_id, f.status, f.code) for f in findings] == [("pcie.lnksta", Status.ERROR, "capabilities_denied")]
    assert findings[0].observed == 2 and "not run as root" in findings[0].summary


def test_a_device_that_reads_all_ones_fails() -> None:
    record = parse_text(form("rev-ff-unknown-header-type.txt"))[1]
    assert [d.config_unreadable for d in record.devices] == [True, False]
    assert outcomes("rev-ff-unknown-header-type.txt") == [
        ("pcie.lnksta", Status.FAIL, "device_unreachable"), ("pcie.lnksta", Status.PASS, "ok")]


def test_a_revision_of_ff_is_off_the_bus_only_where_that_revision_cannot_be_the_parts_own() -> None:
    """A design may give itself revision ff (a programmed FPGA in firesim's setup): its plain listing is not a
    device off the bus (nothing judged: an ERROR of the run, not a FAIL), nor is a -vv one whose capability list was
    read; a GPU, NIC or NVIDIA part shown '(rev ff)' alone still FAILs."""
    assert outcomes("rev-ff-fpga-plain-listing.txt") == []
    device = parse_text(form("rev-ff-fpga-config-readable.txt"))[1].devices[0]
    assert device.name.endswith("(rev ff)") and device.config_unreadable is False
    assert outcomes("rev-ff-fpga-config-readable.txt") == [("pcie.lnksta", Status.PASS, "ok")]
    for line in ("18:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev ff)",
                 "07:00.0 Bridge: NVIDIA Corporation Device 22a3 (rev ff)",
                 "01:00.0 Ethernet controller [0200]: Intel Corporation I350 Gigabit Network Connection [8086:1521] "
                 "(rev ff)"):
        assert [(f.check_id, f.status, f.code) for f in judge_text(line + "\n", Config(), source="n1")
                if f.check_id.startswith("pcie.")] == [("pcie.lnksta", Status.FAIL, "device_unreachable")], line


def test_pcilib_warnings_and_hex_rows_are_read_past() -> None:
    text = form("pcilib-vpd-warning-and-hexdump.txt")
    assert detect_kind(text) == "lspci"
    record = parse_text(text)[1]
    assert record.warnings == ["pcilib: sysfs_read_vpd: read failed: Input/output error"]
    assert outcomes("pcilib-vpd-warning-and-hexdump.txt") == [("pcie.lnksta", Status.FAIL, "width_downgraded")]


def test_ports_that_train_to_their_partner_are_not_judged_on_their_own_link() -> None:
    # pciutils 3.8+ marks no downgrade on a root or downstream port (link_compare): it trains to the device
    # below, whose own LnkSta is judged. An empty slot's root port reads x0, a switch port to an NVMe x4.
    name = "v3.8-ports-train-to-partner-empty-slot-x0.txt"
    record = parse_text(form(name))[1]
    assert [(d.port_type, d.sta_width, d.downgraded) for d in record.devices] == [
        ("Root Port", 0, None), ("Downstream Port", 4, None), ("Endpoint", 4, False), ("Endpoint", 16, False)]
    assert outcomes(name) == [("pcie.lnksta", Status.PASS, "ok")]
    assert pcie(name)[0].observed == 2


def test_a_switch_upstream_port_below_its_capability_still_fails() -> None:
    record = parse_text(form("v3.8-switch-upstream-port-downgraded.txt"))[1]
    assert record.devices[0].port_type == "Upstream Port"
    assert outcomes("v3.8-switch-upstream-port-downgraded.txt") == [("pcie.lnksta", Status.FAIL, "width_downgraded")]


def test_numeric_classes_of_lspci_n_are_class_ids_and_an_idle_gpu_speed_is_not_judged() -> None:
    name = "n-numeric-idle-gpu-slow-nic.txt"
    record = parse_text(form(name))[1]
    assert [(d.class_id, d.vendor_id, d.device_id) for d in record.devices] == [
        ("0302", "10de", "2330"), ("0207", "15b3", "1021")]
    assert [(f.subject, f.code) for f in pcie(name)] == [("n1/1a:00.0", "speed_downgraded")]


def test_bridge_paths_of_lspci_p_and_pp_are_device_lines() -> None:
    name = "pp-and-p-bridge-paths.txt"
    assert detect_kind(form(name)) == "lspci"
    assert [d.address for d in parse_text(form(name))[1].devices] == [
        "0000:15:01.0/16:00.0/17:00.0/18:00.0", "15:01.0/00.0/02.0/00.0"]
    assert outcomes(name) == [("pcie.lnksta", Status.FAIL, "width_downgraded")]
