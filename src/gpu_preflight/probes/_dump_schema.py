"""The shape and types of an NVML snapshot, checked before a replay judges it.

A replay trusts a file, and a damaged file must not pass a broken GPU: a second device
``{}``, negative ECC counters, a temperature of ``null``, remapped rows ``"garbage"`` or
``nvmlDeviceGetCount`` 3 with 2 devices listed all once read as "nothing wrong". Every
value the checks read is validated here (a missing key, a wrong type or an impossible
value is a problem naming its dotted key), and a GPU the dump announces but does not
describe is one too. Keys no check reads are not validated: they cannot change a verdict.

Each call is stored as ``{"ok": value}``, ``{"error": name, "value": code, "str": text}``
or ``{"exc": name, "str": text}`` (see :mod:`gpu_preflight.backends.nvml`); an error entry
is a valid reading whose meaning the GPU probe decides.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["dump_problems"]

Check = Callable[[Any], str | None]
MAX_PROBLEMS = 5


def _int(low: int = 0, high: int | None = None) -> Check:
    def check(v: Any) -> str | None:
        if isinstance(v, bool) or not isinstance(v, int):
            return f"expected an integer, got {_show(v)}"
        if v < low or (high is not None and v > high):
            return f"impossible value {v} (expected {low}..{high if high is not None else ''})"
        return None
    return check


def _str(v: Any) -> str | None:
    return None if isinstance(v, str) else f"expected a string, got {_show(v)}"


def _ints(n: int, high: int | None = None) -> Check:
    item = _int(0, high)

    def check(v: Any) -> str | None:
        if not isinstance(v, list) or len(v) < n:
            return f"expected a list of {n} integers, got {_show(v)}"
        return next((p for p in map(item, v[:n]) if p), None)
    return check


def _record(**members: Check) -> Check:
    def check(v: Any) -> str | None:
        if not isinstance(v, Mapping):
            return f"expected an object, got {_show(v)}"
        for key, member in members.items():
            if key not in v:
                return f"missing '{key}'"
            if problem := member(v[key]):
                return f"{key}: {problem}"
        return None
    return check


def _memory(v: Any) -> str | None:
    if problem := _record(total=_int(), free=_int(), used=_int())(v):
        return problem
    return f"impossible value: used {v['used']} > total {v['total']}" if v["used"] > v["total"] else None


def _processes(v: Any) -> str | None:
    if not isinstance(v, list):
        return f"expected a list, got {_show(v)}"
    for i, p in enumerate(v):
        if not isinstance(p, Mapping) or (problem := _int()(p.get("pid"))):
            return f"[{i}]: expected an object with an integer 'pid'"
        used = p.get("usedGpuMemory")
        if used is not None and (problem := _int()(used)):
            return f"[{i}].usedGpuMemory: {problem}"
    return None


def _count(v: Any) -> str | None:
    """A field value: NVML types some counters as doubles (``0.0``)."""
    if isinstance(v, float) and v == v and v >= 0 and v == int(v):
        return None
    return _int()(v)


def _pages(v: Any) -> str | None:
    if isinstance(v, list):
        return None
    return _int()(v)


COUNT = _int()
PCI = _record(busId=_str)
DEVICE: dict[str, Check] = {
    "nvmlDeviceGetIndex": _int(), "nvmlDeviceGetName": _str, "nvmlDeviceGetUUID": _str,
    "nvmlDeviceGetSerial": _str, "nvmlDeviceGetVbiosVersion": _str, "nvmlDeviceGetBoardPartNumber": _str,
    "nvmlDeviceGetMemoryInfo": _memory, "nvmlDeviceGetTemperature": _int(),
    "nvmlDeviceGetPowerUsage": _int(), "nvmlDeviceGetEnforcedPowerLimit": _int(),
    "nvmlDeviceGetPowerManagementDefaultLimit": _int(),
    "nvmlDeviceGetUtilizationRates": _record(gpu=_int(0, 100), memory=_int(0, 100)),
    "nvmlDeviceGetPersistenceMode": _int(0, 1), "nvmlDeviceGetComputeMode": _int(),
    "nvmlDeviceGetMigMode": _ints(2, 1), "nvmlDeviceGetEccMode": _ints(2, 1),
    "nvmlDeviceGetRemappedRows": _ints(4), "nvmlDeviceGetRetiredPagesPendingStatus": _int(0, 1),
    "nvmlDeviceGetPerformanceState": _int(0, 32),
    "nvmlDeviceGetCurrPcieLinkGeneration": _int(), "nvmlDeviceGetMaxPcieLinkGeneration": _int(),
    "nvmlDeviceGetGpuMaxPcieLinkGeneration": _int(), "nvmlDeviceGetCurrPcieLinkWidth": _int(),
    "nvmlDeviceGetMaxPcieLinkWidth": _int(), "nvmlDeviceGetPcieReplayCounter": _int(),
    "nvmlDeviceGetComputeRunningProcesses": _processes,
}
ALTERNATIVES: dict[str, tuple[tuple[str, ...], Check]] = {
    "PCI info": (("nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo"), PCI),
    "clock event reasons": (("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
                            _int()),
}
GROUPS: dict[str, dict[str, Check]] = {
    "temp_thresholds": {str(t): _int() for t in range(4)},
    "ecc_total": {k: _int() for k in ("volatile_corrected", "volatile_uncorrected", "aggregate_corrected",
                                      "aggregate_uncorrected")},
    "retired_pages": {"sbe": _pages, "dbe": _pages},
    "clocks_current": {"SM": _int()}, "clocks_max": {"SM": _int()},
}
FIELDS_READ = {"NVML_FI_DEV_MEMORY_TEMP": _count, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION": _count,
               "NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT": _count}
SYSTEM: dict[str, Check] = {"nvmlSystemGetDriverVersion": _str, "nvmlSystemGetNVMLVersion": _str}


def dump_problems(data: Mapping[str, Any]) -> list[str]:
    """Every problem (up to a few) that makes ``data`` unfit to replay, each naming its key."""
    out: list[str] = []
    system, devices = data["system"], data["devices"]
    for key, check in SYSTEM.items():
        _entry(out, f"system.{key}", system.get(key), check)
    cuda = [k for k in ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion") if k in system]
    if not cuda:
        out.append("system.nvmlSystemGetCudaDriverVersion: missing")
    for key in cuda:
        _entry(out, f"system.{key}", system[key], _int())
    count = system.get("nvmlDeviceGetCount")
    if not isinstance(count, Mapping) or "ok" not in count:
        out.append("system.nvmlDeviceGetCount: no GPU count (the call failed or is missing): "
                   "cannot tell whether every GPU is described")
    elif problem := COUNT(count["ok"]):
        out.append(f"system.nvmlDeviceGetCount: {problem}")
    elif count["ok"] != len(devices):
        out.append(f"system.nvmlDeviceGetCount: {count['ok']} GPU(s) announced but {len(devices)} described")
    for i, dev in enumerate(devices):
        _device(out, f"devices[{i}]", dev)
        if len(out) >= MAX_PROBLEMS:
            break
    if "host" in data:
        _host(out, data["host"])
    return out[:MAX_PROBLEMS]


def _device(out: list[str], where: str, dev: Mapping[str, Any]) -> None:
    if "handle" in dev:
        _entry(out, f"{where}.handle", dev["handle"], _str, error_only=True)
        return
    partial = "timed_out" in dev  # a GPU that hung NVML: what was read before the deadline
    if partial and not isinstance(dev["timed_out"], Mapping):
        out.append(f"{where}.timed_out: expected an object, got {_show(dev['timed_out'])}")
    for key, check in DEVICE.items():
        if key in dev or not partial:
            _entry(out, f"{where}.{key}", dev.get(key), check)
    for label, (keys, check) in ALTERNATIVES.items():
        present = [k for k in keys if k in dev]
        if not present and not partial:
            out.append(f"{where}.{keys[0]}: missing ({label})")
        for key in present[:1]:
            _entry(out, f"{where}.{key}", dev[key], check)
    for group, members in GROUPS.items():
        if group not in dev:
            if not partial:
                out.append(f"{where}.{group}: missing")
            continue
        if not isinstance(dev[group], Mapping):
            out.append(f"{where}.{group}: expected an object, got {_show(dev[group])}")
            continue
        for key, check in members.items():
            if key in dev[group] or not partial:
                _entry(out, f"{where}.{group}.{key}", dev[group].get(key), check)
    _memory_errors(out, where, dev.get("memory_errors"), partial)
    _nvlinks(out, where, dev.get("nvlink"), partial)
    _fields(out, where, dev.get("field_values"), partial)


def _memory_errors(out: list[str], where: str, group: Any, partial: bool) -> None:
    """SRAM counters; dumps from before they were collected have no ``memory_errors`` at all."""
    if group is None:
        return
    sram = group.get("sram") if isinstance(group, Mapping) else None
    if not isinstance(sram, Mapping):
        out.append(f"{where}.memory_errors.sram: expected an object, got {_show(sram)}")
        return
    for key in ("aggregate_corrected", "aggregate_uncorrected"):
        _entry(out, f"{where}.memory_errors.sram.{key}", sram.get(key), _int())


def _nvlinks(out: list[str], where: str, links: Any, partial: bool) -> None:
    if links is None and partial:
        return
    if not isinstance(links, Mapping):
        out.append(f"{where}.nvlink: expected an object, got {_show(links)}")
        return
    for key, link in links.items():
        at = f"{where}.nvlink.{key}"
        if not str(key).isdigit():
            out.append(f"{at}: link keys are numbers")
        elif isinstance(link, Mapping) and "state" in link:
            _entry(out, f"{at}.state", link["state"], _int(0, 1))
            errors = link.get("errors")
            if not isinstance(errors, Mapping):
                out.append(f"{at}.errors: expected an object, got {_show(errors)}")
                continue
            for code in map(str, range(5)):
                _entry(out, f"{at}.errors.{code}", errors.get(code), _int())
        else:
            _entry(out, at, link, _int(0, 1), error_only=True)


def _fields(out: list[str], where: str, fields: Any, partial: bool) -> None:
    if fields is None and partial:
        return
    if isinstance(fields, Mapping) and ("error" in fields or "exc" in fields):
        _entry(out, f"{where}.field_values", fields, _str, error_only=True)
        return
    if not isinstance(fields, Mapping):
        out.append(f"{where}.field_values: expected an object, got {_show(fields)}")
        return
    for name, check in FIELDS_READ.items():
        at = f"{where}.field_values.{name}"
        if name not in fields:
            continue  # an older pynvml without this field: the check says "not recorded"
        fv = fields[name]
        if not isinstance(fv, Mapping):
            out.append(f"{at}: expected an object, got {_show(fv)}")
        elif "value" in fv:
            if problem := check(fv["value"]):
                out.append(f"{at}.value: {problem}")
        elif problem := _int()(fv.get("nvmlReturn")):
            out.append(f"{at}: neither a value nor an nvmlReturn code ({problem})")


def _host(out: list[str], host: Any) -> None:
    if not isinstance(host, Mapping):
        out.append(f"host: expected an object, got {_show(host)}")
        return
    system = host.get("system")
    if not isinstance(system, Mapping):
        out.append(f"host.system: expected an object, got {_show(system)}")
        return
    for key in ("memory_total_bytes", "memory_available_bytes", "cpu_count", "shm_total_bytes", "numa_nodes"):
        _host_value(out, f"host.system.{key}", system.get(key), _int())
    for key in ("memlock_soft", "memlock_hard", "nofile_soft", "nofile_hard"):
        _host_value(out, f"host.system.{key}", system.get(key), _int(-1))
    _host_value(out, "host.system.kernel", system.get("kernel"), _str)
    for key in ("load_1m", "cpu_percent"):
        value = system.get(key)
        if not (isinstance(value, Mapping) and "na" in value) and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
            out.append(f"host.system.{key}: expected a number >= 0, got {_show(value)}")
    disks = system.get("disks")
    if not isinstance(disks, list) or not all(isinstance(d, Mapping) and isinstance(d.get("path"), str)
                                              for d in disks):
        out.append("host.system.disks: expected a list of objects with a 'path'")
    else:
        for i, d in enumerate(disks):
            for key in ("total_bytes", "free_bytes"):
                _host_value(out, f"host.system.disks[{i}].{key}", d.get(key), _int())
    processes = system.get("processes")
    if not (isinstance(processes, Mapping) and "na" in processes) and not (
            isinstance(processes, list) and all(isinstance(p, str) for p in processes)):
        out.append(f"host.system.processes: expected a list of names, got {_show(processes)}")
    log = host.get("kernel_log")
    if log is not None and (not isinstance(log, Mapping) or not isinstance(log.get("lines", []), list)):
        out.append("host.kernel_log: expected an object with a list of 'lines'")


def _host_value(out: list[str], where: str, value: Any, check: Check) -> None:
    """A host reading: the value, or ``{"na": reason}`` for one the recorded host could not take."""
    if isinstance(value, Mapping) and isinstance(value.get("na"), str):
        return
    if problem := check(value):
        out.append(f"{where}: {problem}")


def _entry(out: list[str], where: str, entry: Any, check: Check, *, error_only: bool = False) -> None:
    if not isinstance(entry, Mapping):
        out.append(f"{where}: {'missing' if entry is None else f'expected a call record, got {_show(entry)}'}")
        return
    if "ok" in entry and not error_only:
        if problem := check(entry["ok"]):
            out.append(f"{where}: {problem}")
        return
    if "error" in entry:
        if not isinstance(entry["error"], str) or (problem := _int()(entry.get("value"))):
            out.append(f"{where}: an NVML error needs a name and an integer return code")
        return
    if "exc" in entry:
        if not isinstance(entry["exc"], str):
            out.append(f"{where}: 'exc' must name the exception")
        return
    out.append(f"{where}: neither 'ok', 'error' nor 'exc'")


def _show(v: Any) -> str:
    text = "null" if v is None else repr(v)
    return text if len(text) <= 40 else text[:37] + "..."
