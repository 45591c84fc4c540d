"""Host checks: memory, disk, CPU, shared memory, limits, kernel, NUMA, services.

On ``--replay`` the facts are the recorded node's (``gpu-preflight snapshot`` records
them); a snapshot without them makes every host check SKIP saying so, never a judgement
of the machine the replay runs on.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from ..config.fields import setting, settings_block, settings_of
from ..model import NA, Finding, Status
from ..records import GpuFacts, SystemFacts
from ..registry import CheckContext, check
from .common import is_number, not_read, version_below

GIB = 1024**3
MIB = 1024**2


def _sys(ctx: CheckContext) -> SystemFacts:
    facts: SystemFacts = ctx.fact("system")
    return facts


def _not_recorded(ctx: CheckContext) -> Finding | None:
    """SKIP for a replayed snapshot that holds no host facts."""
    why = _sys(ctx).not_recorded
    if why is None:
        return None
    return ctx.finding(Status.SKIP, ctx.host, "not_recorded", f"host facts {why}")


@settings_block("system", order=10)
class MemorySettings(msgspec.Struct):
    """Available host memory (system.memory)."""

    memory_available_min_gib: float = setting(4.0, "Available RAM below this FAILs.", "GiB", min=0, max=1 << 16)
    memory_available_warn_percent: float = setting(10.0, "Available RAM below this share WARNs.", "%", min=0, max=100)


@check("system.memory", needs=("system",), group="system_resources", component="resource_management")
def memory(ctx: CheckContext) -> Iterator[Finding]:
    """Enough host RAM is available for data loaders and pinned buffers.

    FAIL below ``system.memory_available_min_gib``; WARN below
    ``system.memory_available_warn_percent`` of the total.
    """
    if skip := _not_recorded(ctx):
        yield skip
        return
    cfg, s = settings_of(ctx.config, MemorySettings), _sys(ctx)
    avail, total = s.memory_available_bytes, s.memory_total_bytes
    if not is_number(avail) or not is_number(total) or total <= 0:
        yield not_read(ctx, ctx.host, "memory", avail)
        return
    gib, pct = avail / GIB, 100.0 * avail / total
    details = {"total_gib": round(total / GIB, 2), "available_gib": round(gib, 2), "available_percent": round(pct, 1)}
    if gib < cfg.memory_available_min_gib:
        yield ctx.finding(Status.FAIL, ctx.host, "memory_low", f"only {gib:.1f} GiB RAM available",
                          observed=round(gib, 2), expected=f">= {cfg.memory_available_min_gib:g}", unit="GiB",
                          details=details, recommendation="Stop what is using the host's memory before training.")
    elif pct < cfg.memory_available_warn_percent:
        yield ctx.finding(Status.WARN, ctx.host, "memory_pressure",
                          f"{pct:.1f}% of RAM available", observed=round(pct, 1),
                          expected=f">= {cfg.memory_available_warn_percent:g}", unit="%", details=details,
                          recommendation="The host is under memory pressure: check for leftover processes.")
    else:
        yield ctx.finding(Status.PASS, ctx.host, "ok", f"{gib:.1f} GiB RAM available ({pct:.0f}%)",
                          observed=round(gib, 2), unit="GiB", details=details)


@settings_block("system", order=30)
class DiskCpuSettings(msgspec.Struct):
    """Free disk space (system.disk) and the CPU count (system.cpu); the paths are the config layer's."""

    disk_free_min_gib: float = setting(1.0, "Free space below this FAILs.", "GiB", min=0, max=1 << 20)
    disk_free_warn_gib: float = setting(10.0, "Free space below this WARNs.", "GiB", min=0, max=1 << 20)
    cpu_count_min: int = setting(1, "Fewer logical CPUs than this FAIL.", "CPUs", min=0, max=1 << 16)


@check("system.disk", needs=("system",), group="system_resources", component="resource_management")
def disk(ctx: CheckContext) -> Iterator[Finding]:
    """Each configured path (and the report directory) has free space.

    FAIL below ``system.disk_free_min_gib``, WARN below ``system.disk_free_warn_gib``:
    checkpoints and logs that cannot be written kill jobs hours in.
    """
    if skip := _not_recorded(ctx):
        yield skip
        return
    cfg, s = settings_of(ctx.config, DiskCpuSettings), _sys(ctx)
    if not s.disks:
        yield ctx.finding(Status.SKIP, ctx.host, "no_paths", "no disk paths configured")
    for d in s.disks:
        subject = f"{ctx.host}:{d.path}"
        if not is_number(d.free_bytes):
            yield ctx.finding(Status.ERROR, subject, "unreadable", f"{d.path}: {d.free_bytes}",
                              recommendation="Check that the path exists and is mounted.")
            continue
        gib = d.free_bytes / GIB
        details = {"mountpoint": d.mountpoint, "total_gib": round(d.total_bytes / GIB, 2)
                   if is_number(d.total_bytes) else d.total_bytes}
        if gib < cfg.disk_free_min_gib:
            yield ctx.finding(Status.FAIL, subject, "disk_full", f"{d.path}: {gib:.2f} GiB free",
                              observed=round(gib, 2), expected=f">= {cfg.disk_free_min_gib:g}", unit="GiB",
                              details=details, recommendation=f"Free space on {d.mountpoint}.")
        elif gib < cfg.disk_free_warn_gib:
            yield ctx.finding(Status.WARN, subject, "disk_low", f"{d.path}: {gib:.1f} GiB free",
                              observed=round(gib, 2), expected=f">= {cfg.disk_free_warn_gib:g}", unit="GiB",
                              details=details, recommendation=f"Free space on {d.mountpoint} before long runs.")
        else:
            yield ctx.finding(Status.PASS, subject, "ok", f"{d.path}: {gib:.1f} GiB free",
                              observed=round(gib, 2), unit="GiB", details=details)


@check("system.cpu", needs=("system",), group="system_resources", component="resource_management")
def cpu(ctx: CheckContext) -> Iterator[Finding]:
    """Enough CPUs, and the host is not already loaded.

    FAIL with fewer than ``system.cpu_count_min`` CPUs; WARN when the 1-minute load per
    CPU exceeds ``system.load_per_cpu_warn`` (another workload competes for the host).
    """
    if skip := _not_recorded(ctx):
        yield skip
        return
    cfg, s = settings_of(ctx.config, DiskCpuSettings), _sys(ctx)
    load_warn = settings_of(ctx.config, LoadShmSettings).load_per_cpu_warn
    count, load = s.cpu_count, s.load_1m
    if not is_number(count) or count <= 0:
        yield not_read(ctx, ctx.host, "CPU count", count)
        return
    details = {"count": count, "load_1m": load, "usage_percent": s.cpu_percent}
    if count < cfg.cpu_count_min:
        yield ctx.finding(Status.FAIL, ctx.host, "too_few_cpus", f"{count} CPUs", observed=count,
                          expected=f">= {cfg.cpu_count_min}", unit="CPUs", details=details,
                          recommendation="Check CPU limits of the container or cgroup.")
    elif is_number(load) and load / count > load_warn:
        yield ctx.finding(Status.WARN, ctx.host, "load_high",
                          f"load {load:.2f} on {count} CPUs", observed=round(load / count, 2),
                          expected=f"<= {load_warn:g}", unit="load/CPU", details=details,
                          recommendation="Another workload is running on this host.")
    else:
        text = f"{count} CPUs, load {load:.2f}" if is_number(load) else f"{count} CPUs"
        yield ctx.finding(Status.PASS, ctx.host, "ok", text, observed=count,
                          unit="CPUs", details=details)


@settings_block("system", order=50)
class LoadShmSettings(msgspec.Struct):
    """Host load (system.cpu) and /dev/shm size (system.shm)."""

    load_per_cpu_warn: float = setting(
        1.5, "1-minute load average per CPU above this WARNs (the host is busy).", "ratio", min=0, max=1000
    )
    shm_fail_mib: float = setting(
        256, "/dev/shm smaller than this FAILs (NCCL needs shared memory; Docker's default is 64 MB).", "MiB",
        min=0, max=1 << 26
    )
    shm_warn_mib: float = setting(1024, "/dev/shm smaller than this WARNs.", "MiB", min=0, max=1 << 26)


@check("system.shm", needs=("system",), group="system_resources", component="resource_management")
def shm(ctx: CheckContext) -> Iterator[Finding]:
    """/dev/shm is large enough for NCCL and data loaders.

    FAIL below ``system.shm_fail_mib`` (NCCL fails with "unhandled system error" on
    Docker's 64 MB default) or when /dev/shm is missing, WARN below ``system.shm_warn_mib``.
    """
    if skip := _not_recorded(ctx):
        yield skip
        return
    cfg, s = settings_of(ctx.config, LoadShmSettings), _sys(ctx)
    size = s.shm_total_bytes
    if not is_number(size):
        yield ctx.finding(Status.FAIL, ctx.host, "no_shm", f"/dev/shm not usable: {size}",
                          recommendation="Mount a tmpfs on /dev/shm (docker run --shm-size=16g or --ipc=host).")
        return
    mib = size / MIB
    if mib < cfg.shm_fail_mib:
        status, code = Status.FAIL, "shm_too_small"
    elif mib < cfg.shm_warn_mib:
        status, code = Status.WARN, "shm_small"
    else:
        status, code = Status.PASS, "ok"
    yield ctx.finding(status, ctx.host, code, f"/dev/shm is {mib:.0f} MiB", observed=round(mib),
                      expected=f">= {cfg.shm_warn_mib:g}", unit="MiB",
                      recommendation=None if status is Status.PASS else
                      "Give the container more shared memory: --shm-size=16g, --ipc=host, or a larger tmpfs.")


@settings_block("system", order=80)
class HostSettings(msgspec.Struct):
    """Limits, kernel, NUMA and required services (system.limits, .kernel, .numa, .services)."""

    memlock_require_unlimited: bool = setting(
        True, "The locked-memory limit should be unlimited (EFA and RDMA pin memory); otherwise WARN."
    )
    nofile_min: int = setting(32768, "Open-files soft limit below this WARNs.", "files", min=0, max=1 << 30)
    kernel_min_version: str = setting("4.15", "Oldest acceptable kernel (dotted version).")
    numa_expected_nodes: int | None = setting(
        None, "NUMA nodes the host should expose; fewer WARN (NUMA disabled in BIOS?). Unset: not judged.",
        min=1, max=1024
    )
    required_services: list[str] = setting(
        ["nvidia-persistenced"], "Process names that must be running on a GPU node; missing ones WARN."
    )


@check("system.limits", needs=("system",), group="system_resources", component="resource_management")
def limits(ctx: CheckContext) -> Iterator[Finding]:
    """Locked-memory and open-files limits suit RDMA and NCCL.

    WARN when the memlock limit is not unlimited and ``system.memlock_require_unlimited``
    is set (EFA/InfiniBand pin memory: "ibv_reg_mr failed"), and when the open-files soft
    limit is below ``system.nofile_min``. On a node declared GPU-less (``--expect-gpus 0``,
    ``gpu.expected_count = 0``) a limited memlock is SKIP, not applicable: only GPU/RDMA
    training pins memory, and a CI runner without GPUs must be able to exit 0. The
    open-files limit is judged as always.
    """
    if skip := _not_recorded(ctx):
        yield skip
        return
    cfg, s = settings_of(ctx.config, HostSettings), _sys(ctx)
    if isinstance(s.memlock_soft, NA):
        yield not_read(ctx, ctx.host, "memlock limit", s.memlock_soft)
    elif cfg.memlock_require_unlimited and s.memlock_soft != -1 and ctx.config.gpu.expected_count == 0:
        yield ctx.finding(Status.SKIP, ctx.host, "memlock_not_applicable",
                          f"locked-memory limit is {s.memlock_soft} bytes: not judged on a node expected to have "
                          f"no GPU (--expect-gpus 0); only GPU/RDMA training pins memory", observed=s.memlock_soft,
                          unit="bytes")
    elif cfg.memlock_require_unlimited and s.memlock_soft != -1:
        yield ctx.finding(Status.WARN, ctx.host, "memlock_limited",
                          f"locked-memory limit is {s.memlock_soft} bytes, not unlimited", observed=s.memlock_soft,
                          expected="unlimited", unit="bytes",
                          recommendation="Set `ulimit -l unlimited` (limits.conf, docker --ulimit memlock=-1, "
                                         "Slurm PropagateResourceLimits).")
    else:
        yield ctx.finding(Status.PASS, ctx.host, "memlock_ok", "locked-memory limit: "
                          + ("unlimited" if s.memlock_soft == -1 else f"{s.memlock_soft} bytes"),
                          observed="unlimited" if s.memlock_soft == -1 else s.memlock_soft)
    nofile = s.nofile_soft
    if not is_number(nofile):
        yield not_read(ctx, ctx.host, "open-files limit", nofile)
    elif nofile != -1 and nofile < cfg.nofile_min:
        yield ctx.finding(Status.WARN, ctx.host, "nofile_low", f"open-files limit is {nofile}",
                          observed=nofile, expected=f">= {cfg.nofile_min}", unit="files",
                          recommendation="Raise `ulimit -n` (many ranks and data-loader workers open many files).")
    else:
        yield ctx.finding(Status.PASS, ctx.host, "nofile_ok", f"open-files limit is {nofile}",
                          observed=nofile, unit="files")


@check("system.kernel", needs=("system",), group="system_resources", component="software_stack")
def kernel(ctx: CheckContext) -> Iterator[Finding]:
    """The kernel is at least ``system.kernel_min_version``; FAIL if older."""
    if skip := _not_recorded(ctx):
        yield skip
        return
    cfg, s = settings_of(ctx.config, HostSettings), _sys(ctx)
    if not isinstance(s.kernel, str):
        yield not_read(ctx, ctx.host, "kernel version", s.kernel)
    elif version_below(s.kernel, cfg.kernel_min_version):
        yield ctx.finding(Status.FAIL, ctx.host, "kernel_too_old", f"kernel {s.kernel}",
                          observed=s.kernel, expected=f">= {cfg.kernel_min_version}",
                          recommendation="Upgrade the kernel; current NVIDIA drivers need a newer one.")
    else:
        yield ctx.finding(Status.PASS, ctx.host, "ok", f"kernel {s.kernel}", observed=s.kernel,
                          expected=f">= {cfg.kernel_min_version}")


@check("system.numa", needs=("system",), group="system_resources", component="hardware_health")
def numa(ctx: CheckContext) -> Iterator[Finding]:
    """The host exposes the expected NUMA nodes.

    Reports the NUMA node count; WARN when fewer than ``system.numa_expected_nodes``
    (NUMA disabled or sub-NUMA clustering changed in the BIOS breaks GPU/NIC affinity).
    """
    if skip := _not_recorded(ctx):
        yield skip
        return
    expected, nodes = settings_of(ctx.config, HostSettings).numa_expected_nodes, _sys(ctx).numa_nodes
    if not is_number(nodes):
        yield not_read(ctx, ctx.host, "NUMA nodes", nodes)
    elif expected is not None and nodes < expected:
        yield ctx.finding(Status.WARN, ctx.host, "numa_nodes", f"{nodes} NUMA node(s), expected {expected}",
                          observed=nodes, expected=expected, unit="nodes",
                          recommendation="Check the BIOS NUMA settings against the node type's reference.")
    else:
        yield ctx.finding(Status.PASS, ctx.host, "ok", f"{nodes} NUMA node(s)", observed=nodes,
                          expected=expected, unit="nodes")


@settings_block("system", order=100)
class FabricSettings(msgspec.Struct):
    """nv-fabricmanager on NVSwitch systems (system.services)."""

    fabricmanager_on_nvswitch: bool = setting(
        True, "On NVSwitch systems nv-fabricmanager must run; missing FAILs (CUDA cannot start)."
    )


@check("system.services", needs=("system", "gpu"), group="system_resources", component="service_reliability")
def services(ctx: CheckContext) -> Iterator[Finding]:
    """The services a GPU node needs are running.

    WARN for each missing process of ``system.required_services`` (nvidia-persistenced
    by default). On NVSwitch systems FAIL when nv-fabricmanager is not running (CUDA
    cannot initialise the GPUs). SKIP on nodes without NVIDIA GPUs, and on a replay whose
    snapshot did not record the host's processes.
    """
    if skip := _not_recorded(ctx):
        yield skip
        return
    cfg, s = settings_of(ctx.config, HostSettings), _sys(ctx)
    gpu: GpuFacts = ctx.fact("gpu")
    if not gpu.available or not gpu.gpus:
        yield ctx.finding(Status.SKIP, ctx.host, "no_gpus",
                          f"no NVIDIA GPU ({gpu.reason or '0 GPUs'}): NVIDIA services not required")
        return
    if not isinstance(s.processes, list):
        yield not_read(ctx, ctx.host, "process list", s.processes)
        return
    running = set(s.processes)
    required = [(name, Status.WARN) for name in cfg.required_services]
    nvswitch = any(is_number(g.nvswitch_links) and g.nvswitch_links > 0 for g in gpu.gpus)
    if nvswitch and settings_of(ctx.config, FabricSettings).fabricmanager_on_nvswitch:
        required.append(("nv-fabricmanager", Status.FAIL))
    if not required:
        yield ctx.finding(Status.PASS, ctx.host, "none_required", "no services required by config")
    for name, status in required:
        if name in running:
            yield ctx.finding(Status.PASS, f"{ctx.host}:{name}", "ok", f"{name} is running")
        else:
            yield ctx.finding(status, f"{ctx.host}:{name}", "service_missing",
                              f"{name} is not running", observed="not running", expected="running",
                              recommendation=f"Start {name} (systemctl start {name}).")
