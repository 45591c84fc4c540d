"""Facts about one node: NVML's view of its GPUs, host resources and the kernel log's Xid tally.

A reading that could not be taken is an :class:`~gpu_preflight.model.NA` carrying the
reason, so a check can tell "0 errors" from "unknown".
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import msgspec

from ..model import NA

if TYPE_CHECKING:
    from .xid import XidTally

IntR = int | NA
FloatR = float | NA
StrR = str | NA
BoolR = bool | NA


class NvLink(msgspec.Struct):
    """One NVLink of a GPU: whether it is active, its version, the PCI address at its far end and its error counters."""

    link: int
    active: bool
    version: IntR = NA("not read")
    remote_pci: StrR = NA("not read")
    errors: dict[str, IntR] = {}  # replay, recovery, crc_flit, crc_data, ecc_data


class GpuProcess(msgspec.Struct):
    """A process holding a GPU, with the device memory it uses."""

    pid: int
    used_memory_bytes: IntR


class GpuRecord(msgspec.Struct):
    """Everything NVML said about one GPU (each NVML field read once per run)."""

    index: int
    name: StrR = NA("not read")
    uuid: StrR = NA("not read")
    serial: StrR = NA("not read")
    pci_bus_id: StrR = NA("not read")
    vbios: StrR = NA("not read")
    board_part_number: StrR = NA("not read")
    lost: str | None = None
    call_errors: dict[str, str] = {}
    memory_total_bytes: IntR = NA("not read")
    memory_used_bytes: IntR = NA("not read")
    memory_free_bytes: IntR = NA("not read")
    temperature_c: IntR = NA("not read")
    temp_slowdown_c: IntR = NA("not read")
    temp_shutdown_c: IntR = NA("not read")
    temp_gpu_max_c: IntR = NA("not read")
    temp_memory_max_c: IntR = NA("not read")
    memory_temperature_c: IntR = NA("not read")
    power_draw_w: FloatR = NA("not read")
    power_limit_w: FloatR = NA("not read")
    power_default_limit_w: FloatR = NA("not read")
    utilization_gpu_percent: IntR = NA("not read")
    utilization_memory_percent: IntR = NA("not read")
    persistence_mode: BoolR = NA("not read")
    compute_mode: StrR = NA("not read")
    mig_current: BoolR = NA("not read")
    mig_pending: BoolR = NA("not read")
    ecc_current: BoolR = NA("not read")
    ecc_pending: BoolR = NA("not read")
    ecc_volatile_corrected: IntR = NA("not read")
    ecc_volatile_uncorrected: IntR = NA("not read")
    ecc_aggregate_corrected: IntR = NA("not read")
    ecc_aggregate_uncorrected: IntR = NA("not read")
    sram_aggregate_corrected: IntR = NA("not read")
    sram_aggregate_uncorrected: IntR = NA("not read")
    remapped_rows_correctable: IntR = NA("not read")
    remapped_rows_uncorrectable: IntR = NA("not read")
    remap_pending: BoolR = NA("not read")
    remap_failure: BoolR = NA("not read")
    retired_pages_sbe: IntR = NA("not read")
    retired_pages_dbe: IntR = NA("not read")
    retired_pages_pending: BoolR = NA("not read")
    recovery_action: IntR = NA("not read")
    clock_event_reasons: IntR = NA("not read")
    sm_clock_mhz: IntR = NA("not read")
    sm_clock_max_mhz: IntR = NA("not read")
    performance_state: IntR = NA("not read")
    pcie_gen_current: IntR = NA("not read")
    pcie_gen_max: IntR = NA("not read")
    pcie_gen_gpu_max: IntR = NA("not read")
    pcie_width_current: IntR = NA("not read")
    pcie_width_max: IntR = NA("not read")
    pcie_replay_counter: IntR = NA("not read")
    nvlinks: list[NvLink] | NA = NA("not read")
    nvswitch_links: IntR = NA("not read")
    processes: list[GpuProcess] | NA = NA("not read")

    @property
    def label(self) -> str:
        return f"gpu{self.index}"


class GpuFacts(msgspec.Struct):
    """The GPU side of a node: NVML's view, plus NVIDIA GPUs seen on the PCI bus."""

    source: str
    available: bool
    reason: str | None = None
    nvml_error: str | None = None
    driver_version: StrR = NA("not read")
    cuda_driver_version: StrR = NA("not read")
    nvml_version: StrR = NA("not read")
    gpus: list[GpuRecord] = []
    pci_gpus: list[str] | NA = NA("not read")

    @property
    def names(self) -> list[str]:
        return [g.name for g in self.gpus if isinstance(g.name, str)]


class DiskUsage(msgspec.Struct):
    """One filesystem the run looks at: its size and free space, and where it is mounted."""

    path: str
    total_bytes: IntR
    free_bytes: IntR
    mountpoint: StrR = NA("not read")


class SystemFacts(msgspec.Struct):
    """Host resources read through psutil, /proc and /sys."""

    hostname: str
    kernel: StrR = NA("not read")
    memory_total_bytes: IntR = NA("not read")
    memory_available_bytes: IntR = NA("not read")
    cpu_count: IntR = NA("not read")
    cpu_percent: FloatR = NA("not read")
    load_1m: FloatR = NA("not read")
    disks: list[DiskUsage] = []
    shm_total_bytes: IntR = NA("not read")
    memlock_soft: IntR = NA("not read")  # -1: unlimited
    memlock_hard: IntR = NA("not read")
    nofile_soft: IntR = NA("not read")
    nofile_hard: IntR = NA("not read")
    numa_nodes: IntR = NA("not read")
    processes: list[str] | NA = NA("not read")
    not_recorded: str | None = None  # why a replayed snapshot holds no host facts: every host check SKIPs


class KernelLogFacts(msgspec.Struct):
    """Xid events read from the kernel log, or why the log could not be read.

    ``tally`` holds per-(Xid, GPU) counts within the window and how many events fell
    outside it (never every event: a 200 MB log must not become 200 MB of facts).
    """

    available: bool
    source: str
    read_at: datetime
    reason: str | None = None
    tally: XidTally | None = None
    failures: list[str] = []
