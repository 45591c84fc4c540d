"""The shape and types of an NVML snapshot, checked before a replay judges it.

A replay trusts a file, and a damaged file must not pass a broken GPU: a second device
``{}``, negative ECC counters, a temperature of ``null``, remapped rows ``"garbage"`` or
``nvmlDeviceGetCount`` 3 with 2 devices listed all once read as "nothing wrong". Every
value the checks read is validated here (a missing key, a wrong type or an impossible
value is a problem naming its dotted key), and a GPU the dump announces but does not
describe is one too. Keys no check reads are not validated: they cannot change a verdict.
What each reading must be is declared beside it in :mod:`gpu_preflight.records.nvml_fields`.

Each call is stored as ``{"ok": value}``, ``{"error": name, "value": code, "str": text}``
or ``{"exc": name, "str": text}`` (see :mod:`gpu_preflight.backends.nvml`); an error entry
is a valid reading whose meaning the GPU probe decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..records import nvml_fields as table
from ..records.nvml_values import Check, integer, show, string

__all__ = ["dump_problems"]

MAX_PROBLEMS = 5
COUNT = integer()


def _plan() -> tuple[list[tuple[str, Check, bool]], dict[str, tuple[tuple[str, ...], Check]],
                     dict[str, dict[str, Check]], dict[str, Check]]:
    """What the checks read, from the table, in the order problems are listed: the calls, those
    older snapshots name otherwise, the groups (those older snapshots lack last), the fields."""
    calls: list[tuple[str, Check, bool]] = []  # (key, check, whether older snapshots may lack it)
    alternatives: dict[str, tuple[tuple[str, ...], Check]] = {}
    groups: dict[str, dict[str, Check]] = {}
    fields: dict[str, Check] = {}
    for r in sorted((r for r in table.CONVERTED if r.check), key=lambda r: r.since is not None):
        assert r.check is not None
        top, _, below = r.path.partition(".")
        if r.fn == table.FIELD:
            fields[below] = r.check
        elif r.older:
            alternatives[r.older[1]] = ((r.path, r.older[0]), r.check)
        elif below:
            groups.setdefault(top if r.since is None else f"{top}.{below.rpartition('.')[0]}", {})[
                below.rpartition(".")[2] if r.since else below] = r.check
        else:
            calls.append((r.path, r.check, r.since is not None))
    return calls, alternatives, groups, fields


DEVICE, ALTERNATIVES, GROUPS, FIELDS_READ = _plan()
OPTIONAL = frozenset(r.path.rpartition(".")[0] for r in table.TABLE if r.since)  # older snapshots lack them
SYSTEM: dict[str, Check] = {"nvmlSystemGetDriverVersion": string, "nvmlSystemGetNVMLVersion": string}


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
        _entry(out, f"system.{key}", system[key], integer())
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
        _entry(out, f"{where}.handle", dev["handle"], string, error_only=True)
        return
    partial = "timed_out" in dev  # a GPU that hung NVML: what was read before the deadline
    if partial and not isinstance(dev["timed_out"], Mapping):
        out.append(f"{where}.timed_out: expected an object, got {show(dev['timed_out'])}")
    for key, check, optional in DEVICE:
        if key in dev or not (partial or optional):
            _entry(out, f"{where}.{key}", dev.get(key), check)
    for label, (keys, check) in ALTERNATIVES.items():
        present = [k for k in keys if k in dev]
        if not present and not partial:
            out.append(f"{where}.{keys[0]}: missing ({label})")
        for key in present[:1]:
            _entry(out, f"{where}.{key}", dev[key], check)
    for group, members in GROUPS.items():
        top, _, below = group.partition(".")
        if (dev.get(top) is None) if group in OPTIONAL else (top not in dev):
            if not partial and group not in OPTIONAL:
                out.append(f"{where}.{group}: missing")
            continue
        node = dev[top].get(below) if below and isinstance(dev[top], Mapping) else dev[top]
        if not isinstance(node, Mapping):
            out.append(f"{where}.{group}: expected an object, got {show(node)}")
            continue
        for key, check in members.items():
            if key in node or not partial:
                _entry(out, f"{where}.{group}.{key}", node.get(key), check)
    _nvlinks(out, where, dev.get("nvlink"), partial)
    _fields(out, where, dev.get("field_values"), partial)


def _nvlinks(out: list[str], where: str, links: Any, partial: bool) -> None:
    if links is None and partial:
        return
    if not isinstance(links, Mapping):
        out.append(f"{where}.nvlink: expected an object, got {show(links)}")
        return
    for key, link in links.items():
        at = f"{where}.nvlink.{key}"
        if not str(key).isdigit():
            out.append(f"{at}: link keys are numbers")
        elif isinstance(link, Mapping) and "state" in link:
            _entry(out, f"{at}.state", link["state"], integer(0, 1))
            errors = link.get("errors")
            if not isinstance(errors, Mapping):
                out.append(f"{at}.errors: expected an object, got {show(errors)}")
                continue
            for code in map(str, range(5)):
                _entry(out, f"{at}.errors.{code}", errors.get(code), integer())
        else:
            _entry(out, at, link, integer(0, 1), error_only=True)


def _fields(out: list[str], where: str, fields: Any, partial: bool) -> None:
    if fields is None and partial:
        return
    if isinstance(fields, Mapping) and ("error" in fields or "exc" in fields):
        _entry(out, f"{where}.field_values", fields, string, error_only=True)
        return
    if not isinstance(fields, Mapping):
        out.append(f"{where}.field_values: expected an object, got {show(fields)}")
        return
    for name, check in FIELDS_READ.items():
        at = f"{where}.field_values.{name}"
        if name not in fields:
            continue  # an older pynvml without this field: the check says "not recorded"
        fv = fields[name]
        if not isinstance(fv, Mapping):
            out.append(f"{at}: expected an object, got {show(fv)}")
        elif "value" in fv:
            if problem := check(fv["value"]):
                out.append(f"{at}.value: {problem}")
        elif problem := integer()(fv.get("nvmlReturn")):
            out.append(f"{at}: neither a value nor an nvmlReturn code ({problem})")


def _host(out: list[str], host: Any) -> None:
    if not isinstance(host, Mapping):
        out.append(f"host: expected an object, got {show(host)}")
        return
    system = host.get("system")
    if not isinstance(system, Mapping):
        out.append(f"host.system: expected an object, got {show(system)}")
        return
    for key in ("memory_total_bytes", "memory_available_bytes", "cpu_count", "shm_total_bytes", "numa_nodes"):
        _host_value(out, f"host.system.{key}", system.get(key), integer())
    for key in ("memlock_soft", "memlock_hard", "nofile_soft", "nofile_hard"):
        _host_value(out, f"host.system.{key}", system.get(key), integer(-1))
    _host_value(out, "host.system.kernel", system.get("kernel"), string)
    for key in ("load_1m", "cpu_percent"):
        value = system.get(key)
        if not (isinstance(value, Mapping) and "na" in value) and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
            out.append(f"host.system.{key}: expected a number >= 0, got {show(value)}")
    disks = system.get("disks")
    if not isinstance(disks, list) or not all(isinstance(d, Mapping) and isinstance(d.get("path"), str)
                                              for d in disks):
        out.append("host.system.disks: expected a list of objects with a 'path'")
    else:
        for i, d in enumerate(disks):
            for key in ("total_bytes", "free_bytes"):
                _host_value(out, f"host.system.disks[{i}].{key}", d.get(key), integer())
    processes = system.get("processes")
    if not (isinstance(processes, Mapping) and "na" in processes) and not (
            isinstance(processes, list) and all(isinstance(p, str) for p in processes)):
        out.append(f"host.system.processes: expected a list of names, got {show(processes)}")
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
        out.append(f"{where}: {'missing' if entry is None else f'expected a call record, got {show(entry)}'}")
        return
    if "ok" in entry and not error_only:
        if problem := check(entry["ok"]):
            out.append(f"{where}: {problem}")
        return
    if "error" in entry:
        if not isinstance(entry["error"], str) or (problem := integer()(entry.get("value"))):
            out.append(f"{where}: an NVML error needs a name and an integer return code")
        return
    if "exc" in entry:
        if not isinstance(entry["exc"], str):
            out.append(f"{where}: 'exc' must name the exception")
        return
    out.append(f"{where}: neither 'ok', 'error' nor 'exc'")
