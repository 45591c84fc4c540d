"""The ``gpu`` fact: an NVML dump (live or replayed) turned into typed records.

Live and replayed runs go through the same :func:`facts_from_dump`, so ``--replay`` of a
snapshot judges exactly what the live run read.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

from ..model import NA
from ..records import GpuFacts, GpuProcess, GpuRecord, NvLink
from ..registry import NVML_DUMP_ON_DEMAND, NVML_SESSION, ProbeContext, probe

NOT_SUPPORTED = 3
GPU_IS_LOST = 15
# Refusals that say "this GPU or driver has no such reading", not "something is wrong".
BENIGN_ERRORS = {NOT_SUPPORTED: "not supported", 2: "not supported (invalid argument)",
                 13: "not supported by this driver (function not found)"}
UNAVAILABLE_REASONS = {12: "NVML library not found", 9: "driver not loaded"}
COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
NVLINK_COUNTERS = {"0": "replay", "1": "recovery", "2": "crc_flit", "3": "crc_data", "4": "ecc_data"}


class ReplayError(ValueError):
    """A replay file that is not an NVML dump."""


def load_dump(path: str | Path) -> dict[str, Any]:
    """Read a dump written by ``gpu-preflight snapshot`` and check every value a check reads.

    A damaged dump (a wrong type, an impossible value, a GPU announced but not described)
    raises :class:`ReplayError` naming the keys: judging it would pass a broken GPU.
    Loaded dumps are cached per file version, since the gpu, system and kernel-log probes
    all read the same snapshot.
    """
    p = Path(path)
    try:
        st = p.stat()
    except OSError as exc:
        raise ReplayError(f"{p}: cannot read replay file: {exc.strerror or exc}") from exc
    return _load_dump(str(p), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=4)
def _load_dump(path: str, _mtime_ns: int, _size: int) -> dict[str, Any]:
    from ..boundedio import SNAPSHOT_LIMIT, InputError, load_json
    from ._dump_schema import dump_problems

    try:
        data = load_json(path, limit=SNAPSHOT_LIMIT, what="NVML snapshot")
    except InputError as exc:
        raise ReplayError(f"not a JSON NVML dump: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("system"), dict) \
            or not isinstance(data.get("devices"), list):
        raise ReplayError(f"{path}: not an NVML dump (expected 'system' and 'devices' keys, "
                          "as written by `gpu-preflight snapshot`)")
    for i, dev in enumerate(data["devices"]):
        if not isinstance(dev, dict):
            raise ReplayError(f"{path}: devices[{i}] is not an object")
    if problems := dump_problems(data):
        raise ReplayError(f"{path}: damaged NVML dump: {'; '.join(problems)}")
    return data


@probe("gpu")
def gpu_probe(ctx: ProbeContext) -> GpuFacts:
    """Read every GPU through NVML once (or replay a snapshot) and list NVIDIA PCI devices."""
    replay = ctx.inputs.replay
    if replay:
        return facts_from_dump(load_dump(replay), source=f"replay:{replay}")
    from ..backends import nvml  # the live path only: replay needs neither ctypes nor pynvml

    pci_gpus = nvidia_gpus_on_bus()
    try:
        dump = nvml.collect(device_timeout_s=ctx.timeout_s * 0.8, call_timeout_s=ctx.config.gpu.nvml_call_timeout_s,
                            session=ctx.state.kept.get(NVML_SESSION))  # a short-interval monitor's: NVML kept open
    except nvml.NvmlUnavailable as exc:
        reason = UNAVAILABLE_REASONS.get(exc.value or -1) or exc.message
        return GpuFacts(source="live", available=False, reason=reason,
                        nvml_error=f"{exc.name}: {exc.message}", pci_gpus=pci_gpus)
    if not ctx.state.kept.get(NVML_DUMP_ON_DEMAND) or any("timed_out" in dev for dev in dump["devices"]):
        indent = 1 if ctx.inputs.report_dir else None  # kept for a reader
        ctx.save_artifact("nvml_dump", "nvml_dump.json", json.dumps(dump, indent=indent))
    facts = facts_from_dump(dump, source="live")
    facts.pci_gpus = pci_gpus
    return facts


PCI_DEVICES = "/sys/bus/pci/devices"
_pci_seen: dict[str, tuple[tuple[tuple[str, int], ...], list[str]]] = {}


def nvidia_gpus_on_bus(root: str = PCI_DEVICES) -> list[str] | NA:
    """:func:`~gpu_preflight.backends.pci.nvidia_gpus`, read again only when the bus's device list changed.

    A PCI device's vendor and class in sysfs are read once when the kernel enumerates it
    and never change while its entry exists; a GPU that falls off the bus keeps its entry.
    So the answer can only change when entries come or go (hot-plug, ``remove``, rescan),
    and each entry's name and inode (a re-created entry gets a new one) tell that from one
    directory listing, instead of two file reads per device every monitor tick. A listing
    or scan that fails is not kept.
    """
    from ..backends import pci

    try:
        with os.scandir(root) as entries:
            listing = tuple(sorted((e.name, e.inode()) for e in entries))
    except OSError:
        return pci.nvidia_gpus(root)  # says why, as NA
    seen = _pci_seen.get(root)
    if seen is not None and seen[0] == listing:
        return list(seen[1])
    found = pci.nvidia_gpus(root)
    if isinstance(found, list):
        _pci_seen[root] = (listing, list(found))
    return found


def facts_from_dump(dump: dict[str, Any], source: str) -> GpuFacts:
    system = dump.get("system", {})
    cuda = value(system.get("nvmlSystemGetCudaDriverVersion_v2") or system.get("nvmlSystemGetCudaDriverVersion"))
    facts = GpuFacts(
        source=source,
        available=True,
        driver_version=value(system.get("nvmlSystemGetDriverVersion")),
        nvml_version=value(system.get("nvmlSystemGetNVMLVersion")),
        cuda_driver_version=f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else cuda,
        pci_gpus=NA("replayed snapshot: PCI bus not scanned") if source != "live" else NA("not read"),
    )
    facts.gpus = [gpu_record(i, dev) for i, dev in enumerate(dump.get("devices", []))]
    refused = {f"system {key}": f"{entry['error']}: {entry.get('str', '')}" for key, entry in system.items()
               if isinstance(entry, dict) and "error" in entry and entry.get("value") not in BENIGN_ERRORS}
    for rec in facts.gpus:  # a driver that refuses system-wide calls is judged like a refused reading
        rec.call_errors.update(refused)
    return facts


def value(entry: Any, record: GpuRecord | None = None, key: str = "") -> Any:
    """The value of a dump entry, or NA with the reason; GPU-lost errors mark the record."""
    if not isinstance(entry, dict):
        return NA("not recorded")
    if "ok" in entry:
        return entry["ok"]
    if "error" in entry:
        code = entry.get("value")
        if code in BENIGN_ERRORS:
            return NA(BENIGN_ERRORS[code])
        if record is not None:
            if code == GPU_IS_LOST:
                record.lost = record.lost or f"GPU is lost ({key})"
            else:
                record.call_errors[key] = f"{entry['error']}: {entry.get('str', '')}"
        return NA(str(entry.get("str") or entry["error"]))
    if "exc" in entry:
        return NA(f"not read ({entry['exc']})")
    return NA("not recorded")


def field_value(fields: Any, name: str, record: GpuRecord) -> Any:
    """One NVML field value; a refusal other than "not supported" is recorded like a failed call."""
    if not isinstance(fields, dict) or "error" in fields or "exc" in fields:
        return NA("field values not read")
    fv = fields.get(name)
    if not isinstance(fv, dict):
        return NA("field not recorded")
    if "value" in fv:
        return fv["value"]
    rc = fv.get("nvmlReturn")
    if rc in BENIGN_ERRORS:
        return NA(BENIGN_ERRORS[rc])
    if rc == GPU_IS_LOST:
        record.lost = record.lost or f"GPU is lost (field {name})"
    else:
        record.call_errors[f"field {name}"] = f"NVML return {rc}"
    return NA(f"NVML return {rc}")


def _int(v: Any) -> Any:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v


def _bool(v: Any) -> Any:
    return bool(v) if isinstance(v, (int, bool)) else v


def _watts(v: Any) -> Any:
    return v / 1000.0 if isinstance(v, (int, float)) else v


def _pair(v: Any, i: int) -> Any:
    return v[i] if isinstance(v, list) and len(v) > i else (v if isinstance(v, NA) else NA("malformed"))


def _bus_id(info: Any) -> Any:
    return info.get("busId", NA("no busId")) if isinstance(info, dict) else info


def _nested(group: Any, key: str, rec: GpuRecord, name: str) -> Any:
    return value(group.get(key), rec, name) if isinstance(group, dict) else NA("not recorded")


def gpu_record(index: int, dev: dict[str, Any]) -> GpuRecord:
    rec = GpuRecord(index=index)
    if "handle" in dev:
        value(dev["handle"], rec, "nvmlDeviceGetHandleByIndex")
        rec.lost = rec.lost or f"no handle: {value(dev['handle'])}"
        return rec

    def v(key: str) -> Any:
        return value(dev.get(key), rec, key)

    nvml_index = v("nvmlDeviceGetIndex")
    rec.index = nvml_index if isinstance(nvml_index, int) else index
    rec.name, rec.uuid, rec.serial = v("nvmlDeviceGetName"), v("nvmlDeviceGetUUID"), v("nvmlDeviceGetSerial")
    rec.vbios, rec.board_part_number = v("nvmlDeviceGetVbiosVersion"), v("nvmlDeviceGetBoardPartNumber")
    pci_info = v("nvmlDeviceGetPciInfo_v3")
    if isinstance(pci_info, NA) and "nvmlDeviceGetPciInfo" in dev:
        pci_info = v("nvmlDeviceGetPciInfo")
    rec.pci_bus_id = _bus_id(pci_info)
    mem = v("nvmlDeviceGetMemoryInfo")
    for attr, key in (("memory_total_bytes", "total"), ("memory_used_bytes", "used"), ("memory_free_bytes", "free")):
        setattr(rec, attr, mem.get(key, NA("missing")) if isinstance(mem, dict) else mem)
    rec.temperature_c = _int(v("nvmlDeviceGetTemperature"))
    thresholds = dev.get("temp_thresholds", {})
    rec.temp_shutdown_c = _nested(thresholds, "0", rec, "temp_thresholds.0")
    rec.temp_slowdown_c = _nested(thresholds, "1", rec, "temp_thresholds.1")
    rec.temp_memory_max_c = _nested(thresholds, "2", rec, "temp_thresholds.2")
    rec.temp_gpu_max_c = _nested(thresholds, "3", rec, "temp_thresholds.3")
    fields = dev.get("field_values")
    if isinstance(fields, dict) and ("error" in fields or "exc" in fields):
        value(fields, rec, "nvmlDeviceGetFieldValues")  # a failed bulk read marks the GPU like any call
    rec.memory_temperature_c = _int(field_value(fields, "NVML_FI_DEV_MEMORY_TEMP", rec))
    rec.power_draw_w = _watts(v("nvmlDeviceGetPowerUsage"))
    rec.power_limit_w = _watts(v("nvmlDeviceGetEnforcedPowerLimit"))
    rec.power_default_limit_w = _watts(v("nvmlDeviceGetPowerManagementDefaultLimit"))
    util = v("nvmlDeviceGetUtilizationRates")
    rec.utilization_gpu_percent = util.get("gpu", NA("missing")) if isinstance(util, dict) else util
    rec.utilization_memory_percent = util.get("memory", NA("missing")) if isinstance(util, dict) else util
    rec.persistence_mode = _bool(v("nvmlDeviceGetPersistenceMode"))
    mode = v("nvmlDeviceGetComputeMode")
    rec.compute_mode = COMPUTE_MODES.get(mode, f"unknown({mode})") if isinstance(mode, int) else mode
    mig = v("nvmlDeviceGetMigMode")
    rec.mig_current, rec.mig_pending = _bool(_pair(mig, 0)), _bool(_pair(mig, 1))
    ecc = v("nvmlDeviceGetEccMode")
    rec.ecc_current, rec.ecc_pending = _bool(_pair(ecc, 0)), _bool(_pair(ecc, 1))
    totals = dev.get("ecc_total", {})
    rec.ecc_volatile_corrected = _nested(totals, "volatile_corrected", rec, "ecc_total")
    rec.ecc_volatile_uncorrected = _nested(totals, "volatile_uncorrected", rec, "ecc_total")
    rec.ecc_aggregate_corrected = _nested(totals, "aggregate_corrected", rec, "ecc_total")
    rec.ecc_aggregate_uncorrected = _nested(totals, "aggregate_uncorrected", rec, "ecc_total")
    sram = dev.get("memory_errors", {}).get("sram", {}) if isinstance(dev.get("memory_errors"), dict) else {}
    rec.sram_aggregate_corrected = _nested(sram, "aggregate_corrected", rec, "memory_errors.sram")
    rec.sram_aggregate_uncorrected = _nested(sram, "aggregate_uncorrected", rec, "memory_errors.sram")
    rows = v("nvmlDeviceGetRemappedRows")
    rec.remapped_rows_correctable, rec.remapped_rows_uncorrectable = _pair(rows, 0), _pair(rows, 1)
    rec.remap_pending, rec.remap_failure = _bool(_pair(rows, 2)), _bool(_pair(rows, 3))
    retired = dev.get("retired_pages", {})
    for attr, key in (("retired_pages_sbe", "sbe"), ("retired_pages_dbe", "dbe")):
        pages = _nested(retired, key, rec, f"retired_pages.{key}")
        setattr(rec, attr, len(pages) if isinstance(pages, list) else _int(pages))
    rec.retired_pages_pending = _bool(v("nvmlDeviceGetRetiredPagesPendingStatus"))
    rec.recovery_action = _int(field_value(fields, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", rec))
    reasons = v("nvmlDeviceGetCurrentClocksEventReasons")
    if isinstance(reasons, NA) and "nvmlDeviceGetCurrentClocksThrottleReasons" in dev:
        reasons = v("nvmlDeviceGetCurrentClocksThrottleReasons")
    rec.clock_event_reasons = _int(reasons)
    rec.sm_clock_mhz = _nested(dev.get("clocks_current", {}), "SM", rec, "clocks_current.SM")
    rec.sm_clock_max_mhz = _nested(dev.get("clocks_max", {}), "SM", rec, "clocks_max.SM")
    rec.performance_state = _int(v("nvmlDeviceGetPerformanceState"))
    rec.pcie_gen_current = _int(v("nvmlDeviceGetCurrPcieLinkGeneration"))
    rec.pcie_gen_max = _int(v("nvmlDeviceGetMaxPcieLinkGeneration"))
    rec.pcie_gen_gpu_max = _int(v("nvmlDeviceGetGpuMaxPcieLinkGeneration"))
    rec.pcie_width_current = _int(v("nvmlDeviceGetCurrPcieLinkWidth"))
    rec.pcie_width_max = _int(v("nvmlDeviceGetMaxPcieLinkWidth"))
    rec.pcie_replay_counter = _int(v("nvmlDeviceGetPcieReplayCounter"))
    rec.nvswitch_links = _int(field_value(fields, "NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT", rec))
    rec.nvlinks = nvlinks(dev.get("nvlink"), rec)
    procs = v("nvmlDeviceGetComputeRunningProcesses")
    rec.processes = [_process(p) for p in procs if isinstance(p, dict)] if isinstance(procs, list) else procs
    if "timed_out" in dev:
        hung = dev["timed_out"]
        rec.lost = rec.lost or f"NVML call {hung.get('call')} did not return within {hung.get('after_s')} s"
    return rec


def _process(entry: dict[str, Any]) -> GpuProcess:
    used = entry.get("usedGpuMemory")
    return GpuProcess(int(entry.get("pid", -1)), int(used) if isinstance(used, int) else NA("not reported"))


def nvlinks(entry: Any, rec: GpuRecord) -> list[NvLink] | NA:
    """Links that NVML knows; ``NA`` when the GPU has no NVLink at all."""
    if not isinstance(entry, dict):
        return NA("not recorded")
    links: list[NvLink] = []
    for key in sorted(entry, key=lambda k: int(k) if k.isdigit() else 10**6):
        link = entry[key]
        state = value(link.get("state"), rec, f"nvlink.{key}") if "state" in link else value(link, rec, "nvlink")
        if isinstance(state, NA):
            continue  # an unsupported link ends the list (the collector stops there)
        errors = link.get("errors", {})
        links.append(NvLink(
            link=int(key), active=bool(state),
            version=value(link.get("version")),
            remote_pci=_bus_id(value(link.get("remote_pci"))),
            errors={name: _nested(errors, code, rec, f"nvlink.{key}.errors") for code, name in NVLINK_COUNTERS.items()},
        ))
    return links if links else NA("GPU has no NVLink")
