"""GPU inventory: is NVML usable, are all GPUs there, is the software and mode right."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Literal

import msgspec

from ..actions import Action
from ..config.fields import setting, settings_block, settings_of
from ..ids import INVENTORY_COUNT_ID, NVML_ID, NVML_UNREADABLE_CODE
from ..model import NA, Finding, Status
from ..records import GpuFacts, GpuRecord
from ..registry import CheckContext, check
from .common import (
    GPUS_EXTRA_ADVICE,
    GPUS_MISSING_ADVICE,
    gpu_subject,
    gpu_targets,
    impossible,
    is_number,
    not_read,
    per_gpu,
    unreadable_core,
    version_below,
)

RESET = "Reset the GPU (nvidia-smi -r) or reboot the node; if it recurs, drain the node and RMA the GPU."


NVML_ACTIONS = {"gpu_lost": Action.REBOOT_NODE, "driver_unusable": Action.REBOOT_NODE}
"""A GPU the driver lost (fallen off the bus, hung) does not come back with ``nvidia-smi -r``:
NVIDIA's resolution for Xid 79 is RESTART_BM (reboot the node), and for a GPU the driver could not
bring up (probe failure) a power cycle. The Xid and driver-message catalogue says the same."""


@check(NVML_ID, needs=("gpu",), group="gpu_detection", component="hardware_health", actions=NVML_ACTIONS)
def nvml_access(ctx: CheckContext) -> Iterator[Finding]:
    """NVML is usable and every GPU answers.

    SKIP when there is no NVIDIA driver stack and no NVIDIA GPU on the PCI bus (a CPU
    node). FAIL when NVIDIA GPUs sit on the PCI bus but NVML cannot be initialised
    (driver not loaded, library missing), and for every GPU that NVML reports lost or
    that hung an NVML call. ERROR for a GPU that answered none of its core readings
    (name, UUID, memory total, temperature: every other check then SKIPs it, and a GPU we
    know nothing about is not a healthy one; ``serve`` reads this finding as unknown health),
    and when NVML refused readings for other reasons (permissions, unknown errors): those
    readings were not judged.
    """
    facts: GpuFacts = ctx.fact("gpu")
    if not facts.available:
        pci = facts.pci_gpus if isinstance(facts.pci_gpus, list) else []
        if pci:
            yield ctx.finding(Status.FAIL, ctx.host, "driver_unusable",
                              f"{len(pci)} NVIDIA GPU(s) on the PCI bus but NVML is unusable: {facts.reason}",
                              observed=facts.nvml_error, expected="NVML initialised",
                              recommendation="Load or reinstall the NVIDIA driver (lsmod | grep nvidia; "
                                             "dmesg | grep -i nvrm) and make libnvidia-ml.so.1 visible.",
                              details={"pci_gpus": pci})
        else:
            yield ctx.finding(Status.SKIP, ctx.host, "no_nvml", f"NVML not available: {facts.reason}",
                              observed=facts.nvml_error)
        return
    ok = True
    for gpu in facts.gpus:
        subject = gpu_subject(ctx, gpu)
        if gpu.lost:
            ok = False
            yield ctx.finding(Status.FAIL, subject, "gpu_lost", f"{gpu.label}: {gpu.lost}",
                              observed=gpu.lost, expected="GPU answers NVML", recommendation=RESET)
        elif (missing := unreadable_core(gpu)) is not None:
            ok = False
            yield _unreadable(ctx, subject, gpu, missing, facts.driver_version)
        elif gpu.call_errors:
            ok = False
            yield ctx.finding(Status.ERROR, subject, "nvml_errors",
                              f"{gpu.label}: NVML refused {len(gpu.call_errors)} reading(s); they were not judged",
                              observed=gpu.call_errors,
                              recommendation="Run as root or check driver health (nvidia-smi -q); "
                                             "readings NVML refuses cannot be vouched for.")
    if ok:
        yield ctx.finding(Status.PASS, ctx.host, "ok",
                          f"NVML {facts.nvml_version} answered for {len(facts.gpus)} GPU(s) ({facts.source})",
                          observed=len(facts.gpus))


def _unreadable(ctx: CheckContext, subject: str, gpu: GpuRecord, missing: dict[str, str],
                driver: object) -> Finding:
    reasons = sorted(set(missing.values()))
    driver_note = "; the driver version was not read either" if isinstance(driver, NA) else ""
    return ctx.finding(Status.ERROR, subject, NVML_UNREADABLE_CODE,
                       f"{gpu.label}: NVML answered none of its core readings ({', '.join(missing)}: "
                       f"{', '.join(reasons)}){driver_note}; nothing about this GPU could be judged",
                       observed=missing, expected="the GPU's name, UUID, memory total and temperature",
                       details={"driver_version": str(driver), "call_errors": gpu.call_errors},
                       recommendation="Check the driver and the GPU with nvidia-smi -q (a GPU that answers no "
                                      "reading is broken or not really there); reset it or drain the node.")


COUNT_ACTIONS = {"gpus_missing": Action.REBOOT_NODE, "gpus_unusable": Action.REBOOT_NODE,
                 "gpu_not_in_nvml": Action.REBOOT_NODE}
"""A GPU missing from a node is one that fell off the bus or failed to initialise (Xid 79,
``RmInitAdapter failed``): reboot first (RESTART_BM); a GPU that stays missing is then caught again,
and the history's repeat-offender finding escalates it. A wrong or extra model is a scheduling
matter, not an operator action on the node."""


@settings_block("gpu", order=20)
class InventorySettings(msgspec.Struct):
    """What the gpu.inventory.* checks expect of the node's GPUs (the count is the config layer's: ``GpuConfig``)."""

    expected_model: str | None = setting(
        None, "Substring the GPU name must contain (e.g. 'H100'); unset: not enforced."
    )
    min_driver_version: str = setting("535.0", "Oldest acceptable NVIDIA driver (dotted version).")
    min_cuda_driver_version: str = setting(
        "12.0", "Oldest acceptable CUDA version the driver supports (as nvidia-smi shows it)."
    )
    expect_persistence_mode: bool = setting(
        True, "Persistence mode should be on (otherwise every CUDA start re-initialises the GPU)."
    )
    mig_mode: Literal["enabled", "disabled", "any"] = setting(
        "disabled", "Expected MIG mode; a mismatch FAILs (training needs whole GPUs unless MIG is planned)."
    )
    allowed_compute_modes: list[str] = setting(
        ["default", "exclusive_process"],
        "Compute modes that allow training; others (e.g. 'prohibited') FAIL.",
    )


@check(INVENTORY_COUNT_ID, needs=("gpu",), group="gpu_detection", component="hardware_health",
       blocking_codes=("no_gpus",), actions=COUNT_ACTIONS)
def gpu_count(ctx: CheckContext) -> Iterator[Finding]:
    """The node has the GPUs it should: count (and model, if configured) as expected.

    FAIL when fewer usable GPUs than ``gpu.expected_count`` are found, when a GPU on the
    PCI bus is missing from NVML (or none is usable although the bus shows some), or when
    a GPU is not of ``gpu.expected_model``. WARN when no GPU is found and no count is
    configured (a node without GPUs is never called healthy), when more GPUs than
    expected are found, or when models are mixed.
    """
    cfg = settings_of(ctx.config, InventorySettings)
    facts: GpuFacts = ctx.fact("gpu")
    expected = ctx.config.gpu.expected_count
    usable = [g for g in facts.gpus if not g.lost] if facts.available else []
    found = len(usable)
    why = "" if facts.available else f" ({facts.reason})"
    pci = facts.pci_gpus
    if not facts.available and isinstance(pci, list) and pci and expected is None:
        yield ctx.finding(Status.FAIL, ctx.host, "gpus_unusable",
                          f"{len(pci)} NVIDIA GPU(s) on the PCI bus, none usable{why}", observed=0,
                          expected=len(pci),
                          unit="GPUs", details={"pci_gpus": pci},
                          recommendation="Load or reinstall the NVIDIA driver; drain the node until the GPUs are "
                                         "usable.")
    elif expected is not None and found < expected:
        yield ctx.finding(Status.FAIL, ctx.host, "gpus_missing",
                          f"{found} usable GPU(s), expected {expected}{why}", observed=found, expected=expected,
                          unit="GPUs", recommendation=GPUS_MISSING_ADVICE)
    elif expected is not None and found > expected:
        yield ctx.finding(Status.WARN, ctx.host, "gpus_extra",
                          f"{found} GPUs, expected {expected}", observed=found, expected=expected, unit="GPUs",
                          recommendation=GPUS_EXTRA_ADVICE)
    elif expected is None and found == 0:
        yield ctx.finding(Status.WARN, ctx.host, "no_gpus",
                          f"no usable NVIDIA GPU on this node{why}: it cannot run GPU training", observed=0,
                          unit="GPUs", recommendation="Run on a GPU node, or pass --expect-gpus 0 to check a "
                                                      "CPU-only node deliberately.")
    else:
        yield ctx.finding(Status.PASS, ctx.host, "ok", f"{found} GPU(s) found",
                          observed=found, expected=expected, unit="GPUs")
    if isinstance(pci, list) and facts.available and len(pci) > len(facts.gpus):
        yield ctx.finding(Status.FAIL, ctx.host, "gpu_not_in_nvml",
                          f"{len(pci)} NVIDIA GPUs on the PCI bus but NVML sees {len(facts.gpus)}",
                          observed=len(facts.gpus), expected=len(pci), unit="GPUs", details={"pci_gpus": pci},
                          recommendation="A GPU is present but not initialised by the driver: check dmesg for "
                                         "Xid 79 / RmInitAdapter failures; reboot, then RMA if it persists.")
    names = [g.name for g in usable if isinstance(g.name, str)]
    if cfg.expected_model:
        wrong = sorted({n for n in names if cfg.expected_model.lower() not in n.lower()})
        if wrong:
            yield ctx.finding(Status.FAIL, ctx.host, "wrong_model",
                              f"GPU model {', '.join(wrong)} is not {cfg.expected_model}", observed=wrong,
                              expected=cfg.expected_model, recommendation="Schedule onto the intended node type.")
    if len(set(names)) > 1:
        yield ctx.finding(Status.WARN, ctx.host, "mixed_models",
                          f"mixed GPU models: {dict(Counter(names))}", observed=dict(Counter(names)),
                          recommendation="Distributed training runs at the pace of the slowest GPU model.")


@check("gpu.inventory.driver", needs=("gpu",), group="gpu_detection", component="software_stack")
def driver_version(ctx: CheckContext) -> Iterator[Finding]:
    """The NVIDIA driver and its CUDA version are at least the configured minimums.

    FAIL below ``gpu.min_driver_version`` or ``gpu.min_cuda_driver_version`` (a container
    built for a newer CUDA will not start); SKIP without NVML.
    """
    cfg = settings_of(ctx.config, InventorySettings)
    facts: GpuFacts = ctx.fact("gpu")
    if not facts.available:
        yield ctx.finding(Status.SKIP, ctx.host, "no_nvml", f"no driver to check: {facts.reason}")
        return
    for what, actual, minimum in (("driver", facts.driver_version, cfg.min_driver_version),
                                  ("CUDA driver version", facts.cuda_driver_version, cfg.min_cuda_driver_version)):
        if not isinstance(actual, str):
            yield not_read(ctx, ctx.host, what, actual)
        elif version_below(actual, minimum):
            yield ctx.finding(Status.FAIL, ctx.host, f"{what.split()[0].lower()}_too_old",
                              f"{what} {actual} is older than the required {minimum}", observed=actual,
                              expected=f">= {minimum}", recommendation="Upgrade the NVIDIA driver on this node "
                                                                      "(keep the fleet on one driver branch).")
        else:
            yield ctx.finding(Status.PASS, ctx.host, "ok", f"{what} {actual}",
                              observed=actual, expected=f">= {minimum}")


IDENTITY_ACTIONS = {"duplicate_uuid": Action.REBOOT_NODE}
"""Two GPUs answering with one UUID is NVML's inventory gone wrong, which a reboot rebuilds (the
finding's own advice); a VBIOS mismatch is a flash to plan, not a routing decision."""


@settings_block("gpu", order=50)
class MemorySizeSettings(msgspec.Struct):
    """The total memory a working GPU can report (gpu.inventory.identity)."""

    memory_total_min_gib: float = setting(
        0.25, "A GPU reporting less total memory than this gives an impossible reading (0 bytes: a broken "
              "answer): ERROR naming it. Profiles set the model's size.", "GiB", min=0, max=1 << 20
    )
    memory_total_max_gib: float = setting(
        1024.0, "A GPU reporting more total memory than this gives an impossible reading: ERROR naming it.",
        "GiB", above=0, max=1 << 20
    )


@check("gpu.inventory.identity", needs=("gpu",), group="gpu_detection", component="hardware_health",
       actions=IDENTITY_ACTIONS)
def identity(ctx: CheckContext) -> Iterator[Finding]:
    """Each GPU's identity (UUID, serial, PCI bus id, VBIOS) is readable and consistent.

    Reports the identity of every GPU (history and RMA tracking key on UUID and serial).
    WARN when GPUs of the same model run different VBIOS versions, FAIL when two GPUs
    report the same UUID (a broken inventory). ERROR when two GPUs of the node report the
    same PCI bus id or serial (an Xid names its GPU by bus id: it would be blamed on the
    wrong one; an all-zero serial is a placeholder, not a serial), and when a GPU's total
    memory is outside ``gpu.memory_total_min_gib`` to ``gpu.memory_total_max_gib``.
    """
    gpus, skipped = gpu_targets(ctx, "gpu.inventory.identity")
    yield from skipped
    uuids = Counter(g.uuid for g in gpus if isinstance(g.uuid, str))
    shared = [(what, key, _shared(gpus, key)) for what, key in (("PCI bus id", _bus_id), ("serial", _serial))]
    vbios_by_model: dict[str, set[str]] = {}
    for gpu in gpus:
        if isinstance(gpu.name, str) and isinstance(gpu.vbios, str):
            vbios_by_model.setdefault(gpu.name, set()).add(gpu.vbios)
    for gpu in gpus:
        ident = {"name": gpu.name, "uuid": gpu.uuid, "serial": gpu.serial, "pci_bus_id": gpu.pci_bus_id,
                 "vbios": gpu.vbios, "board_part_number": gpu.board_part_number}
        subject = gpu_subject(ctx, gpu)
        if isinstance(gpu.uuid, str) and uuids[gpu.uuid] > 1:  # one GPU listed twice: its bus id and serial too
            yield ctx.finding(Status.FAIL, subject, "duplicate_uuid",
                              f"{gpu.label} shares UUID {gpu.uuid} with another GPU", observed=ident,
                              recommendation="NVML inventory is inconsistent: reboot; escalate if it persists.")
            yield from _memory_total(ctx, gpu, subject)
            continue
        problems = [*_duplicates(ctx, gpu, subject, shared, ident), *_memory_total(ctx, gpu, subject)]
        if not problems and not isinstance(gpu.uuid, str):
            yield not_read(ctx, subject, "UUID", gpu.uuid)
        elif not problems:
            yield ctx.finding(Status.PASS, subject, "ok",
                              f"{gpu.name} {gpu.uuid} at {gpu.pci_bus_id}, VBIOS {gpu.vbios}", observed=ident)
        yield from problems
    for model, versions in sorted(vbios_by_model.items()):
        if len(versions) > 1:
            yield ctx.finding(Status.WARN, ctx.host, "vbios_mismatch",
                              f"{model} GPUs run different VBIOS versions: {', '.join(sorted(versions))}",
                              observed=sorted(versions), expected="one VBIOS per model",
                              recommendation="Flash all GPUs of the node to the same VBIOS.")


def _bus_id(gpu: GpuRecord) -> str | None:
    return gpu.pci_bus_id.upper() if isinstance(gpu.pci_bus_id, str) else None


def _serial(gpu: GpuRecord) -> str | None:
    """The serial, unless unread or a placeholder (boards without one read all zeros)."""
    return gpu.serial if isinstance(gpu.serial, str) and gpu.serial.strip("0 ") else None


def _shared(gpus: Sequence[GpuRecord], key: Callable[[GpuRecord], str | None]) -> dict[str, list[str]]:
    """Values of ``key`` that more than one GPU reports, with the GPUs that report each."""
    holders: dict[str, list[str]] = {}
    for gpu in gpus:
        value = key(gpu)
        if value is not None:
            holders.setdefault(value, []).append(gpu.label)
    return {value: labels for value, labels in holders.items() if len(labels) > 1}


Shared = Sequence[tuple[str, Callable[[GpuRecord], "str | None"], Mapping[str, list[str]]]]


def _duplicates(ctx: CheckContext, gpu: GpuRecord, subject: str, shared: Shared,
                ident: Mapping[str, object]) -> Iterator[Finding]:
    """ERROR per identifier this GPU shares with another GPU of the node (no two GPUs can)."""
    for what, key, values in shared:
        value = key(gpu)
        if value is not None and value in values:
            others = [label for label in values[value] if label != gpu.label]
            yield ctx.finding(Status.ERROR, subject, "impossible_reading",
                              f"{gpu.label} reports {what} {value}, as {', '.join(others)} does; no two GPUs "
                              "can, so its findings cannot be told apart from theirs", observed=ident,
                              expected=f"a {what} no other GPU of the node reports",
                              recommendation="NVML's inventory is inconsistent (an Xid naming this bus id "
                                             "would be blamed on the wrong GPU): reboot; escalate if it persists.")


def _memory_total(ctx: CheckContext, gpu: GpuRecord, subject: str) -> Iterator[Finding]:
    cfg = settings_of(ctx.config, MemorySizeSettings)
    total = gpu.memory_total_bytes
    if is_number(total):
        wrong = impossible(ctx, subject, f"{gpu.label}: memory total", total / 2**30,
                           cfg.memory_total_min_gib, cfg.memory_total_max_gib, "GiB")
        if wrong is not None:
            yield wrong


@check("gpu.inventory.persistence", needs=("gpu",), group="gpu_detection", component="software_stack")
@per_gpu
def persistence(ctx: CheckContext, gpu: GpuRecord, subject: str) -> Iterator[Finding]:
    """Persistence mode is on, so the driver stays initialised between jobs.

    WARN when off and ``gpu.expect_persistence_mode`` is true: every CUDA start then pays
    the GPU initialisation, and idle GPUs may lose state.
    """
    mode = gpu.persistence_mode
    if not isinstance(mode, bool):
        yield not_read(ctx, subject, "persistence mode", mode)
    elif not mode and settings_of(ctx.config, InventorySettings).expect_persistence_mode:
        yield ctx.finding(Status.WARN, subject, "persistence_off",
                          f"{gpu.label}: persistence mode is off", observed="off", expected="on",
                          recommendation="Run nvidia-persistenced (or nvidia-smi -pm 1).")
    else:
        yield ctx.finding(Status.PASS, subject, "ok",
                          f"{gpu.label}: persistence mode {'on' if mode else 'off'}",
                          observed="on" if mode else "off")


MIG_ACTIONS = {"mig_mismatch": Action.RESET_GPU, "mig_pending": Action.RESET_GPU}
"""A MIG mode change applies at the next GPU reset (``nvidia-smi -mig`` marks it pending)."""


@check("gpu.inventory.mig", needs=("gpu",), group="gpu_detection", component="software_stack",
       actions=MIG_ACTIONS)
@per_gpu
def mig_mode(ctx: CheckContext, gpu: GpuRecord, subject: str) -> Iterator[Finding]:
    """MIG mode is as expected (``gpu.mig_mode``; off for training by default).

    FAIL when the current MIG mode differs from the expected one (the GPU is split into
    instances a training job cannot use as a whole, or the reverse); WARN when a MIG
    change is pending a GPU reset. SKIP on GPUs without MIG support.
    """
    want = settings_of(ctx.config, InventorySettings).mig_mode
    current, pending = gpu.mig_current, gpu.mig_pending
    if not isinstance(current, bool):
        yield not_read(ctx, subject, "MIG mode", current)
        return
    state = "enabled" if current else "disabled"
    if want != "any" and state != want:
        yield ctx.finding(Status.FAIL, subject, "mig_mismatch",
                          f"{gpu.label}: MIG is {state}, expected {want}", observed=state, expected=want,
                          recommendation=f"nvidia-smi -i {gpu.index} -mig {1 if want == 'enabled' else 0}, "
                                         "then reset the GPU.")
    elif isinstance(pending, bool) and pending != current:
        yield ctx.finding(Status.WARN, subject, "mig_pending",
                          f"{gpu.label}: MIG change to {'enabled' if pending else 'disabled'} pending a reset",
                          observed=state, expected=want, recommendation="Reset the GPU to apply the MIG change.")
    else:
        yield ctx.finding(Status.PASS, subject, "ok", f"{gpu.label}: MIG {state}",
                          observed=state, expected=want)


@check("gpu.inventory.compute_mode", needs=("gpu",), group="gpu_detection", component="software_stack")
@per_gpu
def compute_mode(ctx: CheckContext, gpu: GpuRecord, subject: str) -> Iterator[Finding]:
    """The compute mode lets training processes use the GPU.

    FAIL for a mode outside ``gpu.allowed_compute_modes`` (``prohibited`` blocks all CUDA
    contexts; ``exclusive_thread`` breaks multi-threaded frameworks).
    """
    allowed = settings_of(ctx.config, InventorySettings).allowed_compute_modes
    mode = gpu.compute_mode
    if not isinstance(mode, str):
        yield not_read(ctx, subject, "compute mode", mode)
    elif mode not in allowed:
        yield ctx.finding(Status.FAIL, subject, "compute_mode",
                          f"{gpu.label}: compute mode {mode} is not allowed", observed=mode, expected=allowed,
                          recommendation=f"nvidia-smi -i {gpu.index} -c DEFAULT")
    else:
        yield ctx.finding(Status.PASS, subject, "ok",
                          f"{gpu.label}: compute mode {mode}", observed=mode, expected=allowed)
