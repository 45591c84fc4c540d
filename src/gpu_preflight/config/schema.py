"""Typed thresholds: every number a check judges against lives here, with its meaning.

Defaults are deliberately conservative and GPU-model-neutral; the shipped GPU-model
profiles (``profiles/*.toml``) and a site file refine them. ``gpu-preflight config
defaults`` prints every field with the ``doc`` text below, so the documentation of a
threshold and its value cannot drift apart.
"""

from __future__ import annotations

from dataclasses import field, fields
from typing import Literal

from ..fastclass import dataclass
from .diagnostics import DiagnosticsConfig
from .evidence import EvidenceConfig
from .fields import setting
from .history import HistoryConfig
from .load import LoadConfig
from .localize import LocalizeSettings
from .outputs import OutputsConfig
from .report_schema import ReportConfig
from .slurm_schema import SlurmConfig


@dataclass
class GpuConfig:
    """Thresholds for the NVML-based GPU checks."""

    expected_count: int | None = setting(
        None, "GPUs this node must have; missing ones FAIL. Unset: not enforced, but zero GPUs still WARN.",
        min=0, max=256
    )
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
    memory_total_min_gib: float = setting(
        0.25, "A GPU reporting less total memory than this gives an impossible reading (0 bytes: a broken "
              "answer): ERROR naming it. Profiles set the model's size.", "GiB", min=0, max=1 << 20
    )
    memory_total_max_gib: float = setting(
        1024.0, "A GPU reporting more total memory than this gives an impossible reading: ERROR naming it.",
        "GiB", above=0, max=1 << 20
    )
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
    busy_memory_used_mib_warn: int = setting(
        2048, "GPU memory in use above this WARNs: another job probably holds the GPU.", "MiB", min=0, max=1 << 21
    )
    nvml_call_timeout_s: float = setting(
        5.0, "One NVML call of one GPU that takes longer names that GPU as hung (the others are still read); "
             "independent of --timeout-s.", "s", above=0, max=3600
    )
    nvml_settings_refresh_ticks: int = setting(
        10, "A monitor (serve --interval below 10 s) re-reads each GPU's settings (persistence, compute, MIG and "
            "ECC mode, power limits) every this many ticks; counters, temperatures, clocks and links every tick "
            "(1: everything every tick). Read when serve starts.", "ticks", min=1, max=1_000_000
    )


@dataclass
class SystemConfig:
    """Thresholds for host checks (psutil, /proc, /sys)."""

    memory_available_min_gib: float = setting(4.0, "Available RAM below this FAILs.", "GiB", min=0, max=1 << 16)
    memory_available_warn_percent: float = setting(10.0, "Available RAM below this share WARNs.", "%", min=0, max=100)
    disk_paths: list[str] = setting(
        ["/", "/tmp"], "Paths whose filesystems must have free space (the report directory is added)."
    )
    disk_free_min_gib: float = setting(1.0, "Free space below this FAILs.", "GiB", min=0, max=1 << 20)
    disk_free_warn_gib: float = setting(10.0, "Free space below this WARNs.", "GiB", min=0, max=1 << 20)
    cpu_count_min: int = setting(1, "Fewer logical CPUs than this FAIL.", "CPUs", min=0, max=1 << 16)
    clock_skew_warn_s: float = setting(
        1.0, "A rank whose clock is off rank 0's by more than this (the whole measured range beyond it) WARNs: "
             "NTP is broken, and logs and timeouts across hosts stop lining up.", "s", above=0, max=86_400)
    load_per_cpu_warn: float = setting(
        1.5, "1-minute load average per CPU above this WARNs (the host is busy).", "ratio", min=0, max=1000
    )
    shm_fail_mib: float = setting(
        256, "/dev/shm smaller than this FAILs (NCCL needs shared memory; Docker's default is 64 MB).", "MiB",
        min=0, max=1 << 26
    )
    shm_warn_mib: float = setting(1024, "/dev/shm smaller than this WARNs.", "MiB", min=0, max=1 << 26)
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
    io_throughput_fail_mbps: float = setting(
        100, "Sequential write or read slower than this FAILs (checkpoints stall every rank).", "MB/s",
        min=0, max=1e6
    )
    io_throughput_warn_mbps: float = setting(
        500, "Sequential write or read slower than this WARNs.", "MB/s", min=0, max=1e6
    )
    io_fsync_warn_ms: float = setting(
        50, "Median fsync of a small append slower than this WARNs.", "ms", min=0, max=1e6
    )
    io_fsync_fail_ms: float = setting(
        1000, "Median fsync of a small append slower than this FAILs (a checkpoint is not durable until it "
        "returns).", "ms", min=0, max=1e6
    )
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
    process_scan_refresh_s: float = setting(
        30.0, "A monitor (serve) re-reads the host's process list for required_services at most this often "
              "(0: every tick); a one-shot run always reads it.", "s", min=0, max=86400
    )
    fabricmanager_on_nvswitch: bool = setting(
        True, "On NVSwitch systems nv-fabricmanager must run; missing FAILs (CUDA cannot start)."
    )


@dataclass
class XidConfig:
    """How Xid events in the kernel log are judged."""

    window_hours: float = setting(2.0, "Only Xid events this recent count (Azure's default window).", "h",
        min=0, max=1_000_000)
    policy_file: str | None = setting(
        None, "TOML file replacing the shipped Xid policy table (same layout as data/xid_policy.toml)."
    )
    severity_overrides: dict[str, str] = setting(
        {}, "Per-Xid severity overrides, e.g. {\"13\" = \"ignore\", \"43\" = \"warn\"}."
    )


@dataclass
class PerfConfig:
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


@dataclass
class WorkloadConfig:
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


@dataclass
class Config:
    """The resolved configuration: defaults, then profile, site file, environment, CLI."""

    gpu: GpuConfig = field(default_factory=GpuConfig)
    system: SystemConfig = field(default_factory=SystemConfig)
    xid: XidConfig = field(default_factory=XidConfig)
    perf: PerfConfig = field(default_factory=PerfConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    evidence: EvidenceConfig = field(default_factory=EvidenceConfig)
    diagnostics: DiagnosticsConfig = field(default_factory=DiagnosticsConfig)
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    history: HistoryConfig = field(default_factory=HistoryConfig)
    outputs: OutputsConfig = field(default_factory=OutputsConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    load: LoadConfig = field(default_factory=LoadConfig)
    localize: LocalizeSettings = field(default_factory=LocalizeSettings)


SECTIONS: dict[str, type] = {f.name: f.default_factory for f in fields(Config)}  # type: ignore[misc]
