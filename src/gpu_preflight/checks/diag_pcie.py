"""PCIe links of this node's GPUs and NICs: trained width/speed (lspci) and upstream limits (kernel log)."""

from __future__ import annotations

from collections.abc import Iterator

from ..actions import Action
from ..model import Finding, Status
from ..records.tools import PcieFacts
from ..registry import CheckContext, check
from .evidence import judge_record
from .verdicts import not_run, unreadable

LNKSTA_ACTIONS = {"width_downgraded": Action.CHECK_MECHANICALS, "speed_downgraded": Action.CHECK_MECHANICALS,
                  "device_unreachable": Action.REBOOT_NODE}
"""A link trained below its capability is seated, cabled or slotted badly (reseat the card or
riser): the same fault gpu.pcie calls ``link_downtrained``. A device whose config space reads all
ones fell off the bus (as Xid 79: reboot). Also applied to saved lspci output."""


@check("pcie.lnksta", needs=("pcie",), tags=("diagnostics",), group=(), component="hardware_health",
       actions=LNKSTA_ACTIONS)
def lnksta(ctx: CheckContext) -> Iterator[Finding]:
    """GPU and NIC PCIe links trained to the width (and, for NICs, the speed) they are capable of.

    Runs ``lspci -vvv -nn`` and applies the ``lspci`` rules to NVIDIA GPUs and network
    controllers: FAIL for a link narrower than its capability (``LnkSta`` width below
    ``LnkCap``: bandwidth cut proportionally), WARN for a NIC trained at a lower speed; a
    GPU's speed is not judged (idle GPUs drop to 2.5 GT/s); FAIL for a device whose config
    space reads all ones (it fell off the bus). The same output's AER registers give ``pcie.aer``
    (:mod:`.evidence_pcie`). SKIP when lspci is not installed, lists no GPU or NIC, or hides link
    capabilities (run as root).
    """
    facts: PcieFacts = ctx.fact("pcie")
    if facts.lspci is None or facts.reason:
        yield ctx.finding(Status.SKIP, ctx.host, "not_run", f"PCIe links not read: {facts.reason}")
        return
    if (finding := not_run(ctx.check_id, ctx.host, facts.lspci)) is not None:
        yield finding
        return
    if facts.record is None:
        yield unreadable(ctx.check_id, ctx.host, facts.lspci, facts.parse_error)
        return
    if not facts.record.devices:
        yield ctx.finding(Status.SKIP, ctx.host, "no_devices",
                          f"lspci lists {facts.devices_listed} device(s), none an NVIDIA GPU or a network controller")
        return
    if all(d.capabilities_denied for d in facts.record.devices):  # a saved paste so is an ERROR; here, a setting
        yield ctx.finding(Status.SKIP, ctx.host, "capabilities_denied",
                          "lspci shows 'Capabilities: <access denied>': run as root to judge PCIe links")
        return
    for finding in judge_record("lspci", facts.record, ctx.config, source=ctx.host):
        finding.details.setdefault("artifact", facts.lspci.artifact_file)
        yield finding


LIMITED_BY_ACTIONS = {"link_limited": Action.CHECK_MECHANICALS}
"""A device capped by a slower upstream link sits in the wrong slot or behind the wrong switch:
a visit to the node (or its BIOS), as gpu.pcie's ``link_gen_limited``."""


@check("pcie.limited_by", needs=("pcie",), tags=("diagnostics",), group=(), component="hardware_health",
       actions=LIMITED_BY_ACTIONS)
def limited_by(ctx: CheckContext) -> Iterator[Finding]:
    """The kernel reports no device capped by a slower upstream PCIe link.

    Reads the kernel log (/dev/kmsg, dmesg, journalctl, or ``--kernel-log FILE``) for
    ``... available PCIe bandwidth, limited by <speed> x<width> link at <bridge>`` lines and
    applies the ``dmesg`` rule: WARN for each such device (a gen4 switch under a gen5 GPU,
    a slot or BIOS setting). SKIP when the kernel log cannot be read.
    """

    facts: PcieFacts = ctx.fact("pcie")
    if facts.kernel_log_source is None:
        yield ctx.finding(Status.SKIP, ctx.host, "log_unreadable",
                          f"PCIe limits not read: {facts.kernel_log_reason or 'no kernel log'}")
        return
    from ..records.dmesg import DmesgRecord

    record = DmesgRecord(pcie_limits=list(facts.limits))
    judged = [f for f in judge_record("dmesg", record, ctx.config, source=ctx.host) if f.check_id == ctx.check_id]
    yield from judged
    if not judged:
        yield ctx.finding(Status.PASS, ctx.host, "ok",
                          f"no PCIe 'limited by' message in the kernel log ({facts.kernel_log_source})"
                          if not facts.limited_lines else
                          f"{len(facts.limited_lines)} 'limited by' line(s), none a PCIe bandwidth limit",
                          observed=0, details={"unparsed_lines": facts.limited_lines[:20]})
