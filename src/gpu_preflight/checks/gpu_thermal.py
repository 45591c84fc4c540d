"""Temperature, clock event (throttle) reasons and power limits."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from ..actions import Action
from ..config.fields import setting, settings_block, settings_of
from ..ids import GPU_POWER_ID, GPU_THERMAL_ID
from ..model import Finding, Status
from ..records import GpuRecord
from ..registry import CheckContext, check
from .common import impossible, is_number, not_read, per_gpu

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


THERMAL_ACTIONS = {
    "temp_slowdown": Action.CHECK_MECHANICALS,
    "temp_limit": Action.CHECK_MECHANICALS,
    "memory_temp_limit": Action.CHECK_MECHANICALS,
    "temp_high": Action.MONITOR,
    "memory_temp_high": Action.MONITOR,
}
"""A GPU at its slowdown or shutdown temperature idle is a cooling fault: fans, airflow, heatsink
seating (DCGM's DEBUG_COOLING_MSG: "Verify that the cooling on this machine is functional");
NVIDIA's CHECK_MECHANICALS bucket. Close to the limit it still works: watch it."""


@settings_block("gpu", order=40)
class TemperatureSettings(msgspec.Struct):
    """Temperature limits and the readings no working GPU gives (gpu.thermal)."""

    temp_margin_c: float = setting(
        5.0, "WARN when the GPU is within this many degrees of its own slowdown temperature.", "C", min=0, max=50
    )
    temp_warn_c: float | None = setting(
        None, "Absolute GPU temperature that WARNs (profile value); unset: only NVML thresholds apply.", "C",
        min=0, max=150
    )
    memory_temp_margin_c: float = setting(
        5.0, "WARN when HBM is within this many degrees of its maximum operating temperature.", "C", min=0, max=50
    )
    temp_limit_c: float = setting(
        105.0, "Absolute GPU temperature that FAILs whatever NVML's own thresholds say (they can be unreadable "
               "or absurd): the GPU model's shutdown temperature (profile value; default: the highest any "
               "NVIDIA GPU ships with).", "C", above=0, max=150
    )
    temp_sane_min_c: float = setting(
        50.0, "NVML temperature thresholds below this are impossible: ERROR naming the threshold, which is not "
              "judged against (the absolute limit still applies).", "C", min=0, max=150
    )
    temp_sane_max_c: float = setting(
        150.0, "GPU temperatures and NVML thresholds above this are impossible readings (a broken sensor or "
               "answer): ERROR naming the reading.", "C", above=0, max=300
    )


@check(GPU_THERMAL_ID, needs=("gpu",), group="gpu_health", component="hardware_health", core=True,
       actions=THERMAL_ACTIONS)
@per_gpu
def temperature(ctx: CheckContext, gpu: GpuRecord, subject: str) -> Iterator[Finding]:
    """GPU and memory temperatures are clear of the GPU's own slowdown limits.

    FAIL at or above the GPU's slowdown threshold (as NVML reports it for this board), and
    at or above ``gpu.temp_limit_c`` whatever NVML's thresholds say (they can be unreadable
    or absurd; the profile sets the model's shutdown temperature). WARN within
    ``gpu.temp_margin_c`` of the slowdown threshold, at or above the GPU's maximum operating
    temperature, or at or above the profile's ``gpu.temp_warn_c``; the same for HBM against
    its maximum operating temperature. ERROR for an impossible reading: a temperature above
    ``gpu.temp_sane_max_c``, or a threshold outside ``gpu.temp_sane_min_c`` to
    ``gpu.temp_sane_max_c`` (that threshold is then not judged against).
    """
    cfg = settings_of(ctx.config, TemperatureSettings)
    temp = gpu.temperature_c
    if not is_number(temp):
        yield not_read(ctx, subject, "GPU temperature", temp)
        return
    bad, kept = _screen(ctx, subject, (f"{gpu.label}: GPU temperature", temp), {
        f"{gpu.label}: NVML's slowdown threshold": gpu.temp_slowdown_c,
        f"{gpu.label}: NVML's maximum operating temperature": gpu.temp_gpu_max_c})
    yield from bad
    if kept is None:
        return
    slowdown, gpu_max = kept
    warn_at = [t for t in (
        slowdown - cfg.temp_margin_c if slowdown is not None else None,
        gpu_max,
        cfg.temp_warn_c,
    ) if t is not None]
    limits = {"slowdown_c": slowdown, "warn_c": min(warn_at) if warn_at else None}
    if slowdown is not None and temp >= slowdown:
        yield ctx.finding(Status.FAIL, subject, "temp_slowdown",
                          f"{gpu.label}: {temp} C at or above its slowdown threshold {slowdown} C",
                          observed=temp, expected=f"< {slowdown}", unit="C", details=limits,
                          recommendation="Check cooling (fans, airflow, inlet temperature) before running jobs.")
    elif temp >= cfg.temp_limit_c:
        yield ctx.finding(Status.FAIL, subject, "temp_limit",
                          f"{gpu.label}: {temp} C at or above the absolute limit {cfg.temp_limit_c:g} C "
                          f"(gpu.temp_limit_c)", observed=temp, expected=f"< {cfg.temp_limit_c:g}", unit="C",
                          details={**limits, "limit_c": cfg.temp_limit_c},
                          recommendation="The GPU is at its shutdown temperature: drain the node and check "
                                         "cooling before running jobs.")
    elif warn_at and temp >= min(warn_at):
        yield ctx.finding(Status.WARN, subject, "temp_high",
                          f"{gpu.label}: {temp} C is close to its limits", observed=temp,
                          expected=f"< {min(warn_at):g}", unit="C", details=limits,
                          recommendation="The GPU will throttle under load: check cooling.")
    else:
        yield ctx.finding(Status.PASS, subject, "ok", f"{gpu.label}: {temp} C", observed=temp,
                          expected=f"< {min(warn_at):g}" if warn_at else None, unit="C", details=limits)
    yield from _memory_temperature(ctx, gpu, subject)


def _screen(ctx: CheckContext, subject: str, reading: tuple[str, float],
            thresholds: dict[str, object]) -> tuple[list[Finding], list[float | None] | None]:
    """ERRORs for the impossible values among a temperature and its NVML thresholds, and the
    thresholds worth judging against (None: unread or impossible). An impossible temperature
    ends it there (None): a broken sensor's value is not judged against anything."""
    cfg = settings_of(ctx.config, TemperatureSettings)
    what, value = reading
    wrong = impossible(ctx, subject, what, value, 0, cfg.temp_sane_max_c, "C")
    if wrong is not None:
        return [wrong], None
    bad: list[Finding] = []
    kept: list[float | None] = []
    for name, threshold in thresholds.items():
        problem = (impossible(ctx, subject, name, threshold, cfg.temp_sane_min_c, cfg.temp_sane_max_c, "C")
                   if is_number(threshold) else None)
        bad += [problem] if problem is not None else []
        kept.append(threshold if is_number(threshold) and problem is None else None)
    return bad, kept


def _memory_temperature(ctx: CheckContext, gpu: GpuRecord, subject: str) -> Iterator[Finding]:
    """HBM against its maximum operating temperature (GPUs without an HBM sensor read 0: not judged)."""
    cfg = settings_of(ctx.config, TemperatureSettings)
    mem = gpu.memory_temperature_c
    if not is_number(mem) or mem <= 0:
        return
    bad, kept = _screen(ctx, subject, (f"{gpu.label}: HBM temperature", mem),
                        {f"{gpu.label}: NVML's HBM maximum operating temperature": gpu.temp_memory_max_c})
    yield from bad
    mem_max = kept[0] if kept else None
    if mem_max is None:
        return
    if mem >= mem_max:
        yield ctx.finding(Status.FAIL, subject, "memory_temp_limit",
                          f"{gpu.label}: HBM {mem} C at or above its maximum {mem_max} C", observed=mem,
                          expected=f"< {mem_max}", unit="C", recommendation="Check cooling immediately.")
    elif mem >= mem_max - cfg.memory_temp_margin_c:
        yield ctx.finding(Status.WARN, subject, "memory_temp_high",
                          f"{gpu.label}: HBM {mem} C close to its maximum {mem_max} C", observed=mem,
                          expected=f"< {mem_max - cfg.memory_temp_margin_c:g}", unit="C",
                          recommendation="Memory is near its limit: check cooling.")


CLOCK_ACTIONS = {
    "hw_slowdown": Action.CHECK_MECHANICALS,
    "hw_thermal_slowdown": Action.CHECK_MECHANICALS,
    "hw_power_brake_slowdown": Action.CHECK_MECHANICALS,
    "sw_thermal_slowdown": Action.MONITOR,
}
"""Hardware slowdowns are the board protecting itself from heat or its power supply (cooling,
PSUs, power cables: a visit, no reset fixes them); a software thermal slowdown is the driver
easing off and is watched (DCGM_FR_CLOCKS_EVENT_THERMAL: MONITOR)."""


@check("gpu.clocks", needs=("gpu",), group="gpu_health", component="hardware_health", core=True,
       actions=CLOCK_ACTIONS)
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


@settings_block("gpu", order=60)
class PowerSettings(msgspec.Struct):
    """Power-limit floors (gpu.power)."""

    power_limit_min_w: float = setting(
        5.0, "An enforced or default power limit below this is an impossible reading (0 W is a broken answer, "
              "not a capped GPU): ERROR naming it. Profiles set the model's floor.", "W", min=0, max=100_000
    )
    power_limit_max_w: float = setting(
        3000.0, "An enforced or default power limit above this is an impossible reading: ERROR naming it.", "W",
        above=0, max=100_000
    )
    power_limit_min_fraction: float = setting(
        1.0, "Enforced power limit below this fraction of the default limit WARNs (capped GPU).", "ratio",
        min=0, max=1
    )


@check(GPU_POWER_ID, needs=("gpu",), group="gpu_health", component="hardware_health", core=True)
@per_gpu
def power_limit(ctx: CheckContext, gpu: GpuRecord, subject: str) -> Iterator[Finding]:
    """The enforced power limit is not below the board's default.

    WARN when the enforced limit is below ``gpu.power_limit_min_fraction`` × the default
    limit: a capped GPU runs compute-bound kernels slower than its peers. ERROR when either
    limit is outside ``gpu.power_limit_min_w`` to ``gpu.power_limit_max_w`` (every limit
    reading 0 W is a broken answer, which compared with itself would pass).
    """
    cfg = settings_of(ctx.config, PowerSettings)
    fraction = cfg.power_limit_min_fraction
    limit, default = gpu.power_limit_w, gpu.power_default_limit_w
    wrong = [f for what, value in (("enforced power limit", limit), ("default power limit", default))
             if is_number(value) and (f := impossible(ctx, subject, f"{gpu.label}: {what}", value,
                                                       cfg.power_limit_min_w, cfg.power_limit_max_w, "W"))]
    if wrong:
        yield from wrong
        return
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
