"""Temperature, clock event (throttle) reasons and power limits."""

from __future__ import annotations

from collections.abc import Iterator

from ..ids import GPU_POWER_ID, GPU_THERMAL_ID
from ..model import Finding, Status
from ..records import GpuRecord
from ..registry import CheckContext, check
from .common import is_number, not_read, per_gpu

# nvmlClocksEventReasons bits. Idle, application clocks, SW power cap under load, sync
# boost and display clocks are normal operation; HW slowdown, HW thermal and HW power
# brake mean the board is protecting itself (cooling, PSU or a failing sensor).
CLOCK_REASONS: dict[int, tuple[str, Status]] = {
    0x1: ("gpu_idle", Status.PASS),
    0x2: ("applications_clocks_setting", Status.PASS),
    0x4: ("sw_power_cap", Status.PASS),
    0x8: ("hw_slowdown", Status.FAIL),
    0x10: ("sync_boost", Status.PASS),
    0x20: ("sw_thermal_slowdown", Status.WARN),
    0x40: ("hw_thermal_slowdown", Status.FAIL),
    0x80: ("hw_power_brake_slowdown", Status.FAIL),
    0x100: ("display_clock_setting", Status.PASS),
}
CLOCK_ADVICE = {
    "hw_slowdown": "Hardware slowdown is active: check cooling, power supplies and the GPU's sensors; "
                   "drain if it persists.",
    "hw_thermal_slowdown": "The GPU is throttling for heat: check airflow, fans and inlet temperature.",
    "hw_power_brake_slowdown": "External power brake asserted: check the node's PSUs and power delivery.",
    "sw_thermal_slowdown": "The driver is lowering clocks for temperature: check cooling before long jobs.",
}


def decode_clock_reasons(mask: int) -> list[str]:
    """Names of the set bits; unknown bits are named by value."""
    names = [name for bit, (name, _) in CLOCK_REASONS.items() if mask & bit]
    known = sum(CLOCK_REASONS)
    if mask & ~known:
        names.append(f"unknown_0x{mask & ~known:x}")
    return names


@check(GPU_THERMAL_ID, needs=("gpu",), group="gpu_health", component="hardware_health", core=True)
@per_gpu
def temperature(ctx: CheckContext, gpu: GpuRecord, subject: str) -> Iterator[Finding]:
    """GPU and memory temperatures are clear of the GPU's own slowdown limits.

    FAIL at or above the GPU's slowdown threshold (as NVML reports it for this board).
    WARN within ``gpu.temp_margin_c`` of it, at or above the GPU's maximum operating
    temperature, or at or above the profile's ``gpu.temp_warn_c``; the same for HBM
    against its maximum operating temperature.
    """
    cfg = ctx.config.gpu
    temp = gpu.temperature_c
    if not is_number(temp):
        yield not_read(ctx, subject, "GPU temperature", temp)
        return
    slowdown = gpu.temp_slowdown_c if is_number(gpu.temp_slowdown_c) else None
    warn_at = [t for t in (
        slowdown - cfg.temp_margin_c if slowdown is not None else None,
        gpu.temp_gpu_max_c if is_number(gpu.temp_gpu_max_c) else None,
        cfg.temp_warn_c,
    ) if t is not None]
    limits = {"slowdown_c": slowdown, "warn_c": min(warn_at) if warn_at else None}
    if slowdown is not None and temp >= slowdown:
        yield ctx.finding(Status.FAIL, subject, "temp_slowdown",
                          f"{gpu.label}: {temp} C at or above its slowdown threshold {slowdown} C",
                          observed=temp, expected=f"< {slowdown}", unit="C", details=limits,
                          recommendation="Check cooling (fans, airflow, inlet temperature) before running jobs.")
    elif warn_at and temp >= min(warn_at):
        yield ctx.finding(Status.WARN, subject, "temp_high",
                          f"{gpu.label}: {temp} C is close to its limits", observed=temp,
                          expected=f"< {min(warn_at):g}", unit="C", details=limits,
                          recommendation="The GPU will throttle under load: check cooling.")
    else:
        yield ctx.finding(Status.PASS, subject, "ok", f"{gpu.label}: {temp} C", observed=temp,
                          expected=f"< {min(warn_at):g}" if warn_at else None, unit="C", details=limits)
    mem, mem_max = gpu.memory_temperature_c, gpu.temp_memory_max_c
    if is_number(mem) and is_number(mem_max) and mem > 0:
        if mem >= mem_max:
            yield ctx.finding(Status.FAIL, subject, "memory_temp_limit",
                              f"{gpu.label}: HBM {mem} C at or above its maximum {mem_max} C", observed=mem,
                              expected=f"< {mem_max}", unit="C", recommendation="Check cooling immediately.")
        elif mem >= mem_max - cfg.memory_temp_margin_c:
            yield ctx.finding(Status.WARN, subject, "memory_temp_high",
                              f"{gpu.label}: HBM {mem} C close to its maximum {mem_max} C", observed=mem,
                              expected=f"< {mem_max - cfg.memory_temp_margin_c:g}", unit="C",
                              recommendation="Memory is near its limit: check cooling.")


@check("gpu.clocks", needs=("gpu",), group="gpu_health", component="hardware_health", core=True)
@per_gpu
def clock_events(ctx: CheckContext, gpu: GpuRecord, subject: str) -> Iterator[Finding]:
    """No hardware clock slowdown is active.

    Decodes NVML's clock event reasons: HW slowdown, HW thermal slowdown and HW power
    brake FAIL; SW thermal slowdown WARNs; idle, application clocks, SW power cap (normal
    under load), sync boost and display clocks pass.
    """
    mask = gpu.clock_event_reasons
    if not is_number(mask):
        yield not_read(ctx, subject, "clock event reasons", mask)
        return
    active = decode_clock_reasons(int(mask))
    bad = [(name, status) for bit, (name, status) in CLOCK_REASONS.items()
           if int(mask) & bit and status is not Status.PASS]
    if not bad:
        yield ctx.finding(Status.PASS, subject, "ok",
                          f"{gpu.label}: clock event reasons {', '.join(active) or 'none'}",
                          observed=active, details={"mask": f"0x{int(mask):x}"})
    for name, status in bad:
        yield ctx.finding(status, subject, name, f"{gpu.label}: {name.replace('_', ' ')} active",
                          observed=active, expected="no hardware slowdown", recommendation=CLOCK_ADVICE[name],
                          details={"mask": f"0x{int(mask):x}", "sm_clock_mhz": gpu.sm_clock_mhz,
                                   "sm_clock_max_mhz": gpu.sm_clock_max_mhz})


@check(GPU_POWER_ID, needs=("gpu",), group="gpu_health", component="hardware_health", core=True)
@per_gpu
def power_limit(ctx: CheckContext, gpu: GpuRecord, subject: str) -> Iterator[Finding]:
    """The enforced power limit is not below the board's default.

    WARN when the enforced limit is below ``gpu.power_limit_min_fraction`` × the default
    limit: a capped GPU runs compute-bound kernels slower than its peers.
    """
    fraction = ctx.config.gpu.power_limit_min_fraction
    limit, default = gpu.power_limit_w, gpu.power_default_limit_w
    if not is_number(limit) or not is_number(default):
        yield not_read(ctx, subject, "power limits", limit if not is_number(limit) else default)
        return
    floor = default * fraction
    details = {"power_draw_w": gpu.power_draw_w, "default_limit_w": default}
    if limit < floor:
        yield ctx.finding(Status.WARN, subject, "power_capped",
                          f"{gpu.label}: power limit {limit:g} W below the default {default:g} W", observed=limit,
                          expected=f">= {floor:g}", unit="W", details=details,
                          recommendation=f"Restore the default limit: nvidia-smi -i {gpu.index} -pl {default:g}")
    else:
        yield ctx.finding(Status.PASS, subject, "ok", f"{gpu.label}: power limit {limit:g} W",
                          observed=limit, expected=f">= {floor:g}", unit="W", details=details)
