"""A monitor's NVML session: each tick reads what can go wrong, the GPU's settings every N ticks.

A monitor at ``--interval 1`` reads eight GPUs every second for days, so the Python around
each NVML call is most of its cost. :class:`MonitorSession` is an
:class:`~gpu_preflight.backends.nvml.NvmlSession` (fixed answers and NOT_SUPPORTED kept per
init, one reader thread) that reads one GPU in fewer steps, into the very dump
:func:`~gpu_preflight.backends.nvml.read_device` writes:

* every tick: temperatures, power draw, clocks and their event reasons, utilisation,
  memory, processes, PCIe link state and replays, row remapping, ECC counters, NVLink
  state and errors, and the field values (recovery action, memory temperature, ECC,
  remap, PCIe and NVLink counters) — every fault the checks judge is seen at the tick it
  appears;
* every ``settings_every`` ticks: :data:`SETTING_CALLS`, what an administrator sets
  (persistence, compute, MIG and ECC mode, power limits); between two reads the last
  successful answer is reused (a refusal other than NOT_SUPPORTED is asked again at the
  next tick);
* the field values in one ``nvmlDeviceGetFieldValues`` call whose request array is built
  once and whose answers are read through the ctypes field descriptors, not pynvml's
  per-attribute wrapper (falls back to pynvml's call when that layout is missing).
"""

from __future__ import annotations

import ctypes
from typing import Any

from ..records.nvml_fields import SETTINGS
from . import nvml as base

SETTING_CALLS = SETTINGS  # the table's SETTING readings (records/nvml_fields.py)
SETTINGS_EVERY = 10  # ticks; config: gpu.nvml_settings_refresh_ticks
_TICKS = "monitor.ticks"  # per-GPU counter in the session's store (emptied with it at every init)
_SETTINGS = "monitor.settings"
PLAN = base.PLAN  # read_device's calls, in its order


class _FieldReader:
    """:data:`~gpu_preflight.backends.nvml.FIELDS` of one pynvml module, request prepared once."""

    def __init__(self, nvml: Any) -> None:
        self.names = [n for n in base.FIELDS if hasattr(nvml, n)]
        self.ids = [int(getattr(nvml, n)) for n in self.names]
        struct = nvml.c_nvmlFieldValue_t
        self.array = struct * len(self.ids)
        self.template = self.array()
        for i, fid in enumerate(self.ids):
            self.template[i].fieldId = fid
        self.size = ctypes.sizeof(self.array)
        self.fn = nvml._nvmlGetFunctionPointer("nvmlDeviceGetFieldValues")
        self.check = nvml._nvmlCheckReturn
        self.ret, self.kind, self.value = struct.nvmlReturn, struct.valueType, struct.value
        union = type(self.template[0].value) if self.ids else None
        self.members = {k: getattr(union, m) for k, m in base._VALUE_MEMBERS.items()} if union else {}

    def read(self, handle: Any) -> dict[str, Any]:
        """The field dict :func:`~gpu_preflight.backends.nvml.read_fields` builds; raises NVMLError."""
        values = self.array()
        ctypes.memmove(values, self.template, self.size)
        self.check(self.fn(handle, ctypes.c_int32(len(self.ids)), ctypes.byref(values)))
        result: dict[str, Any] = {}
        ret, kind, value, members, fallback = self.ret, self.kind, self.value, self.members, self.members[3]
        for name, fid, fv in zip(self.names, self.ids, values, strict=True):
            rc = ret.__get__(fv)
            if rc != 0:
                result[name] = {"nvmlReturn": int(rc)}
                continue
            vt = int(kind.__get__(fv))
            result[name] = {"id": fid, "valueType": vt,
                            "value": base.to_plain(members.get(vt, fallback).__get__(value.__get__(fv)))}
        return result


class MonitorSession(base.NvmlSession):
    """An NVML session for a monitor: settings re-read every ``settings_every`` ticks (see module)."""

    def __init__(self, max_age_s: float = 600.0, settings_every: int = SETTINGS_EVERY) -> None:
        super().__init__(max_age_s)
        if settings_every < 1:
            raise ValueError(f"settings_every must be at least 1, got {settings_every!r}")
        self.settings_every = settings_every
        self._fields: tuple[Any, _FieldReader | None] | None = None

    def _field_reader(self, nvml: Any) -> _FieldReader | None:
        kept = self._fields
        if kept is None or kept[0] is not nvml:
            try:
                reader: _FieldReader | None = _FieldReader(nvml)
            except (AttributeError, TypeError):  # a pynvml without this layout: its own call then
                reader = None
            kept = self._fields = (nvml, reader)
        return kept[1]

    def read_device(self, nvml: Any, handle: Any, rec: Any, out: dict[str, Any],
                    static: dict[str, Any] | None) -> None:
        """One GPU into ``out`` (in place, as :func:`~gpu_preflight.backends.nvml.read_device`)."""
        if static is None:
            base.read_device(nvml, handle, rec, out, None)
            return
        tick = static.get(_TICKS, 0)
        static[_TICKS] = tick + 1
        due = tick % self.settings_every == 0
        settings: dict[str, Any] = static.setdefault(_SETTINGS, {})
        kept_keys = base.STATIC_DEVICE_CALLS
        groups: dict[str, dict[str, Any]] = {}
        for group, below, key, fn, args in PLAN:
            entry = static.get(key)
            if entry is None and not due and key in SETTING_CALLS:
                entry = settings.get(key)
            if entry is None:
                if fn == "nvmlDeviceGetModuleId":
                    args = (ctypes.c_uint(),)  # pynvml's default output buffer is shared by every thread
                entry = rec.call(fn, handle, *args)
                if "error" in entry:
                    if entry.get("value") == base.NOT_SUPPORTED:
                        static[key] = entry
                    settings.pop(key, None)
                elif key in kept_keys:
                    static[key] = entry
                elif key in SETTING_CALLS:
                    settings[key] = entry
            if group is None:
                out[key] = entry
                continue
            target = groups.get(group)
            if target is None:
                target = groups[group] = out[group] = {}
            for name in below[:-1]:  # memory_errors.<location>.<counter>
                target = target.setdefault(name, {})
            target[below[-1]] = entry
        out["nvlink"] = base.read_nvlinks(nvml, handle, rec, static)
        out["field_values"] = self._read_fields(nvml, handle, rec, static)

    def _read_fields(self, nvml: Any, handle: Any, rec: Any, static: dict[str, Any]) -> dict[str, Any]:
        reader = self._field_reader(nvml)
        if reader is None or "field_values" in static:
            return base.read_fields(nvml, handle, rec, static)
        rec.enter("nvmlDeviceGetFieldValues")
        try:
            return reader.read(handle)
        except Exception as exc:
            entry: dict[str, Any] = rec.failed(exc)
            if entry.get("value") == base.NOT_SUPPORTED:
                static["field_values"] = entry
            return entry
        finally:
            rec.leave()
