"""Typed thresholds: the configuration's sections, each setting with its meaning.

Most sections are one class here or in a sibling module. ``gpu`` and ``system`` are
assembled from blocks (:func:`.fields.settings_block`): a check's thresholds are declared in
its own module beside the check, and only the settings that code outside the checks reads
are declared below. Defaults are deliberately conservative and GPU-model-neutral; the
shipped GPU-model profiles (``profiles/*.toml``) and a site file refine them.
``gpu-preflight config defaults`` prints every field of every section with its ``doc``
text, so the documentation of a threshold and its value cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING

import msgspec

from .diagnostics import DiagnosticsConfig
from .evidence import EvidenceConfig
from .fields import section_class, setting, settings_block
from .history import HistoryConfig
from .load import LoadConfig
from .localize import LocalizeSettings
from .outputs import OutputsConfig
from .report_schema import ReportConfig
from .slurm_schema import SlurmConfig

# The gpu and system sections are assembled from blocks (config/fields.py, settings_block):
# a check's thresholds are declared in its own module, beside the check (checks/gpu_thermal.py's
# TemperatureSettings...); the settings below are the ones code outside the checks reads (the
# run, the engine, the probes, the monitor, a cluster check), so the config layer declares them
# and mypy sees them on ``config.gpu``/``config.system``. ``order`` places each block in the
# section as ``config defaults`` prints it.


@settings_block("gpu", order=10)
class GpuCountSettings(msgspec.Struct):
    """How many GPUs the node must have (the run and the engine read it too: ``--expect-gpus``)."""

    expected_count: int | None = setting(
        None, "GPUs this node must have; missing ones FAIL. Unset: not enforced, but zero GPUs still WARN.",
        min=0, max=256
    )


@settings_block("gpu", order=90)
class NvmlReadSettings(msgspec.Struct):
    """How the NVML probe and a monitor read the GPUs."""

    nvml_call_timeout_s: float = setting(
        5.0, "One NVML call of one GPU that takes longer names that GPU as hung (the others are still read); "
             "independent of --timeout-s.", "s", above=0, max=3600
    )
    nvml_settings_refresh_ticks: int = setting(
        10, "A monitor (serve --interval below 10 s) re-reads each GPU's settings (persistence, compute, MIG and "
            "ECC mode, power limits) every this many ticks; counters, temperatures, clocks and links every tick "
            "(1: everything every tick). Read when serve starts.", "ticks", min=1, max=1_000_000
    )


@settings_block("system", order=20)
class DiskPathSettings(msgspec.Struct):
    """Which file systems the system probe reads."""

    disk_paths: list[str] = setting(
        ["/", "/tmp"], "Paths whose filesystems must have free space (the report directory is added)."
    )


@settings_block("system", order=40)
class ClockSkewSettings(msgspec.Struct):
    """Clock agreement across ranks (cluster.completeness reads it; a cluster module cannot declare
    a block, since a node run never imports it)."""

    clock_skew_warn_s: float = setting(
        1.0, "A rank whose clock is off rank 0's by more than this (the whole measured range beyond it) WARNs: "
             "NTP is broken, and logs and timeouts across hosts stop lining up.", "s", above=0, max=86_400)


@settings_block("system", order=60)
class IoReadSettings(msgspec.Struct):
    """Where and how much the storage probe measures (system.io judges it)."""

    io_paths: list[str] = setting(
        ["/tmp", "/dev/shm"], "Directories whose sequential write/read throughput and fsync latency `system.io` "
        "measures in a --full run: add the job's checkpoint and data directories (/dev/shm is where NCCL and data "
        "loaders share memory)."
    )
    io_size_mib: int = setting(
        256, "File written and read back per directory (at most a tenth of its free space is used).", "MiB",
        min=8, max=1 << 20
    )
    io_timeout_s: float = setting(
        60.0, "Time limit per directory; what was measured by then is judged, marked as cut short.", "s",
        above=0, max=3600
    )


@settings_block("system", order=90)
class ProcessScanSettings(msgspec.Struct):
    """How often a monitor re-reads the process list."""

    process_scan_refresh_s: float = setting(
        30.0, "A monitor (serve) re-reads the host's process list for required_services at most this often "
              "(0: every tick); a one-shot run always reads it.", "s", min=0, max=86400
    )


if TYPE_CHECKING:  # what mypy sees: the blocks declared here (the checks read theirs with settings_of)
    class GpuConfig(NvmlReadSettings, GpuCountSettings):
        """Thresholds for the NVML-based GPU checks."""

    class SystemConfig(ProcessScanSettings, IoReadSettings, ClockSkewSettings, DiskPathSettings):
        """Thresholds for host checks (psutil, /proc, /sys)."""
else:  # what runs: section_class joins every block's fields into a subclass
    class GpuConfig(msgspec.Struct):
        """Thresholds for the NVML-based GPU checks."""

    class SystemConfig(msgspec.Struct):
        """Thresholds for host checks (psutil, /proc, /sys)."""


class XidConfig(msgspec.Struct):
    """How Xid events in the kernel log are judged."""

    window_hours: float = setting(2.0, "Only Xid events this recent count (Azure's default window).", "h",
        min=0, max=1_000_000)
    policy_file: str | None = setting(
        None, "TOML file replacing the shipped Xid policy table (same layout as data/xid_policy.toml)."
    )
    severity_overrides: dict[str, str] = setting(
        {}, "Per-Xid severity overrides, e.g. {\"13\" = \"ignore\", \"43\" = \"warn\"}."
    )


class PerfConfig(msgspec.Struct):
    """What the distributed workloads are judged against (GPU-model profiles set the floors)."""

    gemm_bf16_tflops: float | None = setting(None, "Sustained bf16 GEMM throughput the GPU model should reach.",
                                             "TFLOP/s", above=0, max=100_000)
    gemm_fp16_tflops: float | None = setting(None, "Sustained fp16 GEMM throughput.", "TFLOP/s", above=0, max=100_000)
    gemm_tf32_tflops: float | None = setting(None, "Sustained tf32 GEMM throughput.", "TFLOP/s", above=0, max=100_000)
    gemm_fp32_tflops: float | None = setting(None, "Sustained fp32 GEMM throughput (CPU: set per site).", "TFLOP/s",
        above=0, max=100_000)
    gemm_warn_fraction: float = setting(0.9, "GEMM below this fraction of the expected throughput WARNs.", "ratio",
        min=0, max=1)
    gemm_fail_fraction: float = setting(0.6, "GEMM below this fraction of the expected throughput FAILs.", "ratio",
        min=0, max=1)
    peer_outlier_fraction: float = setting(
        0.10, "A GPU, node or link more than this fraction below the median of its peers WARNs (GEMM, memory "
              "bandwidth, node-local all_reduce, node links).", "ratio", min=0, max=1)
    peer_outlier_fail_fraction: float = setting(
        0.5, "A GPU, node or link this fraction or more below the median of its peers FAILs: at 0.5 it makes "
             "every collective (or every step paced by the slowest GPU) at least twice as slow.", "ratio",
        above=0, max=1)
    allreduce_busbw_min_gbps: float | None = setting(
        None, "Node-local all_reduce busbw floor for every GPU group, whatever its topology (a site's or a "
              "baseline's own figure). Unset: derived from each node's topology and the profile's NVSwitch/PCIe "
              "floors below.", "GB/s", above=0, max=100_000)
    allreduce_nvswitch_busbw_min_gbps: float | None = setting(
        None, "Node-local all_reduce busbw floor for GPUs on an NVSwitch board with the SKU's full NVLink "
              "complement (profile value; scaled by active links over perf.allreduce_nvlinks_per_gpu).", "GB/s",
        above=0, max=100_000)
    allreduce_nvlinks_per_gpu: int | None = setting(
        None, "NVLinks per GPU that perf.allreduce_nvswitch_busbw_min_gbps is stated for; a board with fewer "
              "active links per GPU by design gets the floor scaled by active/this. Unset: not scaled.", "links",
        min=1, max=64)
    allreduce_pcie_busbw_min_gbps: float | None = setting(
        None, "Node-local all_reduce busbw floor for GPUs without NVSwitch (PCIe, or NVLink bridges joining only "
              "pairs) at gpu.pcie_expected_gen; halved per generation the links fall short.", "GB/s",
        above=0, max=100_000)
    allreduce_nvswitch_gpu_names: list[str] = setting(
        [], "GPU names (regular expressions) sold only on NVSwitch boards: a saved nccl-tests log, which shows "
            "no links, from such GPUs is held to perf.allreduce_nvswitch_busbw_min_gbps, any other to the PCIe "
            "floor.")
    busbw_floor_min_bytes: int = setting(
        256 << 20, "Bus-bandwidth floors judge only messages at least this large (smaller ones are "
                   "latency-bound); a sweep that stops below it is reported, not judged.", "bytes",
        min=1, max=1 << 40)
    network_busbw_min_gbps: float | None = setting(
        None, "Inter-node all_reduce bus bandwidth floor (one rank per node) at the largest size.", "GB/s",
        above=0, max=100_000)
    node_gpus: int | None = setting(
        None, "GPUs per node on the profile's reference board: a saved nccl-tests log that lists no hosts is "
              "taken as one node when its ranks fit in one, else as full nodes of this many GPUs (stated).",
        "GPUs", min=1, max=1024)
    network_nics_per_node: int | None = setting(
        None, "NICs (EFA or InfiniBand ports) joining a node to the others on the profile's reference board; "
              "with perf.network_nic_gbps, the bound a multi-node collective is judged against.", "NICs",
        min=1, max=1024)
    network_nic_gbps: float | None = setting(
        None, "Line rate of one of those NICs.", "Gb/s", above=0, max=100_000)
    network_busbw_min_fraction: float = setting(
        0.5, "A multi-node nccl-tests run whose busbw is below this fraction of what the NICs allow for its "
             "collective (NIC count x line rate, scaled by the collective's busbw factor; never above the "
             "node-local floor) FAILs.", "ratio", above=0, max=1)
    node_link_min_gbps: float | None = setting(
        None, "Bidirectional node-to-node exchange floor (node 0 with each node); unset: judged by the median.",
        "GB/s", above=0, max=100_000)
    device_copy_min_gbps: float | None = setting(None, "Device-to-device copy bandwidth floor (read+write).", "GB/s",
        above=0, max=100_000)
    host_transfer_min_gbps: float | None = setting(
        None, "Pinned host-to-device and device-to-host floor at gpu.pcie_expected_gen; halved per generation "
              "the GPU's link can reach less.", "GB/s", above=0, max=100_000)
    bandwidth_floor_fail_fraction: float = setting(
        0.5, "Device copy or host transfer below its floor WARNs; below this fraction of it FAILs (a link "
             "trained at a quarter of its lanes, HBM at half speed).", "ratio", above=0, max=1)
    train_min_loss_drop: float = setting(0.2, "Training smoke: the loss must fall by at least this fraction.", "ratio",
        min=0, max=1)


class WorkloadConfig(msgspec.Struct):
    """How much work the distributed workloads do (quick vs full)."""

    gemm_dtypes_gpu: list[str] = setting(["bf16", "fp16", "tf32", "fp32"], "GEMM precisions measured on GPUs.")
    gemm_n_gpu: int = setting(8192, "GEMM matrix size on GPUs (n x n x n).", min=1, max=65_536)
    gemm_n_cpu: int = setting(512, "GEMM matrix size on CPU workers.", min=1, max=16_384)
    gemm_seconds_quick: float = setting(1.0, "Seconds of GEMM per precision on GPUs (quick).", "s", above=0, max=3600)
    gemm_seconds_full: float = setting(10.0, "Seconds of GEMM per precision on GPUs (full; sustained).", "s",
        above=0, max=3600)
    collective_max_bytes_quick_gpu: int = setting(256 << 20, "Largest collective message, quick, GPUs.", "bytes",
        min=1, max=64 << 30)
    collective_max_bytes_full_gpu: int = setting(8 << 30, "Largest collective message, full, GPUs.", "bytes",
        min=1, max=64 << 30)
    collective_max_bytes_cpu: int = setting(4 << 20, "Largest collective message on CPU workers.", "bytes",
        min=1, max=64 << 30)
    collective_iters: int = setting(10, "Timed iterations per collective size on GPUs.", min=1, max=10_000)
    collective_iters_cpu: int = setting(3, "Timed iterations per collective size on CPU workers.", min=1,
                                        max=10_000)
    collective_scaling: bool = setting(
        True, "Scale the GPU collectives' sizes and timed iterations with the job's size (the table in "
              "docs/distributed.md; the values above are those of one node of up to 8 GPUs); false: the values "
              "above as they are (the acceptance suite's --iters and --numel set it).")
    memory_test_fraction: float = setting(0.5, "Share of free GPU memory the pattern test writes and verifies.",
                                          "ratio", above=0, max=1)
    train_steps: int = setting(40, "Training smoke steps (single GPU and DDP).", min=1, max=100_000)
    train_batch_size: int = setting(
        512, "Training-smoke samples per step on each rank; the set has 512 samples (a DDP rank trains on its "
        "share), so 512 trains on all of a rank's data every step, and a smaller batch takes successive "
        "minibatches.", "samples", min=1, max=65_536)
    cpu_workers: int = setting(2, "Local workers launched on a node without GPUs.", min=1, max=256)


class Config(msgspec.Struct):
    """The resolved configuration: defaults, then profile, site file, environment, CLI."""

    gpu: GpuConfig = msgspec.field(default_factory=lambda: section_class("gpu", GpuConfig)())
    system: SystemConfig = msgspec.field(default_factory=lambda: section_class("system", SystemConfig)())
    xid: XidConfig = msgspec.field(default_factory=XidConfig)
    perf: PerfConfig = msgspec.field(default_factory=PerfConfig)
    workload: WorkloadConfig = msgspec.field(default_factory=WorkloadConfig)
    evidence: EvidenceConfig = msgspec.field(default_factory=EvidenceConfig)
    diagnostics: DiagnosticsConfig = msgspec.field(default_factory=DiagnosticsConfig)
    slurm: SlurmConfig = msgspec.field(default_factory=SlurmConfig)
    history: HistoryConfig = msgspec.field(default_factory=HistoryConfig)
    outputs: OutputsConfig = msgspec.field(default_factory=OutputsConfig)
    report: ReportConfig = msgspec.field(default_factory=ReportConfig)
    load: LoadConfig = msgspec.field(default_factory=LoadConfig)
    localize: LocalizeSettings = msgspec.field(default_factory=LocalizeSettings)


ASSEMBLED: dict[str, type] = {"gpu": GpuConfig, "system": SystemConfig}
"""Sections joined from blocks declared beside the checks; the others are one class here."""


class Sections(MutableMapping[str, type]):
    """Section name -> the class the loader validates against and ``config defaults`` prints.

    Lazy: the assembled sections import the check modules that declare their blocks, which
    cannot happen while ``config`` itself is being imported (the checks import it).
    """

    def __init__(self) -> None:
        self._table: dict[str, type] | None = None

    def _sections(self) -> dict[str, type]:
        if self._table is None:
            defaults = zip(Config.__struct_fields__, Config.__struct_defaults__, strict=True)
            self._table = {name: section_class(name, ASSEMBLED[name]) if name in ASSEMBLED else default.factory
                           for name, default in defaults}
        return self._table

    def __getitem__(self, name: str) -> type:
        return self._sections()[name]

    def __setitem__(self, name: str, cls: type) -> None:
        self._sections()[name] = cls

    def __delitem__(self, name: str) -> None:
        del self._sections()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._sections())

    def __len__(self) -> int:
        return len(self._sections())


SECTIONS = Sections()
