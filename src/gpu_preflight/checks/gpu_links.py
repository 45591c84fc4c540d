"""GPU links: the PCIe link to the host and NVLink between GPUs."""

from __future__ import annotations

import re
from collections.abc import Iterator

import msgspec

from ..actions import Action
from ..config.fields import setting, settings_block, settings_of
from ..model import Finding, Status
from ..records import GpuFacts, GpuRecord
from ..registry import CheckContext, check
from .common import is_number, not_read, per_gpu

PCIE_ACTIONS = {
    "link_downtrained": Action.CHECK_MECHANICALS,
    "link_narrow": Action.CHECK_MECHANICALS,
    "link_gen_limited": Action.CHECK_MECHANICALS,
    "replays_high": Action.CHECK_MECHANICALS,
    "link_narrow_at_idle": Action.MONITOR,
}
"""A link below its width or generation, or one that replays, is a seating, riser, retimer or
slot fault: DCGM's advice for PCIe replays is "Reconnect PCIe card" (DCGM_FR_PCI_REPLAY_RATE).
A link narrowed at idle on a model that does so is re-checked under load."""


@settings_block("gpu", order=70)
class LinkSettings(msgspec.Struct):
    """What the GPU's PCIe link and NVLinks should be (gpu.pcie, gpu.nvlink; the perf floors read the
    PCIe generation)."""

    pcie_expected_gen: int | None = setting(
        None, "PCIe generation the GPU's link should reach (profile value); lower max link gen WARNs.", min=1, max=7
    )
    pcie_expected_width: int | None = setting(
        None, "PCIe link width the GPU should have (profile value); a narrower link WARNs.", "lanes", min=1, max=32
    )
    pcie_width_drops_at_idle: bool = setting(
        False, "This GPU model narrows its PCIe link when idle (A10G, T4): a narrower link at idle WARNs "
               "instead of FAILing; under load it still FAILs.")
    pcie_replay_warn: int = setting(1000, "PCIe replay counter above this WARNs (a marginal link).", "replays",
        min=0, max=10**12)
    nvlink_expected_links: int | None = setting(
        None, "Active NVLink links each GPU must have (profile value); fewer FAIL. Unset: any down link FAILs.",
        min=0, max=64
    )
    nvlink_crc_errors_warn: int = setting(
        100, "NVLink CRC (flit + data) errors per GPU above this WARN.", "errors", min=0, max=10**12
    )
    nvlink_recovery_errors_warn: int = setting(
        0, "NVLink recovery events per GPU above this WARN (links retraining).", "events", min=0, max=10**12
    )


@check("gpu.pcie", needs=("gpu",), group="gpu_links", component="hardware_health", core=True,
       actions=PCIE_ACTIONS)
@per_gpu
def pcie_link(ctx: CheckContext, gpu: GpuRecord, subject: str) -> Iterator[Finding]:
    """The PCIe link runs at full width and can reach the expected generation.

    FAIL when the current link width is below the link's maximum (a downtrained link:
    bad riser, slot or retimer) — a WARN instead for GPU models that narrow their link at
    idle (``gpu.pcie_width_drops_at_idle``, set for the A10G) while the GPU is idle.
    WARN when the link's maximum generation is below the profile's
    ``gpu.pcie_expected_gen`` (a slower switch or slot limits it), when the width is below
    ``gpu.pcie_expected_width``, and when the replay counter exceeds ``gpu.pcie_replay_warn``.
    The *current* generation is reported, not judged: idle GPUs legitimately drop to gen1
    to save power.
    """
    cfg = settings_of(ctx.config, LinkSettings)
    width, max_width = gpu.pcie_width_current, gpu.pcie_width_max
    if not is_number(width) or not is_number(max_width):
        yield not_read(ctx, subject, "PCIe link width", width if not is_number(width) else max_width)
        return
    link = {"gen_current": gpu.pcie_gen_current, "gen_max": gpu.pcie_gen_max,
            "gen_gpu_max": gpu.pcie_gen_gpu_max, "width_current": width, "width_max": max_width,
            "replay_counter": gpu.pcie_replay_counter}
    flagged = False
    idle = isinstance(gpu.clock_event_reasons, int) and bool(gpu.clock_event_reasons & 0x1)
    if width < max_width and idle and cfg.pcie_width_drops_at_idle:
        flagged = True
        yield ctx.finding(Status.WARN, subject, "link_narrow_at_idle",
                          f"{gpu.label}: PCIe link x{width} of x{max_width} while idle", observed=width,
                          expected=max_width, unit="lanes", details=link,
                          recommendation="This GPU model narrows its link at idle: re-check under load; if it "
                                         "stays narrow, reseat the GPU or its riser.")
    elif width < max_width:
        flagged = True
        yield ctx.finding(Status.FAIL, subject, "link_downtrained",
                          f"{gpu.label}: PCIe link x{width}, capable of x{max_width}", observed=width,
                          expected=max_width, unit="lanes", details=link,
                          recommendation="Reseat the GPU or its riser/retimer; check `lspci -vvv` LnkSta. "
                                         "Host-device bandwidth is cut proportionally.")
    elif cfg.pcie_expected_width and max_width < cfg.pcie_expected_width:
        flagged = True
        yield ctx.finding(Status.WARN, subject, "link_narrow",
                          f"{gpu.label}: PCIe link x{max_width}, expected x{cfg.pcie_expected_width}",
                          observed=max_width, expected=cfg.pcie_expected_width, unit="lanes", details=link,
                          recommendation="The slot or riser provides fewer lanes than this GPU model expects.")
    gen_max = gpu.pcie_gen_max
    if cfg.pcie_expected_gen and is_number(gen_max) and gen_max < cfg.pcie_expected_gen:
        flagged = True
        yield ctx.finding(Status.WARN, subject, "link_gen_limited",
                          f"{gpu.label}: PCIe link limited to gen{gen_max}, expected gen{cfg.pcie_expected_gen}",
                          observed=gen_max, expected=cfg.pcie_expected_gen, details=link,
                          recommendation="A switch, slot or BIOS setting limits the link generation: "
                                         "check `dmesg | grep 'limited by'` and the BIOS PCIe settings.")
    replays = gpu.pcie_replay_counter
    if is_number(replays) and replays > cfg.pcie_replay_warn:
        flagged = True
        yield ctx.finding(Status.WARN, subject, "replays_high",
                          f"{gpu.label}: {replays} PCIe replays (limit {cfg.pcie_replay_warn})", observed=replays,
                          expected=f"<= {cfg.pcie_replay_warn}", unit="replays", details=link,
                          recommendation="A marginal PCIe link: reseat the GPU; replace the riser if it grows.")
    if not flagged:
        yield ctx.finding(Status.PASS, subject, "ok",
                          f"{gpu.label}: PCIe gen{gpu.pcie_gen_current}/gen{gen_max} x{width}/x{max_width}",
                          observed=link)


NVLINK_ACTIONS = {
    "nvlink_down": Action.RESET_GPU,
    "nvlink_missing": Action.RESET_GPU,
    "nvlink_recovery": Action.RESET_GPU,
    "nvlink_crc_errors": Action.MONITOR,
}
"""NVIDIA's NVLink error workflow (Xid 74, WORKFLOW_NVLINK_ERR) starts with a GPU reset, which
retrains the links; CRC errors below a failure are watched (DCGM_FR_NVLINK_ERROR_THRESHOLD's advice:
"Monitor the NVLink. It can still perform workload")."""


PCIE_CARD_NAMES = (r"\bPCIe\b", r"\bNVL\b", r"\bGeForce\b", r"\bQuadro\b", r"\bTITAN\b", r"\bRTX\b")
"""NVML names that say the GPU is a PCIe card (``NVIDIA H100 PCIe``, ``A100-PCIE-40GB``, ``H100 NVL``,
``NVIDIA RTX A6000``, GeForce/Quadro/TITAN): NVLink on such a card is an optional bridge to one
neighbour, which joins only some of the card's ports (two H100 PCIe bridged use 12 of 18), so the
other ports are inactive by design. A name that says none of this (SXM, HGX, or just ``A40``) is
not taken for a card: its inactive links stay a fault."""


def pcie_card(name: object) -> bool:
    """Whether a GPU's product name says it is a PCIe card (:data:`PCIE_CARD_NAMES`)."""
    return isinstance(name, str) and any(re.search(p, name, re.IGNORECASE) for p in PCIE_CARD_NAMES)


@check("gpu.nvlink", needs=("gpu",), group="gpu_links", component="hardware_health", core=True,
       actions=NVLINK_ACTIONS)
@per_gpu
def nvlink(ctx: CheckContext, gpu: GpuRecord, subject: str) -> Iterator[Finding]:
    """Every NVLink is up and error counters are low.

    On GPUs with NVLink: FAIL when any link is down, or fewer links are active than the
    profile's ``gpu.nvlink_expected_links``. WARN when CRC (flit + data) errors exceed
    ``gpu.nvlink_crc_errors_warn`` or recovery events exceed
    ``gpu.nvlink_recovery_errors_warn``. SKIP on GPUs without NVLink — unless the profile
    expects links, in which case a GPU without any FAILs. The one exception is a node that
    shows a single GPU (a one-GPU VM or pod on an HGX board, where the hypervisor hides
    NVLink): NVLink carries traffic between GPUs of one node, so with no peer there is
    nothing for it to do and nothing to judge — SKIP ``single_gpu``, saying so.

    A PCIe card (:func:`pcie_card`) is judged as a bridged card: inactive links beside active ones
    are the ports its bridge does not join, PASS ``bridged_pcie`` ("N of M links active") unless
    the profile's ``gpu.nvlink_expected_links`` asks for more active links; with no such profile,
    every link inactive is a card with no bridge fitted, not NVLink-connected at all: SKIP
    ``no_bridge``. A GPU whose name does not say it is a card (SXM, unknown) keeps the FAIL.
    """
    cfg = settings_of(ctx.config, LinkSettings)
    links = gpu.nvlinks
    if not isinstance(links, list):
        facts: GpuFacts = ctx.fact("gpu")
        if cfg.nvlink_expected_links and len(facts.gpus) == 1:
            yield ctx.finding(Status.SKIP, subject, "single_gpu",
                              f"{gpu.label}: the only GPU on this node and no NVLink reported: NVLink connects GPUs of "
                              f"one node, so the {cfg.nvlink_expected_links} expected links are not judged",
                              observed=0, expected=cfg.nvlink_expected_links, unit="links")
        elif cfg.nvlink_expected_links:
            yield ctx.finding(Status.FAIL, subject, "nvlink_missing",
                              f"{gpu.label}: no NVLink reported, expected {cfg.nvlink_expected_links} links",
                              observed=0, expected=cfg.nvlink_expected_links, unit="links",
                              recommendation="Check the fabric manager and `nvidia-smi nvlink -s`.")
        else:
            yield not_read(ctx, subject, "NVLink", links)
        return
    down = [link.link for link in links if not link.active]
    active = len(links) - len(down)
    totals = {name: sum(int(v) for link in links if is_number(v := link.errors.get(name)))
              for name in ("replay", "recovery", "crc_flit", "crc_data", "ecc_data")}
    details = {"links": len(links), "active": active, "down": down, "errors": totals}
    bridged = bool(down) and pcie_card(gpu.name)
    if bridged and not active and not cfg.nvlink_expected_links:
        yield ctx.finding(Status.SKIP, subject, "no_bridge",
                          f"{gpu.label}: every NVLink inactive on a PCIe card: no NVLink bridge is fitted, so it is "
                          "not NVLink-connected; not judged", observed=0, unit="links", details=details)
        return
    flagged = False
    if (down and not bridged) or (cfg.nvlink_expected_links and active < cfg.nvlink_expected_links):
        flagged = True
        yield ctx.finding(Status.FAIL, subject, "nvlink_down",
                          f"{gpu.label}: {active} NVLink(s) active, down: {down or 'none'}", observed=active,
                          expected=cfg.nvlink_expected_links or len(links), unit="links", details=details,
                          recommendation="Reset the GPU; if links stay down, drain the node and check the "
                                         "NVSwitch tray / fabric manager logs.")
    crc = totals["crc_flit"] + totals["crc_data"]
    if crc > cfg.nvlink_crc_errors_warn:
        flagged = True
        yield ctx.finding(Status.WARN, subject, "nvlink_crc_errors",
                          f"{gpu.label}: {crc} NVLink CRC errors", observed=crc,
                          expected=f"<= {cfg.nvlink_crc_errors_warn}", unit="errors", details=details,
                          recommendation="Watch the counters; rising CRC errors precede link failures.")
    if totals["recovery"] > cfg.nvlink_recovery_errors_warn:
        flagged = True
        yield ctx.finding(Status.WARN, subject, "nvlink_recovery",
                          f"{gpu.label}: {totals['recovery']} NVLink recovery events", observed=totals["recovery"],
                          expected=f"<= {cfg.nvlink_recovery_errors_warn}", unit="events", details=details,
                          recommendation="Links are retraining: reset the GPU and watch for recurrence.")
    if not flagged and bridged:
        yield ctx.finding(Status.PASS, subject, "bridged_pcie",
                          f"{gpu.label}: {active} of {len(links)} links active (bridged PCIe card)",
                          observed=active, unit="links", details=details)
    elif not flagged:
        yield ctx.finding(Status.PASS, subject, "ok", f"{gpu.label}: {active} NVLink(s) up",
                          observed=active, unit="links", details=details)
