"""Build the fake NVML library and turn NVML dumps into its data file.

Why a C stub instead of a mocked pynvml: the collector's risky part is the ctypes layer
(versioned symbols, struct layouts, error classes, ``nvmlErrorString``). A stub
``libnvidia-ml.so.1`` keeps the real pynvml in the loop, so a test fails when the
collector and the installed nvidia-ml-py disagree, exactly as it would on a GPU host.

Usage::

    lib_dir = build_stub(tmp_dir)
    write_stub_data(dump, tmp_dir / "nvml.txt", lost_devices=[1])
    env = stub_env(lib_dir, tmp_dir / "nvml.txt", FAKE_NVML_HANG="0:nvmlDeviceGetTemperature")
    subprocess.run([sys.executable, "-c", script], env=env)

The library must be loaded in a fresh process (``LD_LIBRARY_PATH`` is read when the
process starts and pynvml loads the library once), hence :func:`stub_env`.

The data file format is documented at the top of ``fake_nvml.c``. Its keys are NVML C
symbols with the enum arguments appended (``nvmlDeviceGetClockInfo/1``); the enum
values below come from ``nvml.h`` and are deliberately NOT imported from the collector,
so a wrong constant in the collector shows up as a round-trip failure.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

C_SOURCE = Path(__file__).with_name("fake_nvml.c")
LIB_NAME = "libnvidia-ml.so.1"

NVML_ERROR_NOT_SUPPORTED = 3

# nvmlPciInfo_t members in C order (busId strings included, as the stub fills them).
PCI_FIELDS = ("busIdLegacy", "domain", "bus", "device", "pciDeviceId", "pciSubSystemId", "busId")
PROCESS_FIELDS = ("pid", "usedGpuMemory", "gpuInstanceId", "computeInstanceId")
# pynvml turns NVML_VALUE_NOT_AVAILABLE (all ones) into usedGpuMemory=None.
VALUE_NOT_AVAILABLE_ULL = 2**64 - 1

# dump key -> (stub data key, member order when the value is a struct or a list of structs)
DEVICE_KEYS: dict[str, tuple[str, tuple[str, ...]]] = {
    "nvmlDeviceGetName": ("nvmlDeviceGetName", ()),
    "nvmlDeviceGetUUID": ("nvmlDeviceGetUUID", ()),
    "nvmlDeviceGetSerial": ("nvmlDeviceGetSerial", ()),
    "nvmlDeviceGetBoardPartNumber": ("nvmlDeviceGetBoardPartNumber", ()),
    "nvmlDeviceGetVbiosVersion": ("nvmlDeviceGetVbiosVersion", ()),
    "nvmlDeviceGetInforomImageVersion": ("nvmlDeviceGetInforomImageVersion", ()),
    "nvmlDeviceGetGspFirmwareVersion": ("nvmlDeviceGetGspFirmwareVersion", ()),
    "nvmlDeviceGetPciInfo_v3": ("nvmlDeviceGetPciInfo_v3", PCI_FIELDS),
    "nvmlDeviceGetMemoryInfo": ("nvmlDeviceGetMemoryInfo", ("total", "free", "used")),
    "nvmlDeviceGetUtilizationRates": ("nvmlDeviceGetUtilizationRates", ("gpu", "memory")),
    # The dump records the GPU sensor (NVML_TEMPERATURE_GPU = 0) under the bare name.
    "nvmlDeviceGetTemperature": ("nvmlDeviceGetTemperature/0", ()),
    "nvmlDeviceGetPowerUsage": ("nvmlDeviceGetPowerUsage", ()),
    "nvmlDeviceGetEnforcedPowerLimit": ("nvmlDeviceGetEnforcedPowerLimit", ()),
    "nvmlDeviceGetPowerManagementLimit": ("nvmlDeviceGetPowerManagementLimit", ()),
    "nvmlDeviceGetPowerManagementDefaultLimit": ("nvmlDeviceGetPowerManagementDefaultLimit", ()),
    "nvmlDeviceGetPowerManagementLimitConstraints": ("nvmlDeviceGetPowerManagementLimitConstraints", ()),
    "nvmlDeviceGetPersistenceMode": ("nvmlDeviceGetPersistenceMode", ()),
    "nvmlDeviceGetComputeMode": ("nvmlDeviceGetComputeMode", ()),
    "nvmlDeviceGetMigMode": ("nvmlDeviceGetMigMode", ()),
    "nvmlDeviceGetEccMode": ("nvmlDeviceGetEccMode", ()),
    "nvmlDeviceGetCurrentClocksEventReasons": ("nvmlDeviceGetCurrentClocksEventReasons", ()),
    "nvmlDeviceGetSupportedClocksEventReasons": ("nvmlDeviceGetSupportedClocksEventReasons", ()),
    "nvmlDeviceGetRemappedRows": ("nvmlDeviceGetRemappedRows", ()),
    "nvmlDeviceGetRetiredPagesPendingStatus": ("nvmlDeviceGetRetiredPagesPendingStatus", ()),
    "nvmlDeviceGetCurrPcieLinkGeneration": ("nvmlDeviceGetCurrPcieLinkGeneration", ()),
    "nvmlDeviceGetMaxPcieLinkGeneration": ("nvmlDeviceGetMaxPcieLinkGeneration", ()),
    "nvmlDeviceGetGpuMaxPcieLinkGeneration": ("nvmlDeviceGetGpuMaxPcieLinkGeneration", ()),
    "nvmlDeviceGetCurrPcieLinkWidth": ("nvmlDeviceGetCurrPcieLinkWidth", ()),
    "nvmlDeviceGetMaxPcieLinkWidth": ("nvmlDeviceGetMaxPcieLinkWidth", ()),
    "nvmlDeviceGetPcieReplayCounter": ("nvmlDeviceGetPcieReplayCounter", ()),
    "nvmlDeviceGetPerformanceState": ("nvmlDeviceGetPerformanceState", ()),
    "nvmlDeviceGetArchitecture": ("nvmlDeviceGetArchitecture", ()),
    "nvmlDeviceGetCudaComputeCapability": ("nvmlDeviceGetCudaComputeCapability", ()),
    "nvmlDeviceGetIndex": ("nvmlDeviceGetIndex", ()),
    "nvmlDeviceGetMinorNumber": ("nvmlDeviceGetMinorNumber", ()),
    "nvmlDeviceGetNumaNodeId": ("nvmlDeviceGetNumaNodeId", ()),
    "nvmlDeviceGetModuleId": ("nvmlDeviceGetModuleId", ()),
    # pynvml's unversioned wrapper calls the _v3 symbol.
    "nvmlDeviceGetComputeRunningProcesses": ("nvmlDeviceGetComputeRunningProcesses_v3", PROCESS_FIELDS),
}

# Groups of one call with enum arguments: dump group -> (symbol, {dump sub-key: argument suffix}).
CLOCK_TYPES = {"GRAPHICS": 0, "SM": 1, "MEM": 2, "VIDEO": 3}  # nvmlClockType_t
CLOCK_GROUPS = {
    "clocks_current": "nvmlDeviceGetClockInfo",
    "clocks_max": "nvmlDeviceGetMaxClockInfo",
    "clocks_app": "nvmlDeviceGetApplicationsClock",
}
# (nvmlMemoryErrorType_t CORRECTED=0/UNCORRECTED=1, nvmlEccCounterType_t VOLATILE=0/AGGREGATE=1)
ECC_COUNTERS = {
    "volatile_corrected": (0, 0),
    "volatile_uncorrected": (1, 0),
    "aggregate_corrected": (0, 1),
    "aggregate_uncorrected": (1, 1),
}
MEMORY_LOCATIONS = {"dram": 2, "sram": 7}  # nvmlMemoryLocation_t DEVICE_MEMORY / SRAM
RETIRED_PAGE_CAUSES = {"sbe": 0, "dbe": 1}  # nvmlPageRetirementCause_t


class StubBuildError(RuntimeError):
    """gcc is missing or rejected ``fake_nvml.c``; the message carries gcc's output."""


def build_stub(out_dir: Path, source: Path = C_SOURCE) -> Path:
    """Compile ``fake_nvml.c`` into ``out_dir/libnvidia-ml.so.1`` and return ``out_dir``.

    ``-Werror`` keeps the stub warning-free: a warning in a hand-written ABI shim is
    usually a real type mismatch with ``nvml.h``.
    """
    gcc = shutil.which("gcc")
    if gcc is None:
        raise StubBuildError("gcc not found on PATH: the NVML stub tests need a C compiler")
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = [gcc, "-shared", "-fPIC", "-pthread", "-O1", "-Wall", "-Werror", "-o", str(out_dir / LIB_NAME), str(source)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise StubBuildError(f"{' '.join(cmd)} failed (rc {proc.returncode}):\n{proc.stderr}{proc.stdout}")
    return out_dir


def stub_env(lib_dir: Path, data_path: Path, **extra: str) -> dict[str, str]:
    """A copy of ``os.environ`` that makes a child process load the stub with ``data_path``.

    Fault settings inherited from the caller's environment are dropped so that only the
    ones passed in ``extra`` apply (``FAKE_NVML_HANG``, ``FAKE_NVML_SLOW``, ...).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_NVML_")}
    old = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = f"{lib_dir}:{old}" if old else str(lib_dir)
    env["FAKE_NVML_DATA"] = str(data_path)
    env.update(extra)
    return env


def write_stub_data(
    dump: Mapping[str, Any],
    path: Path,
    *,
    init_rc: int = 0,
    lost_devices: Iterable[int] = (),
    lost_at_handle: bool = True,
    series: Mapping[tuple[int, str], Iterable[Any]] | None = None,
) -> None:
    """Write the stub's data file for ``dump`` (the ``nvml_capture.json`` layout).

    The device count is ``len(dump["devices"])`` unless the dump recorded an error for
    ``nvmlDeviceGetCount``, so a test adds a GPU by appending a device. Calls the stub
    does not implement, ``{"exc": ...}`` entries and unknown keys are skipped (the stub
    then answers NOT_SUPPORTED). ``lost_devices`` makes every call for those devices
    return GPU_IS_LOST; with ``lost_at_handle`` ``nvmlDeviceGetHandleByIndex`` fails too.
    A top-level call not in :data:`DEVICE_KEYS` whose answer is one value is written under
    its own name (a new plain getter then needs only its symbol in ``fake_nvml.c``).
    ``series`` maps ``(device, stub key)`` to the answers successive calls return, each an
    integer or a tuple of integers (``nvmlDeviceGetUtilizationRates``: gpu, memory), e.g.
    ``{(0, "nvmlDeviceGetClockInfo/1"): [1980, 1980, 1200]}``: see :func:`seq_line`.
    """
    devices: list[Mapping[str, Any]] = list(dump.get("devices") or [])
    system: Mapping[str, Any] = dump.get("system") or {}
    lines = ["# fake_nvml data written by tests/nvml_stub/stub.py", f"init {int(init_rc)}"]
    for dev in lost_devices:
        lines.append(f"lost {int(dev)} {1 if lost_at_handle else 0}")
    for key in ("nvmlSystemGetDriverVersion", "nvmlSystemGetNVMLVersion", "nvmlSystemGetCudaDriverVersion"):
        if key in system:
            lines += _record("sys", key, system[key], ())
    count_entry = system.get("nvmlDeviceGetCount", {})
    if "error" in count_entry:
        lines += _record("sys", "nvmlDeviceGetCount_v2", count_entry, ())
    else:
        lines.append(f"sys nvmlDeviceGetCount_v2 0 {len(devices)}")
    for index, device in enumerate(devices):
        lines += _device_lines(index, device)
    lines += [seq_line(dev, key, answers) for (dev, key), answers in (series or {}).items()]
    path.write_text("\n".join(lines) + "\n")


def seq_line(device: int, key: str, answers: Iterable[Any]) -> str:
    """A ``seq`` record: the n-th call of ``key`` on ``device`` returns the n-th answer (then the last)."""
    rows = [tuple(a) if isinstance(a, (tuple, list)) else (a,) for a in answers]
    if not rows or len({len(r) for r in rows}) != 1:
        raise ValueError(f"seq {key}: answers must be non-empty and of one width")
    values = " ".join(_token(v) for row in rows for v in row)
    return f"seq {int(device)} {key} {len(rows[0])} {values}"


def _device_lines(index: int, device: Mapping[str, Any]) -> list[str]:
    scope = f"dev {index}"
    lines: list[str] = []
    if "handle" in device:
        lines += _record(scope, "nvmlDeviceGetHandleByIndex_v2", device["handle"], ())
    for dump_key, (key, members) in DEVICE_KEYS.items():
        if dump_key in device:
            lines += _record(scope, key, device[dump_key], members)
    for dump_key, entry in device.items():  # any other one-value getter is served under its own name
        if dump_key.startswith("nvmlDevice") and dump_key not in DEVICE_KEYS and _scalar(entry):
            lines += _record(scope, dump_key, entry, ())
    for group, symbol in CLOCK_GROUPS.items():
        for name, entry in _group(device, group).items():
            lines += _record(scope, f"{symbol}/{_lookup(CLOCK_TYPES, name, group)}", entry, ())
    for threshold, entry in _group(device, "temp_thresholds").items():
        lines += _record(scope, f"nvmlDeviceGetTemperatureThreshold/{int(threshold)}", entry, ())
    for name, entry in _group(device, "ecc_total").items():
        error_type, counter_type = _lookup(ECC_COUNTERS, name, "ecc_total")
        lines += _record(scope, f"nvmlDeviceGetTotalEccErrors/{error_type}/{counter_type}", entry, ())
    for location, counters in _group(device, "memory_errors").items():
        code = _lookup(MEMORY_LOCATIONS, location, "memory_errors")
        for name, entry in counters.items():
            error_type, counter_type = _lookup(ECC_COUNTERS, name, "memory_errors")
            key = f"nvmlDeviceGetMemoryErrorCounter/{error_type}/{counter_type}/{code}"
            lines += _record(scope, key, entry, ())
    for cause, entry in _group(device, "retired_pages").items():
        lines += _record(scope, f"nvmlDeviceGetRetiredPages/{_lookup(RETIRED_PAGE_CAUSES, cause, 'retired_pages')}",
                         entry, ())
    for link, calls in _group(device, "nvlink").items():
        lines += _nvlink_lines(scope, int(link), calls)
    lines += _field_lines(scope, device.get("field_values"))
    return lines


def _nvlink_lines(scope: str, link: int, calls: Mapping[str, Any]) -> list[str]:
    """A link is either a dict of sub-calls or, where reading stopped, the state call's result."""
    if _is_call(calls):
        return _record(scope, f"nvmlDeviceGetNvLinkState/{link}", calls, ())
    lines: list[str] = []
    if "state" in calls:
        lines += _record(scope, f"nvmlDeviceGetNvLinkState/{link}", calls["state"], ())
    if "version" in calls:
        lines += _record(scope, f"nvmlDeviceGetNvLinkVersion/{link}", calls["version"], ())
    if "remote_pci" in calls:
        lines += _record(scope, f"nvmlDeviceGetNvLinkRemotePciInfo_v2/{link}", calls["remote_pci"], PCI_FIELDS)
    for counter, entry in (calls.get("errors") or {}).items():
        lines += _record(scope, f"nvmlDeviceGetNvLinkErrorCounter/{link}/{int(counter)}", entry, ())
    return lines


def _field_lines(scope: str, fields: Any) -> list[str]:
    """Field values are keyed by field id; entries without an id get pynvml's constant."""
    if not isinstance(fields, Mapping):
        return []
    if _is_call(fields):  # the whole nvmlDeviceGetFieldValues call failed
        return _record(scope, "nvmlDeviceGetFieldValues", fields, ())
    lines = [f"{scope} nvmlDeviceGetFieldValues 0"]
    for name, entry in fields.items():
        if "valueType" in entry:
            field_id = int(entry["id"]) if "id" in entry else _field_id(name)
            if field_id is not None:
                lines.append(f"{scope} field/{field_id} 0 {int(entry['valueType'])} {_token(entry['value'])}")
        elif "nvmlReturn" in entry and int(entry["nvmlReturn"]) != NVML_ERROR_NOT_SUPPORTED:
            field_id = _field_id(name)  # NOT_SUPPORTED is the stub's default: no line needed
            if field_id is not None:
                lines.append(f"{scope} field/{field_id} {int(entry['nvmlReturn'])}")
    return lines


def _field_id(name: str) -> int | None:
    """The id of ``NVML_FI_*`` ``name`` in the installed pynvml, or None if it lacks it."""
    try:
        pynvml = importlib.import_module("pynvml")
    except ImportError:
        return None
    value = getattr(pynvml, name, None)
    return value if isinstance(value, int) else None


def _scalar(entry: Any) -> bool:
    """A call record whose answer is one value (or a refusal): what a plain getter of the stub returns."""
    return isinstance(entry, Mapping) and ("error" in entry or isinstance(entry.get("ok"), (int, float, str)))


def _is_call(node: Mapping[str, Any]) -> bool:
    return "ok" in node or "error" in node or "exc" in node


def _group(device: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    group = device.get(name)
    return group if isinstance(group, Mapping) else {}


def _lookup(table: Mapping[str, Any], name: str, group: str) -> Any:
    """Fail loudly on a misspelt key: a silently dropped fault would make a test pass."""
    try:
        return table[name]
    except KeyError:
        raise ValueError(f"unknown key {name!r} in {group!r}; known: {sorted(table)}") from None


def _record(scope: str, key: str, entry: Any, members: tuple[str, ...]) -> list[str]:
    """One data line for a recorded call; [] for entries the stub cannot replay."""
    if not isinstance(entry, Mapping):
        return []
    if "ok" in entry:
        values = " ".join(_flatten(entry["ok"], members))
        return [f"{scope} {key} 0 {values}".rstrip()]
    if "error" in entry and isinstance(entry.get("value"), int):
        return [f"{scope} {key} {entry['value']}"]
    return []


def _flatten(value: Any, members: tuple[str, ...]) -> list[str]:
    """Tokens of a value: structs in ``members`` order, lists element by element."""
    if isinstance(value, Mapping):
        return [tok for m in members for tok in _flatten(value.get(m), ())]
    if isinstance(value, (list, tuple)):
        return [tok for item in value for tok in _flatten(item, members)]
    return [_token(value)]


def _token(value: Any) -> str:
    """One blank-free token: integers in decimal, strings percent-encoded (blanks, '%', '#')."""
    if value is None:
        return str(VALUE_NOT_AVAILABLE_ULL)
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    text = str(value)
    return quote(text, safe=":/,+=@()[]") if text else "%00"
