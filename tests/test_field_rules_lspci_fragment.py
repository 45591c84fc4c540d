"""``lspci`` link lines pasted without the device line above them: a fragment of one device.

People quote ``lspci -vv | grep -E 'LnkCap:|LnkSta:'``, the two link lines in a sentence, or a
slice of one device's capabilities. Before, such a text was no text we read (exit 3: no device
line). Now it is one device whose address and class are not shown (``record.fragment``), judged
on what it shows: a width below the capability (the numbers, or lspci's own ``(downgraded)``)
FAILs as for any device; a reduced speed is not judged, since only a device shown not to be a GPU
has its speed judged (idle GPUs drop to 2.5 GT/s) and the fragment does not say which it is.
"""

from __future__ import annotations

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text
from gpu_preflight.parsers.text import is_command

RISER = ("    LnkCap: Port #0, Speed 16GT/s, Width x16, ASPM L1, Exit Latency L1 <16us\n"
         "    LnkSta: Speed 2.5GT/s (downgraded), Width x16 (ok)\n")


def lnksta(text: str) -> list[tuple[Status, str]]:
    return [(f.status, f.code) for f in judge_text(text, Config(), source="n1") if f.check_id == "pcie.lnksta"]


def test_two_quoted_link_lines_are_one_device_and_its_reduced_speed_is_not_judged() -> None:
    assert detect_kind(RISER) == "lspci"
    record = parse_text(RISER)[1]
    assert record.fragment == 1 and len(record.devices) == 1
    device = record.devices[0]
    assert (device.address, device.device_class) == ("?", "")
    assert (device.cap_speed_gts, device.sta_speed_gts, device.speed_downgraded, device.width_downgraded) == (
        16.0, 2.5, True, False)
    assert lnksta(RISER) == [(Status.PASS, "ok")]


def test_a_slice_of_capabilities_with_a_downgraded_width_fails() -> None:
    text = ("\t\t\tClockPM+ Surprise- LLActRep- BwNot- ASPMOptComp+\n"
            "\t\tLnkCtl:\tASPM Disabled; RCB 64 bytes, Disabled- CommClk+\n"
            "\t\tLnkSta:\tSpeed 5GT/s (downgraded), Width x1 (downgraded)\n"
            "\t\t\tTrErr- Train- SlotClk+ DLActive- BWMgmt- ABWMgmt-\n"
            "\tCapabilities: [100 v2] Advanced Error Reporting\n")
    assert detect_kind(text) == "lspci"
    assert lnksta(text) == [(Status.FAIL, "width_downgraded")]


def test_the_pasted_lspci_command_is_not_output_and_a_full_link_passes() -> None:
    command = "sudo lspci -s 2f:00.0 -vv | grep -E 'LnkCap:|LnkSta:'"
    assert is_command(command) and is_command("lspci -vvv") and not is_command("lspci shows the link at x8")
    text = (command + "\n"
            "                LnkCap: Port #0, Speed 32GT/s, Width x16, ASPM L1, Exit Latency L1 <1us\n"
            "                LnkSta: Speed 32GT/s, Width x16\n")
    assert lnksta(text) == [(Status.PASS, "ok")]


def test_a_status_without_a_capability_judges_nothing() -> None:
    text = ("LnkSta: Speed 16GT/s, Width x16\n"
            "LnkCap2: Supported Link Speeds: 2.5-16GT/s, Crosslink- Retimer+ 2Retimers+ DRS-\n")
    assert detect_kind(text) == "lspci"
    assert lnksta(text) == [(Status.SKIP, "no_link_status")]


def test_a_named_nic_still_warns_on_speed_and_prose_is_no_fragment() -> None:
    named = ("17:00.0 Infiniband controller [0207]: Mellanox Technologies MT2910 Family [ConnectX-7] [15b3:1021]\n"
             "\t\tLnkCap:\tPort #0, Speed 32GT/s, Width x16\n"
             "\t\tLnkSta:\tSpeed 16GT/s (downgraded), Width x16 (ok)\n")
    assert lnksta(named) == [(Status.WARN, "speed_downgraded")]
    prose = "The card reports this:\n    LnkSta: Speed 2.5GT/s (downgraded), Width x16 (ok)\nwhich looks slow.\n"
    assert detect_kind(prose) != "lspci"
