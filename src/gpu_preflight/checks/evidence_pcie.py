"""What ``lspci -vv`` shows of a PCIe device besides its link width and speed (docs/repertoire/lspci.md).

* ``pcie.aer``: WARN for a device whose AER ``UESta`` shows an uncorrectable error bit set. The
  register latches since it was last cleared (the kernel's AER driver clears what it reports), so
  a bit set is an error nobody handled, at a time lspci does not say: a WARN, never a FAIL (the
  kernel log's ``kernel.pcie_aer`` judges the report with its time). A bit that ``UEMsk`` masks was
  never signalled (``aer_uncorrectable_masked``, monitor); one unmasked is
  ``aer_uncorrectable`` (check the slot, riser and seating). ``UESvrt`` says which were fatal.
  ``UnsupReq`` alone is no WARN: config reads of absent device numbers during enumeration answer
  with an Unsupported Request that a freshly booted healthy port keeps latched where firmware owns
  AER (linux-pci, "Clearing error bits in the root port post enumeration", 2023-11), and a UR a
  completer logs as an Advisory Non-Fatal error is no failure of the link; the PASS counts it.
* ``pcie.lnksta`` (with :func:`.evidence_fabric.judge_lspci`): FAIL ``device_unreachable`` for a device
  whose config space reads all ones (``(rev ff)``, ``!!! Unknown header type 7f``: it fell off the
  bus, as an Xid 79 GPU does); ERROR ``capabilities_denied`` for devices lspci could not read
  (``Capabilities: <access denied>``: not run as root), which is no reading of their links, never a pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..actions import Action
from ..model import Finding, Status
from ..registry import declare

if TYPE_CHECKING:
    from ..records.pci import LspciRecord, PciDevice

PCIE_AER = declare(
    "pcie.aer", "No PCIe device latched an uncorrectable error",
    """A saved ``lspci -vv`` (as root) shows each device's AER registers: WARN for a device whose
    ``UESta`` has an uncorrectable error bit set (``CmpltTO+``, ``DLP+``, ``MalfTLP+``...), naming the bits
    and which ``UESvrt`` marks fatal; ``aer_uncorrectable_masked`` when ``UEMsk`` masks every one of them
    (never signalled to the OS). The register latches until cleared, so its time is unknown: never a
    FAIL (the kernel log's ``kernel.pcie_aer`` judges reports with their time); PASS when every ``UESta``
    shown is clear or has only ``UnsupReq+`` (an Unsupported Request, which enumeration's config probes
    leave latched on healthy ports).""",
    group=(), component="hardware_health",
    actions={"aer_uncorrectable": Action.CHECK_MECHANICALS, "aer_uncorrectable_masked": Action.MONITOR})


# A plain listing (no register lines) shows a device off the bus only by its ``(rev ff)``, which is also the
# revision some designs give themselves (firesim's Alveo setup: ``04:00.0 Serial controller: Xilinx Corporation
# Device 903f (rev ff)``, a programmed FPGA). There it is read as all ones only for the parts a GPU node's
# readiness rests on, whose revision is never ff: GPUs and network controllers, and NVIDIA or Mellanox parts
# (an NVSwitch lists as a bridge). ``-v``'s ``!!! Unknown header type 7f`` says it of any device.
_REV_FF_CLASSES = ("3D controller", "VGA compatible controller", "Display controller", "Ethernet controller",
                   "Network controller", "Infiniband controller")


def _off_the_bus(record: LspciRecord, device: PciDevice) -> bool:
    """Whether the listing shows ``device``'s config space reading all ones (see ``_REV_FF_CLASSES``)."""
    if not device.config_unreadable or record.verbose:
        return device.config_unreadable
    return (device.device_class.startswith(_REV_FF_CLASSES) or (device.class_id or "")[:2] in ("02", "03")
            or device.vendor_id in ("10de", "15b3") or device.name.startswith(("NVIDIA", "Mellanox")))


def device_findings(record: LspciRecord, source: str) -> Iterator[Finding]:
    """``device_unreachable`` and ``capabilities_denied`` (``pcie.lnksta``), then ``pcie.aer``."""
    for device in record.devices:
        if _off_the_bus(record, device):
            yield Finding("pcie.lnksta", Status.FAIL, f"{source}/{device.address}", "device_unreachable",
                          f"{device.address} {device.name}: its config space reads all ones (the device does not "
                          "answer on the bus)", details={"address": device.address, "class": device.device_class},
                          recommendation="A device that fell off the bus (as Xid 79): drain the node and reboot it; "
                                         "if it stays unreachable, reseat or replace the card or its riser.")
    denied = [d for d in record.devices if d.capabilities_denied and d.downgraded is None]
    if denied:
        yield Finding("pcie.lnksta", Status.ERROR, source, "capabilities_denied",
                      f"{len(denied)} device(s) show 'Capabilities: <access denied>': lspci was not run as root, "
                      "so no link (LnkCap/LnkSta) or AER register was read",
                      observed=len(denied), unit="devices",
                      details={"addresses": [d.address for d in denied][:16]},
                      recommendation="Run `sudo lspci -vvv` and judge that output.")
    yield from _aer_findings(record, source)


_UNSUPPORTED_REQUEST = "UnsupReq"
"""The UESta bit enumeration leaves set on a healthy port (see the module docstring): not judged alone."""


def _aer_findings(record: LspciRecord, source: str) -> Iterator[Finding]:
    shown = [d for d in record.devices if d.ue_status is not None]
    if not shown:
        return
    flagged = [d for d in shown if set(d.ue_status or []) - {_UNSUPPORTED_REQUEST}]
    for device in flagged:
        yield _aer_finding(device, source)
    if not flagged:
        probed = sum(1 for d in shown if d.ue_status)
        yield Finding("pcie.aer", Status.PASS, source, "ok",
                      f"{len(shown)} device(s) with no uncorrectable error in UESta"
                      + (f" ({probed} with only UnsupReq+ latched: an Unsupported Request, as config probes of "
                         "absent functions leave)" if probed else ""),
                      observed=len(shown), unit="devices")


def _aer_finding(device: PciDevice, source: str) -> Finding:
    bits = device.ue_status or []
    fatal = [b for b in bits if b in device.ue_fatal]
    unmasked = [b for b in bits if b not in device.ue_masked and b != _UNSUPPORTED_REQUEST]
    code = "aer_uncorrectable" if unmasked else "aer_uncorrectable_masked"
    what = ", ".join(f"{b}+" + (" (fatal)" if b in fatal else "") for b in bits)
    return Finding("pcie.aer", Status.WARN, f"{source}/{device.address}", code,
                   f"{device.address} {device.name}: uncorrectable error status {what}"
                   + ("" if unmasked else " (masked in UEMsk: never signalled)"),
                   observed=len(bits), unit="bits",
                   details={"address": device.address, "class": device.device_class, "ue_status": bits,
                            "fatal": fatal, "masked": [b for b in bits if b in device.ue_masked]},
                   recommendation="Latched since the register was last cleared, time unknown: read the kernel "
                                  "log's AER reports for this address (kernel.pcie_aer); check the slot, riser and "
                                  "seating if they recur.")
