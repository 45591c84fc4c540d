"""Is another job already using this node's GPUs?"""

from __future__ import annotations

import os
from collections.abc import Iterator

import msgspec

from ..config.fields import setting, settings_block, settings_of
from ..model import Finding, Status
from ..records import GpuRecord
from ..registry import CheckContext, check
from .common import is_number, not_read, per_gpu

MIB = 1024 * 1024


@settings_block("gpu", order=80)
class BusySettings(msgspec.Struct):
    """When a GPU counts as held by another job (gpu.busy)."""

    busy_memory_used_mib_warn: int = setting(
        2048, "GPU memory in use above this WARNs: another job probably holds the GPU.", "MiB", min=0, max=1 << 21
    )


@check("gpu.busy", needs=("gpu",), group="gpu_health", component="resource_management")
@per_gpu
def busy(ctx: CheckContext, gpu: GpuRecord, subject: str) -> Iterator[Finding]:
    """No other process holds the GPU.

    WARN when compute processes (other than gpu-preflight itself) run on the GPU or when
    memory in use exceeds ``gpu.busy_memory_used_mib_warn``: another job holds this node,
    so a new job would share it and run slow or out of memory.
    """
    limit_mib = settings_of(ctx.config, BusySettings).busy_memory_used_mib_warn
    live = ctx.fact("gpu").source == "live"
    own = {os.getpid(), os.getppid()} if live else set()  # a replayed dump's pids belong to another host
    used = gpu.memory_used_bytes
    procs = [p for p in gpu.processes if p.pid not in own] if isinstance(gpu.processes, list) else []
    if not is_number(used) and not isinstance(gpu.processes, list):
        yield not_read(ctx, subject, "memory use and processes", used)
        return
    used_mib = round(used / MIB) if is_number(used) else None
    details = {"memory_used_mib": used_mib, "processes": [p.pid for p in procs]}
    if procs:
        yield ctx.finding(Status.WARN, subject, "processes_running",
                          f"{gpu.label}: {len(procs)} compute process(es) running: "
                          f"pids {', '.join(str(p.pid) for p in procs)}", observed=len(procs), expected=0,
                          unit="processes", details=details,
                          recommendation="Another job holds this GPU: wait for it or stop it before starting.")
    elif used_mib is not None and used_mib > limit_mib:
        yield ctx.finding(Status.WARN, subject, "memory_in_use",
                          f"{gpu.label}: {used_mib} MiB in use with no visible process", observed=used_mib,
                          expected=f"<= {limit_mib}", unit="MiB", details=details,
                          recommendation="Memory is held by a process in another container or a leaked "
                                         "context: find it with nvidia-smi, or reset the GPU.")
    else:
        yield ctx.finding(Status.PASS, subject, "ok", f"{gpu.label}: idle ({used_mib} MiB in use)",
                          observed=used_mib, expected=f"<= {limit_mib}", unit="MiB", details=details)
