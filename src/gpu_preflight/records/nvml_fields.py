"""Every NVML reading of a GPU, declared once: the call, the dump key, the check, the record fields.

One row per reading, in the order the collector makes the calls and a snapshot lists them.
From this table come: what :func:`gpu_preflight.backends.nvml.read_device` calls and where it
stores each answer (``path``: a dotted dump key, ``clocks_max.SM`` is ``{"clocks_max":
{"SM": ...}}``), what an NVML session keeps between reads (``keep``), what a replayed
snapshot must hold (``check``, in :mod:`gpu_preflight.probes._dump_schema`), and how
:func:`gpu_preflight.probes.gpu.gpu_record` fills the :class:`GpuRecord` (``fills``: record
field and conversion; a refusal becomes ``NA`` by :func:`~.nvml_values.value`'s one rule).

A reading a check uses has a check and fills; one that is only recorded for people
(InfoROM, GSP firmware, ...) has neither. ``GpuRecord`` stays a hand-typed ``msgspec.Struct`` (mypy
sees ``gpu.temperature_c``); ``tests/test_nvml_fields.py`` holds it and the fills to the same
field list.

Adding a metric: one row here, its field on :class:`GpuRecord`, and, for a C symbol the test
stub does not export yet, its getter in ``tests/nvml_stub/fake_nvml.c``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from . import nvml_values as v
from .nvml_values import Check

STATIC = "static"  # cannot change while NVML stays initialised: a session reads it once per init
SETTING = "setting"  # an administrator's setting: a monitor re-reads it every few ticks

# A field value read in the one nvmlDeviceGetFieldValues call (pynvml's NVML_FI_* name).
FIELD = "field"
# The links, read until the first one NVML does not know (backends.nvml.read_nvlinks).
NVLINK = "nvlink"

Fill = tuple[str, Callable[..., Any]]  # (GpuRecord field, conversion of the reading's value)


class Reading(NamedTuple):
    """One reading: what is called, where its answer goes in a dump, and what reads it."""

    path: str  # dotted dump key; for a field value "field_values.<NVML_FI_ name>"
    fn: str  # pynvml function, or FIELD / NVLINK for the readings read together
    args: tuple[Any, ...] = ()  # after the device handle
    keep: str = ""  # STATIC, SETTING or "" (read at every read)
    check: Check | None = None  # what a replayed value must be (None: nothing reads it)
    fills: tuple[Fill, ...] = ()  # record fields and their conversions (an NVLINK one gets (entry, record))
    older: tuple[str, str] | None = None  # (key older snapshots hold instead, what it is): replayed, not called
    label: str | None = None  # the key a refusal is named by on the record (default: path)
    since: str | None = None  # snapshots from before this reading lack it: not a problem when missing


def call(fn: str, *args: Any, path: str | None = None, **kw: Any) -> Reading:
    """A reading made by one pynvml call; its dump key is the function's name unless ``path`` says."""
    return Reading(path or fn, fn, args, **kw)


def field(name: str, check: Check, *fills: Fill) -> Reading:
    return Reading(f"field_values.{name}", FIELD, check=check, fills=fills)


def to(attr: str, conv: Callable[..., Any] = v.same) -> Fill:
    return (attr, conv)


INT, COUNT = v.integer(), v.integer()
CLOCK_TYPES = {"GRAPHICS": 0, "SM": 1, "MEM": 2, "VIDEO": 3}  # nvmlClockType_t
TEMP_THRESHOLDS = {"0": "temp_shutdown_c", "1": "temp_slowdown_c", "2": "temp_memory_max_c",
                   "3": "temp_gpu_max_c", "4": None, "5": None, "6": None, "7": None}  # nvmlTemperatureThresholds_t
ECC_TOTALS = {  # key: (errorType, counterType)
    "volatile_corrected": (0, 0),
    "volatile_uncorrected": (1, 0),
    "aggregate_corrected": (0, 1),
    "aggregate_uncorrected": (1, 1),
}
MEMORY_LOCATIONS = {"dram": 2, "sram": 7}  # nvmlMemoryLocation_t
RETIRED_PAGE_CAUSES = {"sbe": 0, "dbe": 1}

TABLE: tuple[Reading, ...] = (
    call("nvmlDeviceGetName", keep=STATIC, check=v.string, fills=(to("name"),)),
    call("nvmlDeviceGetUUID", keep=STATIC, check=v.string, fills=(to("uuid"),)),
    call("nvmlDeviceGetSerial", keep=STATIC, check=v.string, fills=(to("serial"),)),
    call("nvmlDeviceGetBoardPartNumber", keep=STATIC, check=v.string, fills=(to("board_part_number"),)),
    call("nvmlDeviceGetVbiosVersion", keep=STATIC, check=v.string, fills=(to("vbios"),)),
    call("nvmlDeviceGetInforomImageVersion", keep=STATIC),
    call("nvmlDeviceGetPciInfo_v3", keep=STATIC, check=v.struct(busId=v.string), fills=(to("pci_bus_id", v.bus_id),),
         older=("nvmlDeviceGetPciInfo", "PCI info")),
    call("nvmlDeviceGetMemoryInfo", check=v.memory, fills=(
        to("memory_total_bytes", v.member("total")), to("memory_used_bytes", v.member("used")),
        to("memory_free_bytes", v.member("free")))),
    call("nvmlDeviceGetTemperature", 0, check=INT, fills=(to("temperature_c", v.as_int),)),  # NVML_TEMPERATURE_GPU
    call("nvmlDeviceGetPowerUsage", check=INT, fills=(to("power_draw_w", v.watts),)),
    call("nvmlDeviceGetEnforcedPowerLimit", keep=SETTING, check=INT, fills=(to("power_limit_w", v.watts),)),
    call("nvmlDeviceGetPowerManagementLimit", keep=SETTING),
    call("nvmlDeviceGetPowerManagementDefaultLimit", keep=STATIC, check=INT,
         fills=(to("power_default_limit_w", v.watts),)),
    call("nvmlDeviceGetPowerManagementLimitConstraints", keep=STATIC),
    call("nvmlDeviceGetUtilizationRates", check=v.struct(gpu=v.integer(0, 100), memory=v.integer(0, 100)), fills=(
        to("utilization_gpu_percent", v.member("gpu")), to("utilization_memory_percent", v.member("memory")))),
    call("nvmlDeviceGetPersistenceMode", keep=SETTING, check=v.integer(0, 1),
         fills=(to("persistence_mode", v.as_bool),)),
    call("nvmlDeviceGetComputeMode", keep=SETTING, check=INT, fills=(to("compute_mode", v.compute_mode),)),
    call("nvmlDeviceGetMigMode", keep=SETTING, check=v.integers(2, 1), fills=(
        to("mig_current", v.item(0, v.as_bool)), to("mig_pending", v.item(1, v.as_bool)))),
    call("nvmlDeviceGetEccMode", keep=SETTING, check=v.integers(2, 1), fills=(
        to("ecc_current", v.item(0, v.as_bool)), to("ecc_pending", v.item(1, v.as_bool)))),
    call("nvmlDeviceGetCurrentClocksEventReasons", check=INT, fills=(to("clock_event_reasons", v.as_int),),
         older=("nvmlDeviceGetCurrentClocksThrottleReasons", "clock event reasons")),
    call("nvmlDeviceGetSupportedClocksEventReasons", keep=STATIC),
    call("nvmlDeviceGetRemappedRows", check=v.integers(4), fills=(
        to("remapped_rows_correctable", v.item(0)), to("remapped_rows_uncorrectable", v.item(1)),
        to("remap_pending", v.item(2, v.as_bool)), to("remap_failure", v.item(3, v.as_bool)))),
    call("nvmlDeviceGetRetiredPagesPendingStatus", check=v.integer(0, 1),
         fills=(to("retired_pages_pending", v.as_bool),)),
    call("nvmlDeviceGetCurrPcieLinkGeneration", check=INT, fills=(to("pcie_gen_current", v.as_int),)),
    call("nvmlDeviceGetMaxPcieLinkGeneration", keep=STATIC, check=INT, fills=(to("pcie_gen_max", v.as_int),)),
    call("nvmlDeviceGetGpuMaxPcieLinkGeneration", keep=STATIC, check=INT, fills=(to("pcie_gen_gpu_max", v.as_int),)),
    call("nvmlDeviceGetCurrPcieLinkWidth", check=INT, fills=(to("pcie_width_current", v.as_int),)),
    call("nvmlDeviceGetMaxPcieLinkWidth", keep=STATIC, check=INT, fills=(to("pcie_width_max", v.as_int),)),
    call("nvmlDeviceGetPcieReplayCounter", check=INT, fills=(to("pcie_replay_counter", v.as_int),)),
    call("nvmlDeviceGetPerformanceState", check=v.integer(0, 32), fills=(to("performance_state", v.as_int),)),
    call("nvmlDeviceGetArchitecture", keep=STATIC),
    call("nvmlDeviceGetCudaComputeCapability", keep=STATIC),
    call("nvmlDeviceGetIndex", keep=STATIC, check=INT, fills=(to("index"),)),  # not an int: the dump's position
    call("nvmlDeviceGetMinorNumber", keep=STATIC),
    call("nvmlDeviceGetComputeRunningProcesses", check=v.process_list, fills=(to("processes", v.processes),)),
    call("nvmlDeviceGetGspFirmwareVersion", keep=STATIC),
    call("nvmlDeviceGetNumaNodeId", keep=STATIC),
    call("nvmlDeviceGetModuleId", keep=STATIC),
    *(call("nvmlDeviceGetClockInfo", code, path=f"clocks_current.{name}", check=INT if name == "SM" else None,
           fills=(to("sm_clock_mhz"),) if name == "SM" else ()) for name, code in CLOCK_TYPES.items()),
    *(call("nvmlDeviceGetMaxClockInfo", code, path=f"clocks_max.{name}", keep=STATIC,
           check=INT if name == "SM" else None, fills=(to("sm_clock_max_mhz"),) if name == "SM" else ())
      for name, code in CLOCK_TYPES.items()),
    *(call("nvmlDeviceGetApplicationsClock", code, path=f"clocks_app.{name}", keep=STATIC)
      for name, code in CLOCK_TYPES.items()),
    *(call("nvmlDeviceGetTemperatureThreshold", int(t), path=f"temp_thresholds.{t}", keep=STATIC if attr else "",
           check=INT if attr else None, fills=(to(attr),) if attr else ())  # the acoustic/GPS ones can be set
      for t, attr in TEMP_THRESHOLDS.items()),
    *(call("nvmlDeviceGetTotalEccErrors", et, ct, path=f"ecc_total.{k}", check=INT, fills=(to(f"ecc_{k}"),),
           label="ecc_total") for k, (et, ct) in ECC_TOTALS.items()),
    *(call("nvmlDeviceGetMemoryErrorCounter", et, ct, code, path=f"memory_errors.{loc}.{k}",
           check=INT if loc == "sram" else None, fills=(to(f"sram_{k}"),) if loc == "sram" else (),
           label=f"memory_errors.{loc}", since="SRAM counters")
      for loc, code in MEMORY_LOCATIONS.items() for k, (et, ct) in ECC_TOTALS.items() if k.startswith("aggregate")),
    *(call("nvmlDeviceGetRetiredPages", cause, path=f"retired_pages.{k}", check=v.pages,
           fills=(to(f"retired_pages_{k}", v.page_count),)) for k, cause in RETIRED_PAGE_CAUSES.items()),
    Reading("nvlink", NVLINK, fills=(to("nvlinks", v.nvlinks),)),  # checked link by link in _dump_schema
    field("NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", v.count, to("recovery_action", v.as_int)),  # driver r570+
    field("NVML_FI_DEV_MEMORY_TEMP", v.count, to("memory_temperature_c", v.as_int)),
    *(Reading(f"field_values.{name}", FIELD) for name in (
        "NVML_FI_DEV_ECC_CURRENT", "NVML_FI_DEV_ECC_PENDING", "NVML_FI_DEV_ECC_SBE_VOL_TOTAL",
        "NVML_FI_DEV_ECC_DBE_VOL_TOTAL", "NVML_FI_DEV_ECC_SBE_AGG_TOTAL", "NVML_FI_DEV_ECC_DBE_AGG_TOTAL",
        "NVML_FI_DEV_RETIRED_SBE", "NVML_FI_DEV_RETIRED_DBE", "NVML_FI_DEV_RETIRED_PENDING",
        "NVML_FI_DEV_REMAPPED_COR", "NVML_FI_DEV_REMAPPED_UNC", "NVML_FI_DEV_REMAPPED_PENDING",
        "NVML_FI_DEV_REMAPPED_FAILURE", "NVML_FI_DEV_PCIE_REPLAY_COUNTER", "NVML_FI_DEV_PCIE_REPLAY_ROLLOVER_COUNTER",
        "NVML_FI_DEV_PCIE_COUNT_CORRECTABLE_ERRORS", "NVML_FI_DEV_PCIE_COUNT_FATAL_ERROR",
        "NVML_FI_DEV_PCIE_COUNT_NON_FATAL_ERROR", "NVML_FI_DEV_NVLINK_LINK_COUNT",
        "NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        "NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL")),
    field("NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT", v.count, to("nvswitch_links", v.as_int)),
    *(Reading(f"field_values.{name}", FIELD) for name in (
        "NVML_FI_DEV_POWER_DEFAULT_LIMIT", "NVML_FI_DEV_POWER_CURRENT_LIMIT",
        "NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT", "NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT")),
)

# The order gpu_record converts the readings in. It decides which refusal a lost GPU is named
# by and the order of a record's call errors (both in reports), so it stays what it has been; a
# reading not listed here is converted after these, in table order: a new metric need not be.
CONVERTED_FIRST: tuple[str, ...] = (
    "nvmlDeviceGetIndex", "nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetSerial",
    "nvmlDeviceGetVbiosVersion", "nvmlDeviceGetBoardPartNumber", "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetTemperature", *(f"temp_thresholds.{t}" for t in range(4)),
    "field_values.NVML_FI_DEV_MEMORY_TEMP", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetPowerManagementDefaultLimit", "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetPersistenceMode",
    "nvmlDeviceGetComputeMode", "nvmlDeviceGetMigMode", "nvmlDeviceGetEccMode", *(f"ecc_total.{k}" for k in ECC_TOTALS),
    "memory_errors.sram.aggregate_corrected", "memory_errors.sram.aggregate_uncorrected", "nvmlDeviceGetRemappedRows",
    "retired_pages.sbe", "retired_pages.dbe", "nvmlDeviceGetRetiredPagesPendingStatus",
    "field_values.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", "nvmlDeviceGetCurrentClocksEventReasons",
    "clocks_current.SM", "clocks_max.SM", "nvmlDeviceGetPerformanceState", "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetGpuMaxPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetMaxPcieLinkWidth", "nvmlDeviceGetPcieReplayCounter",
    "field_values.NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT", "nvlink", "nvmlDeviceGetComputeRunningProcesses",
)


def _converted() -> tuple[Reading, ...]:
    by_path = {r.path: r for r in TABLE if r.fills}
    first = [by_path[p] for p in CONVERTED_FIRST]
    return (*first, *(r for r in TABLE if r.fills and r.path not in CONVERTED_FIRST))


CONVERTED = _converted()  # the readings with fills, in conversion order
CALLS = tuple(r for r in TABLE if r.fn not in (FIELD, NVLINK))  # one pynvml call each, in call order
FIELDS = tuple(r.path.partition(".")[2] for r in TABLE if r.fn == FIELD)  # in the bulk call's order
KEPT = frozenset(r.path for r in TABLE if r.keep == STATIC)
SETTINGS = frozenset(r.path for r in TABLE if r.keep == SETTING)
