"""GPU memory health: ECC mode and counters, row remapping, retired pages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import msgspec

from ..actions import Action
from ..config.fields import setting, settings_block, settings_of
from ..model import NA, Finding, Status
from ..records import GpuRecord
from ..registry import CheckContext, check
from .common import is_number, not_read, per_gpu

RESET_TO_REMAP = "Drain the node and reset the GPU (nvidia-smi -r -i N) so the pending remap takes effect."


ECC_MODE_ACTIONS = {"ecc_pending": Action.REBOOT_NODE}
"""A pending ECC mode change takes effect at the next reboot (``nvidia-smi -e`` says so). ECC in the
wrong mode names no action: it is a setting to change first, then the reboot becomes pending."""


@settings_block("gpu", order=30)
class EccSettings(msgspec.Struct):
    """ECC mode and memory-error limits (gpu.ecc.*, gpu.memory.*)."""

    ecc_mode: Literal["enabled", "disabled", "any"] = setting(
        "enabled", "Expected ECC mode; a mismatch WARNs (datacenter GPUs run with ECC on)."
    )
    ecc_volatile_uncorrected_fail: int = setting(
        0, "Volatile (since last reset) uncorrectable ECC errors above this FAIL.", "errors", min=0, max=10**12
    )
    ecc_aggregate_uncorrected_warn: int = setting(
        0, "Lifetime uncorrectable ECC errors above this WARN.", "errors", min=0, max=10**12
    )
    ecc_aggregate_corrected_warn: int = setting(
        20_000_000, "Lifetime corrected ECC errors above this WARN (Azure's DRAM CE limit).", "errors",
        min=0, max=10**12
    )
    sram_uncorrected_warn: int = setting(
        0, "Lifetime uncorrectable SRAM ECC errors above this WARN, where NVML exposes them.", "errors",
        min=0, max=10**12
    )
    sram_corrected_warn: int = setting(
        10_000, "Lifetime corrected SRAM ECC errors above this WARN, where NVML exposes them.", "errors",
        min=0, max=10**12
    )
    remapped_uncorrectable_rows_warn: int = setting(
        512, "Rows remapped for uncorrectable errors above this WARN (the GPU is wearing out).", "rows",
        min=0, max=10_000
    )
    retired_pages_warn: int = setting(
        10, "Retired pages (single- plus double-bit causes, pre-Ampere GPUs) above this WARN.", "pages",
        min=0, max=10_000
    )


@check("gpu.ecc.mode", needs=("gpu",), group="gpu_health", component="hardware_health", core=True,
       actions=ECC_MODE_ACTIONS)
@per_gpu
def ecc_mode(ctx: CheckContext, gpu: GpuRecord, subject: str) -> Iterator[Finding]:
    """ECC is in the expected mode (``gpu.ecc_mode``) and no mode change is pending.

    WARN when ECC is off on a GPU expected to run with it (silent memory corruption goes
    unnoticed) or when a change is pending a reboot.
    """
    want = settings_of(ctx.config, EccSettings).ecc_mode
    if not isinstance(gpu.ecc_current, bool):
        yield not_read(ctx, subject, "ECC mode", gpu.ecc_current)
        return
    state = "enabled" if gpu.ecc_current else "disabled"
    if want != "any" and state != want:
        yield ctx.finding(Status.WARN, subject, "ecc_mode",
                          f"{gpu.label}: ECC is {state}, expected {want}", observed=state, expected=want,
                          recommendation=f"nvidia-smi -i {gpu.index} -e {1 if want == 'enabled' else 0}, then reboot.")
    elif isinstance(gpu.ecc_pending, bool) and gpu.ecc_pending != gpu.ecc_current:
        yield ctx.finding(Status.WARN, subject, "ecc_pending",
                          f"{gpu.label}: ECC change pending a reboot", observed=state,
                          expected="enabled" if gpu.ecc_pending else "disabled",
                          recommendation="Reboot the node to apply the ECC mode change.")
    else:
        yield ctx.finding(Status.PASS, subject, "ok", f"{gpu.label}: ECC {state}",
                          observed=state, expected=want)


ECC_ERROR_ACTIONS = {
    "ecc_volatile_uncorrectable": Action.RESET_GPU,
    "ecc_aggregate_uncorrectable": Action.MONITOR,
    "ecc_aggregate_correctable": Action.MONITOR,
    "sram_uncorrectable": Action.RESET_GPU,
    "sram_correctable": Action.MONITOR,
}
"""Volatile uncorrectable errors: NVIDIA's Xid 48 (double-bit ECC) workflow resets the GPU, which also
activates the row remap the error left pending (A100 memory error management, "Error Recovery and
Response Flags"); SRAM uncorrectables likewise (the recommendation: reset, RMA if they recur).
Lifetime counts over a threshold are wear to watch (DCGM's DCGM_FR_VOLATILE_SBE_DETECTED: MONITOR)."""


@check("gpu.ecc.errors", needs=("gpu",), group="gpu_health", component="hardware_health", core=True,
       actions=ECC_ERROR_ACTIONS)
@per_gpu
def ecc_errors(ctx: CheckContext, gpu: GpuRecord, subject: str) -> Iterator[Finding]:
    """ECC error counters are clean.

    FAIL when volatile (since the last reset) uncorrectable errors exceed
    ``gpu.ecc_volatile_uncorrected_fail`` (0): data on this GPU may already be corrupt.
    WARN when lifetime uncorrectable or corrected counts, or SRAM counts where NVML
    exposes them, exceed their thresholds. SKIP when ECC is off or counters unsupported.
    """
    cfg = settings_of(ctx.config, EccSettings)
    if gpu.ecc_current is False:
        yield ctx.finding(Status.SKIP, subject, "ecc_off",
                          f"{gpu.label}: ECC is off, so no errors are counted (see gpu.ecc.mode)")
        return
    counters = {
        "volatile_uncorrected": gpu.ecc_volatile_uncorrected,
        "volatile_corrected": gpu.ecc_volatile_corrected,
        "aggregate_uncorrected": gpu.ecc_aggregate_uncorrected,
        "aggregate_corrected": gpu.ecc_aggregate_corrected,
        "sram_aggregate_uncorrected": gpu.sram_aggregate_uncorrected,
        "sram_aggregate_corrected": gpu.sram_aggregate_corrected,
    }
    if not any(is_number(v) for v in counters.values()):
        yield not_read(ctx, subject, "ECC counters", gpu.ecc_volatile_uncorrected)
        return
    rules = (
        ("volatile_uncorrected", cfg.ecc_volatile_uncorrected_fail, Status.FAIL, "ecc_volatile_uncorrectable",
         "Drain the node now and reset the GPU; if uncorrectable errors return, RMA the GPU."),
        ("aggregate_uncorrected", cfg.ecc_aggregate_uncorrected_warn, Status.WARN, "ecc_aggregate_uncorrectable",
         "Track this GPU: check row remapping status and plan an RMA if the count grows."),
        ("aggregate_corrected", cfg.ecc_aggregate_corrected_warn, Status.WARN, "ecc_aggregate_correctable",
         "Memory is degrading: watch for remapping failures and plan a replacement."),
        ("sram_aggregate_uncorrected", cfg.sram_uncorrected_warn, Status.WARN, "sram_uncorrectable",
         "SRAM uncorrectable errors: reset the GPU; RMA if they recur."),
        ("sram_aggregate_corrected", cfg.sram_corrected_warn, Status.WARN, "sram_correctable",
         "SRAM correctable errors are high: monitor and plan an RMA."),
    )
    flagged = False
    for key, limit, status, code, advice in rules:
        count = counters[key]
        if is_number(count) and count > limit:
            flagged = True
            yield ctx.finding(status, subject, code,
                              f"{gpu.label}: {count} {key.replace('_', ' ')} ECC errors (limit {limit})",
                              observed=count, expected=f"<= {limit}", unit="errors", recommendation=advice)
    if not flagged:
        yield ctx.finding(Status.PASS, subject, "ok", f"{gpu.label}: ECC counters within limits",
                          observed=counters, unit="errors")


REMAP_ACTIONS = {
    "remap_pending": Action.RESET_GPU,
    "remap_failure": Action.ISOLATE_NODE,
    "remapped_rows_high": Action.MONITOR,
}
"""NVIDIA's row-remapping guidance (A100 memory error management): a pending remap "will happen at
the next GPU reset" (reset the GPU; DCGM_FR_PENDING_ROW_REMAP is DCGM's RESET too); a remapping
failure is an RMA condition ("RMA Policy Thresholds for Row-Remapping"): the node is isolated
until the GPU is replaced. Many remapped rows is wear to watch before it becomes a failure."""


@check("gpu.memory.remap", needs=("gpu",), group="gpu_health", component="hardware_health", core=True,
       actions=REMAP_ACTIONS)
@per_gpu
def row_remap(ctx: CheckContext, gpu: GpuRecord, subject: str) -> Iterator[Finding]:
    """Row remapping (Ampere and newer) has no pending remap and no failure.

    FAIL on a remapping failure (the GPU ran out of spare rows: it can no longer retire
    bad memory). WARN when a remap is pending (the GPU needs a reset to use the spare row)
    or uncorrectable remapped rows exceed ``gpu.remapped_uncorrectable_rows_warn``.
    SKIP on GPUs without row remapping (pre-Ampere use retired pages), and when only one of
    the two flags is known (an excerpt) and it shows no problem: a flag we did not read is
    never a pass, but the one we did read is judged.
    """
    limit = settings_of(ctx.config, EccSettings).remapped_uncorrectable_rows_warn
    rows = {"correctable": gpu.remapped_rows_correctable, "uncorrectable": gpu.remapped_rows_uncorrectable,
            "pending": gpu.remap_pending, "failure": gpu.remap_failure}
    if not isinstance(gpu.remap_pending, bool) and not isinstance(gpu.remap_failure, bool):
        yield not_read(ctx, subject, "row remapping", gpu.remap_pending)
        return
    if gpu.remap_failure:
        yield ctx.finding(Status.FAIL, subject, "remap_failure",
                          f"{gpu.label}: row remapping failed", observed=rows, expected="no failure",
                          recommendation="Drain the node and RMA the GPU: it cannot remap bad memory rows.")
    if gpu.remap_pending:
        yield ctx.finding(Status.WARN, subject, "remap_pending",
                          f"{gpu.label}: a row remap is pending a GPU reset", observed=rows,
                          expected="no pending remap", recommendation=RESET_TO_REMAP)
    unc = gpu.remapped_rows_uncorrectable
    worn = is_number(unc) and unc > limit
    if worn:
        yield ctx.finding(Status.WARN, subject, "remapped_rows_high",
                          f"{gpu.label}: {unc} rows remapped for uncorrectable errors (limit {limit})",
                          observed=unc, expected=f"<= {limit}", unit="rows",
                          recommendation="The GPU's memory is wearing out: plan an RMA.")
    if gpu.remap_failure or gpu.remap_pending or worn:
        return
    if gpu.remap_failure is False and gpu.remap_pending is False:
        yield ctx.finding(Status.PASS, subject, "ok", f"{gpu.label}: no pending or failed remap",
                          observed=rows)
    else:  # one flag shown (a pasted excerpt), the other not: no problem seen, but not a pass
        yield not_read(ctx, subject, "row remapping (pending or failure flag)", NA("not shown"))


RETIRED_PAGE_ACTIONS = {"retirement_pending": Action.RESET_GPU, "retired_pages_high": Action.MONITOR,
                        "retired_pages_full": Action.ISOLATE_NODE}
"""A page pending retirement is retired when the driver next initialises the GPU (a reset or a
reboot): DCGM's DCGM_FR_PENDING_PAGE_RETIREMENTS is RESET. Many retired pages is wear to watch
against the RMA threshold; a full retirement table is that threshold (DCGM fails its diagnostic
there, and NVIDIA takes such a GPU back): the GPU is replaced."""

RETIRED_PAGES_FULL = 63
"""Retired pages (both causes) at which the GPU's retirement table counts as full: DCGM's
``DCGM_LIMIT_MAX_RETIRED_PAGES`` (63, "updated to match the field diag"; 60 before), at or above
which its diagnostic FAILs with DCGM_FR_RETIRED_PAGES_LIMIT. The driver keeps at most 64 entries
per GPU in the infoROM, so a GPU there can retire no further bad page: the next double-bit error
on it has nowhere to go (Azure's health check calls this "Retirement Table Full"). A hardware
limit, not a site threshold: ``gpu.retired_pages_warn`` is the site's early warning below it."""


@check("gpu.memory.retired_pages", needs=("gpu",), group="gpu_health", component="hardware_health", core=True,
       actions=RETIRED_PAGE_ACTIONS)
@per_gpu
def retired_pages(ctx: CheckContext, gpu: GpuRecord, subject: str) -> Iterator[Finding]:
    """Page retirement (pre-Ampere GPUs) has nothing pending and few retired pages.

    FAIL when the retired pages reach :data:`RETIRED_PAGES_FULL` (63, DCGM's limit): the
    retirement table is full or nearly so and the GPU is due for replacement. WARN when a
    retirement is pending a reboot or when retired pages exceed ``gpu.retired_pages_warn``.
    SKIP where the GPU uses row remapping instead.
    """
    limit = settings_of(ctx.config, EccSettings).retired_pages_warn
    pending = gpu.retired_pages_pending
    counts = [c for c in (gpu.retired_pages_sbe, gpu.retired_pages_dbe) if is_number(c)]
    if not isinstance(pending, bool) and not counts:
        yield not_read(ctx, subject, "page retirement", pending)
        return
    total = sum(counts)
    flagged = False
    if pending is True:
        flagged = True
        yield ctx.finding(Status.WARN, subject, "retirement_pending",
                          f"{gpu.label}: page retirement pending a reboot", observed=True, expected=False,
                          recommendation="Drain and reboot the node so the pages are retired.")
    if total >= RETIRED_PAGES_FULL:
        flagged = True
        yield ctx.finding(Status.FAIL, subject, "retired_pages_full",
                          f"{gpu.label}: {total} retired pages: the page retirement table is full "
                          f"(DCGM's limit {RETIRED_PAGES_FULL}; the driver holds 64)", observed=total,
                          expected=f"< {RETIRED_PAGES_FULL}", unit="pages",
                          recommendation="Drain the node and replace (RMA) this GPU: it can retire no further bad "
                                         "page.")
    elif total > limit:
        flagged = True
        yield ctx.finding(Status.WARN, subject, "retired_pages_high",
                          f"{gpu.label}: {total} retired pages (limit {limit})", observed=total,
                          expected=f"<= {limit}", unit="pages", recommendation="Plan an RMA for this GPU.")
    if not flagged:
        status = "none pending" if pending is False else "pending retirement not shown"
        yield ctx.finding(Status.PASS, subject, "ok",
                          f"{gpu.label}: {total} retired pages, {status}", observed=total, unit="pages")
