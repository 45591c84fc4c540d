"""What nvidia-smi's outputs say, in every form people save them: one record per form.

``-q -x``, ``-q``, ``--query-gpu`` CSV and the default table fill the same
:class:`NvidiaSmiRecord` (each reader leaves what its format does not show as ``None``);
the ``nvlink``/``-L`` listings, ``dmon`` and ``topo -m`` have records of their own. Clock
event reasons carry the names of NVML's reason bits (:data:`CLOCK_REASON_BITS`), so a
saved record is judged by the same checks as a live NVML reading.
"""

from __future__ import annotations

import msgspec

# nvmlClocksEventReasons bit per reason name (the names of checks.gpu_thermal.CLOCK_REASONS).
CLOCK_REASON_BITS: dict[str, int] = {
    "gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4, "hw_slowdown": 0x8,
    "sync_boost": 0x10, "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80, "display_clock_setting": 0x100,
}


def clock_mask(active: list[str]) -> int:
    """The NVML bit mask of named active reasons (unknown names add nothing)."""
    mask = 0
    for name in active:
        mask |= CLOCK_REASON_BITS.get(name, 0)
    return mask


class SmiProcess(msgspec.Struct):
    """A process nvidia-smi lists on a GPU."""

    pid: int
    name: str | None = None
    type: str | None = None
    used_memory_mib: int | None = None


class SmiGpu(msgspec.Struct):
    """One GPU as nvidia-smi printed it; ``None`` wherever the format or the GPU gives nothing."""

    index: int | None = None
    pci_bus_id: str | None = None
    name: str | None = None
    uuid: str | None = None
    serial: str | None = None
    vbios: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    temperature_c: int | None = None
    temp_slowdown_c: int | None = None
    temp_shutdown_c: int | None = None
    temp_gpu_max_c: int | None = None
    memory_temperature_c: int | None = None
    temp_memory_max_c: int | None = None
    power_draw_w: float | None = None
    power_draw_average_w: float | None = None
    power_limit_w: float | None = None
    power_default_limit_w: float | None = None
    utilization_gpu_percent: int | None = None
    fan_speed_percent: int | None = None
    performance_state: str | None = None
    persistence_mode: bool | None = None
    compute_mode: str | None = None
    ecc_mode: bool | None = None
    ecc_mode_pending: bool | None = None
    ecc_volatile_corrected: int | None = None
    ecc_volatile_uncorrected: int | None = None
    ecc_aggregate_corrected: int | None = None
    ecc_aggregate_uncorrected: int | None = None
    sram_aggregate_corrected: int | None = None
    sram_aggregate_uncorrected: int | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None
    clocks_event_reasons_active: list[str] | None = None
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    pcie_replay_counter: int | None = None
    mig_mode: str | None = None
    mig_mode_pending: str | None = None
    mig_devices: int | None = None
    recovery_action: str | None = None
    processes: list[SmiProcess] | None = None

    def has_readings(self) -> bool:
        """Whether anything beyond the position was read (an empty GPU means the wrong format)."""
        return any(getattr(self, name) not in (None, []) for name in self.__struct_fields__ if name != "index")


class SmiFailure(msgspec.Struct):
    """A failure nvidia-smi printed instead of (or beside) a reading: ``Unable to determine the
    device handle for GPU ...``, ``No devices were found``, an infoROM warning...

    ``code`` names the failure (the judge's rule table is keyed by it); ``gpu`` is the bus id
    when the message names one; ``line`` is where it was printed.
    """

    code: str
    message: str
    gpu: str | None = None
    line: int | None = None


class NvidiaSmiRecord(msgspec.Struct):
    """A whole nvidia-smi report: driver, CUDA version and the GPUs it lists.

    ``attached_gpus`` is what nvidia-smi says is attached, which can exceed ``len(gpus)``
    (a filtered or truncated report), so both are kept. ``incomplete`` names what a
    reader found missing or unreadable (see :mod:`gpu_preflight.checks.evidence`).
    ``failures`` are nvidia-smi's own failure messages. ``fragment`` is set (to the number of
    readings in it) when the text is a pasted excerpt without the report's header: what it
    does not show (how many GPUs, which driver) is not inferred. ``selected`` holds the GPU ids
    the pasted command line asked for with ``-i``/``--id`` (nvidia-smi then lists only those,
    while ``attached_gpus`` still counts every GPU); ``None`` when no selection is shown.
    ``stated`` holds what an answer of nvidia-smi says that no check judges (a power limit set or
    refused, a reset done, ``No MIG-enabled devices found.``): reported, not judged, so a text of
    nothing else is judged nothing.
    """

    format: str
    driver_version: str | None = None
    cuda_version: str | None = None
    attached_gpus: int | None = None
    timestamp: str | None = None
    gpus: list[SmiGpu] = []
    incomplete: list[str] = []
    failures: list[SmiFailure] = []
    fragment: int | None = None
    selected: list[str] | None = None
    stated: list[str] = []


class DmonRecord(msgspec.Struct):
    """Samples keyed by column name (``gpu``, ``pwr``, ``gtemp``, ``sm``...), with the units row."""

    columns: list[str] = []
    units: list[str] = []
    samples: list[dict[str, float | None]] = []


class NvLinkState(msgspec.Struct):
    """One NVLink: up or not, its speed, and error counters when ``-e`` printed them."""

    link: int
    active: bool | None = None
    speed_gb_per_s: float | None = None
    errors: dict[str, int] = {}


class MigInstance(msgspec.Struct):
    """One MIG device of a GPU in ``nvidia-smi -L``: profile, index and UUID."""

    profile: str
    index: int
    uuid: str


NVLINK_NOTES = ("all_inactive", "not_supported", "mig_mode", "no_permission", "capabilities", "throughput")
"""What ``nvidia-smi nvlink -s`` prints under a GPU instead of its links (driver 525 and later):
``NVML: Unable to retrieve NVLink information as all links are inActive`` (``all_inactive``),
``Device does not have or support Nvlink`` (``not_supported``), ``Nvlink queries are not
supported for Devices in MIG mode`` (``mig_mode``); and what ``nvlink -g``/``-e`` print when the
driver keeps the link counters to administrators (``RmProfilingAdminOnly``): ``NVML: Unable to get
the NvLink link utilization counter control for link 0: Insufficient Permissions`` (``no_permission``);
and ``nvlink -c``/``--capabilities``, which lists what each link supports (``Link 0, P2P is supported:
true``) and nothing about whether it is up (``capabilities``); and ``nvlink -gt d``/``-gt r`` (``Link 0: Data Tx:
5863784 KiB``, ``Raw Rx``) or older drivers' ``-g 0`` (``Link 0: Rx0: 0 KBytes, Tx0: 0 KBytes``): traffic
counters, which say nothing of the link's state either (``throughput``)."""


class ListedGpu(msgspec.Struct):
    """One GPU of ``nvidia-smi -L`` (or ``nvlink -s``): index, name, UUID, its links and MIG devices.

    ``nvlink_note`` is one of :data:`NVLINK_NOTES` where nvidia-smi printed a message instead of the
    GPU's links: whether that is a fault depends on the GPU (see ``judge_listing``).
    """

    index: int
    name: str | None
    uuid: str | None
    links: list[NvLinkState] = []
    mig_devices: list[MigInstance] = []
    nvlink_note: str | None = None


class SmiListingRecord(msgspec.Struct):
    """GPUs of an ``nvlink`` or ``-L`` listing; ``elided`` when the author cut lines out.

    ``tool`` is the program that printed it (``dcgmi nvlink`` lists the same links as ``nvidia-smi
    nvlink``); ``switches`` are the NvSwitches ``dcgmi nvlink -s`` lists, by physical id, with their links.
    """

    format: str
    gpus: list[ListedGpu] = []
    elided: bool = False
    tool: str = "nvidia-smi"
    switches: list[ListedGpu] = []


class TopoDevice(msgspec.Struct):
    """One row of ``nvidia-smi topo -m``: the device, its link to each other device, CPU and NUMA affinity."""

    name: str
    links: dict[str, str] = {}
    cpu_affinity: str | None = None
    numa_affinity: str | None = None
    gpu_numa_id: str | None = None


P2P_STATUSES = {"OK": "status ok", "CNS": "chipset not supported", "GNS": "GPU not supported",
                "TNS": "topology not supported", "NS": "not supported", "DR": "disabled by regkey", "U": "unknown"}
"""The cells of ``nvidia-smi topo -p2p`` and what its legend says they mean (``X`` is the diagonal)."""


class P2pRecord(msgspec.Struct):
    """``nvidia-smi topo -p2p <r|w|n|a|p>``: each GPU pair's peer-to-peer status, GPU by GPU.

    ``capability`` is what was asked (``r`` read, ``w`` write, ``n`` NVLink, ``a`` atomics, ``p`` prop),
    known only from a pasted command line: the matrix itself does not say which it shows.
    """

    gpus: list[str] = []
    cells: dict[str, dict[str, str]] = {}
    capability: str | None = None


class TopoRecord(msgspec.Struct):
    """The whole ``nvidia-smi topo -m`` matrix, and which of its devices are NICs."""

    devices: list[TopoDevice] = []
    nic_names: dict[str, str] = {}
