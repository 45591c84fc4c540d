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
from ..records import GpuFacts, GpuRecord
from ..records.nvml_fields import CONVERTED, FIELD, NVLINK
from ..records.nvml_values import BENIGN_ERRORS, field_value, value
from ..registry import NVML_DUMP_ON_DEMAND, NVML_SESSION, ProbeContext, probe

UNAVAILABLE_REASONS = {12: "NVML library not found", 9: "driver not loaded"}


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


def gpu_record(index: int, dev: dict[str, Any]) -> GpuRecord:
    """One GPU's record from its dump entries: each reading of the table (records/nvml_fields.py)
    converted into the record fields it fills, in the table's conversion order."""
    rec = GpuRecord(index=index)
    if "handle" in dev:
        value(dev["handle"], rec, "nvmlDeviceGetHandleByIndex")
        rec.lost = rec.lost or f"no handle: {value(dev['handle'])}"
        return rec
    fields = dev.get("field_values")
    fields_failed = isinstance(fields, dict) and ("error" in fields or "exc" in fields)
    for reading in CONVERTED:
        if reading.fn == NVLINK:
            for attr, convert in reading.fills:
                setattr(rec, attr, convert(dev.get(reading.path), rec))
            continue
        if reading.fn == FIELD:
            if fields_failed:  # a failed bulk read marks the GPU like any call, once
                value(fields, rec, "nvmlDeviceGetFieldValues")
                fields_failed = False
            got = field_value(fields, reading.path.partition(".")[2], rec)
        else:
            got = value(_at(dev, reading.path), rec, reading.label or reading.path)
            if isinstance(got, NA) and reading.older and reading.older[0] in dev:
                got = value(dev[reading.older[0]], rec, reading.older[0])
        for attr, convert in reading.fills:
            setattr(rec, attr, convert(got))
    if not isinstance(rec.index, int):
        rec.index = index  # NVML did not say: the dump's position
    if "timed_out" in dev:
        hung = dev["timed_out"]
        rec.lost = rec.lost or f"NVML call {hung.get('call')} did not return within {hung.get('after_s')} s"
    return rec


def _at(dev: dict[str, Any], path: str) -> Any:
    """The entry at dotted ``path``, None where a level is missing or not an object."""
    node: Any = dev
    for key in path.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node
