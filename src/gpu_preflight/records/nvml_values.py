"""One NVML dump entry: whether a replay may trust it, and what it becomes on a :class:`GpuRecord`.

The table of :mod:`gpu_preflight.records.nvml_fields` names, for each reading, one *check*
(is this recorded value possible? used when a snapshot is replayed) and the *conversions*
that turn it into record values (units, enum names, ``NA`` for a refusal). Both kinds of
function live here, beside :func:`value`, the one rule for what an entry means: ``{"ok": v}``
is ``v``; ``{"error": name, "value": code, "str": text}`` is ``NA`` with NVML's reason, and a
refusal other than "not supported" also marks the record (lost, or a call error a check
reports); ``{"exc": name, "str": text}`` (pynvml lacked the function) is ``NA``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..model import NA
from .node import GpuProcess, GpuRecord, NvLink

Check = Callable[[Any], str | None]  # a recorded value's problem, None when it is possible

NOT_SUPPORTED = 3
GPU_IS_LOST = 15
# Refusals that say "this GPU or driver has no such reading", not "something is wrong".
BENIGN_ERRORS = {NOT_SUPPORTED: "not supported", 2: "not supported (invalid argument)",
                 13: "not supported by this driver (function not found)"}
COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
NVLINK_COUNTERS = {"0": "replay", "1": "recovery", "2": "crc_flit", "3": "crc_data", "4": "ecc_data"}


# ---- reading an entry ------------------------------------------------------------------------

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


# ---- conversions: recorded value -> record value (NA and unexpected values pass through) -------

def same(v: Any) -> Any:
    return v


def as_int(v: Any) -> Any:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v


def as_bool(v: Any) -> Any:
    return bool(v) if isinstance(v, (int, bool)) else v


def watts(v: Any) -> Any:
    """NVML reports milliwatts."""
    return v / 1000.0 if isinstance(v, (int, float)) else v


def member(key: str) -> Callable[[Any], Any]:
    """One member of a struct reading (``nvmlMemory_t.total``)."""
    def get(v: Any) -> Any:
        return v.get(key, NA("missing")) if isinstance(v, dict) else v
    return get


def item(i: int, then: Callable[[Any], Any] = same) -> Callable[[Any], Any]:
    """The ``i``-th of the values one call returns (``(current, pending)``), through ``then``."""
    def get(v: Any) -> Any:
        return then(v[i] if isinstance(v, list) and len(v) > i else (v if isinstance(v, NA) else NA("malformed")))
    return get


def bus_id(info: Any) -> Any:
    return info.get("busId", NA("no busId")) if isinstance(info, dict) else info


def compute_mode(mode: Any) -> Any:
    return COMPUTE_MODES.get(mode, f"unknown({mode})") if isinstance(mode, int) else mode


def page_count(pages: Any) -> Any:
    """Retired pages: NVML lists their addresses; older dumps hold the count."""
    return len(pages) if isinstance(pages, list) else as_int(pages)


def processes(procs: Any) -> Any:
    return [_process(p) for p in procs if isinstance(p, dict)] if isinstance(procs, list) else procs


def _process(entry: dict[str, Any]) -> GpuProcess:
    used = entry.get("usedGpuMemory")
    return GpuProcess(int(entry.get("pid", -1)), int(used) if isinstance(used, int) else NA("not reported"))


def nvlinks(entry: Any, rec: GpuRecord) -> list[NvLink] | NA:
    """Links that NVML knows; ``NA`` when the GPU has no NVLink at all (reads the whole ``nvlink`` entry)."""
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
            remote_pci=bus_id(value(link.get("remote_pci"))),
            errors={name: value(errors.get(code), rec, f"nvlink.{key}.errors") if isinstance(errors, dict)
                    else NA("not recorded") for code, name in NVLINK_COUNTERS.items()},
        ))
    return links if links else NA("GPU has no NVLink")


# ---- checks: is a recorded value possible? --------------------------------------------------------

def show(v: Any) -> str:
    text = "null" if v is None else repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def integer(low: int = 0, high: int | None = None) -> Check:
    def check(v: Any) -> str | None:
        if isinstance(v, bool) or not isinstance(v, int):
            return f"expected an integer, got {show(v)}"
        if v < low or (high is not None and v > high):
            return f"impossible value {v} (expected {low}..{high if high is not None else ''})"
        return None
    return check


def string(v: Any) -> str | None:
    return None if isinstance(v, str) else f"expected a string, got {show(v)}"


def integers(n: int, high: int | None = None) -> Check:
    one = integer(0, high)

    def check(v: Any) -> str | None:
        if not isinstance(v, list) or len(v) < n:
            return f"expected a list of {n} integers, got {show(v)}"
        return next((p for p in map(one, v[:n]) if p), None)
    return check


def struct(**members: Check) -> Check:
    def check(v: Any) -> str | None:
        if not isinstance(v, Mapping):
            return f"expected an object, got {show(v)}"
        for key, each in members.items():
            if key not in v:
                return f"missing '{key}'"
            if problem := each(v[key]):
                return f"{key}: {problem}"
        return None
    return check


def memory(v: Any) -> str | None:
    if problem := struct(total=integer(), free=integer(), used=integer())(v):
        return problem
    return f"impossible value: used {v['used']} > total {v['total']}" if v["used"] > v["total"] else None


def process_list(v: Any) -> str | None:
    if not isinstance(v, list):
        return f"expected a list, got {show(v)}"
    for i, p in enumerate(v):
        if not isinstance(p, Mapping) or integer()(p.get("pid")):
            return f"[{i}]: expected an object with an integer 'pid'"
        used = p.get("usedGpuMemory")
        if used is not None and (problem := integer()(used)):
            return f"[{i}].usedGpuMemory: {problem}"
    return None


def count(v: Any) -> str | None:
    """A field value: NVML types some counters as doubles (``0.0``)."""
    if isinstance(v, float) and v == v and v >= 0 and v == int(v):
        return None
    return integer()(v)


def pages(v: Any) -> str | None:
    """Retired pages: a list of addresses, or a count."""
    if isinstance(v, list):
        return None
    return integer()(v)
