"""``nvidia-smi --query-gpu=... --format=csv``: one row per GPU, columns chosen by the caller.

Columns are found by their header names (units such as `` [MiB]`` stripped), so any
subset and order of fields works, with or without ``nounits``. Fields the header does not
name stay ``None``. ``noheader`` output is read only where the pasted command line names
its fields (``--query-gpu=index,name,... --format=csv,noheader``) and every row has that
many columns; otherwise a column could be anything, so it is refused rather than guessed.
Unsupported fields print ``[N/A]`` or ``[Requested functionality has been deprecated]`` and
read as ``None``.

``--query-retired-pages=gpu_bus_id,...,retired_pages.address,retired_pages.cause`` has one row
per retired page instead of one per GPU; its rows are counted per GPU and cause (``Single Bit
ECC``, ``Double Bit ECC``) into the same record. A row whose address is ``[N/A]`` is no page: a
GPU that retires none (an H100, which remaps rows instead) prints one such row per cause. The
output does not say whether a retirement is pending, so that stays unknown.

``--query-remapped-rows=gpu_bus_id,remapped_rows.correctable,...,remapped_rows.pending,remapped_rows.failure``
has one row per GPU, named ``gpu_bus_id``/``gpu_uuid``: read as ``--query-gpu`` rows are (a pending remap
WARNs, a failed one FAILs, by ``gpu.memory.remap``). ``--query-compute-apps`` (and ``--query-accounted-apps``)
has one row per process (``pid``, ``process_name``, ``used_gpu_memory [MiB]``, the GPU's ``gpu_uuid``/
``gpu_bus_id``/``gpu_name`` where asked for): its processes are listed under their GPU (one GPU of unknown
address when the columns name none), judged by ``gpu.busy``; a GPU with no process has no row, so the
output says nothing of how many GPUs there are (a ``fragment``). Its header alone (no process at all)
names no GPU: kept in ``stated``, not judged. A process is known by its pid: a query without ``pid`` is
not read as one.
"""

from __future__ import annotations

import csv
import re

from ...records.smi import SmiFailure
from ..detect import parser
from ..errors import ParseError
from ..text import is_noise, prepare, to_bool, to_float, to_int
from . import (
    CLOCK_REASON_BITS,
    NvidiaSmiRecord,
    SmiGpu,
    SmiProcess,
    as_compute_mode,
    as_mode,
    as_string,
    fabric_failure,
    recovery_from_reset_status,
)
from .command import query_fields, selected_ids
from .failures import failures_in

KIND = "nvidia-smi-csv"

_UNIT = re.compile(r"(?<!\s)\s*\[[^\[\]]*\]\s*$")
_KNOWN = ("name", "uuid", "pci.bus_id", "index", "driver_version", "temperature.gpu", "memory.total",
          "power.draw", "utilization.gpu", "pstate", "vbios_version", "count", "serial",
          "gpu_bus_id", "gpu_uuid")  # the last two: how the per-row queries (--query-remapped-rows...) name the GPU


_PAGE_COLUMNS = ("retired_pages.address", "retired_pages.cause")
_APP_NAMES = ("process_name", "name", "used_gpu_memory", "used_memory")  # a compute-apps row's own columns
_CAUSES = {"single bit ecc": "sbe", "double bit ecc": "dbe"}


def sniff(text: str) -> int:
    for line in text.splitlines()[:5]:
        if is_noise(line) or not line.strip():
            continue
        names = [_UNIT.sub("", c).strip() for c in line.split(",")]
        if all(c in names for c in _PAGE_COLUMNS) or _apps(names):
            return 80
        if _known(names):
            return 80
        fields = query_fields(text)
        return 80 if fields is not None and _known(fields) and len(fields) == len(names) else 0
    return 0


def _known(names: list[str]) -> bool:
    """Whether column names are those of a ``--query-gpu`` header (two or more that it prints)."""
    # fabric.: the NVLink fabric queried alone (fabric.state,fabric.status), as fabric manager checks do
    prefixes = ("clocks.", "ecc.", "pcie.", "power.", "remapped_rows.", "fabric.")
    hits = sum(1 for n in names if n in _KNOWN or n.startswith(prefixes))
    return hits >= 2 and len(names) >= 2


def _apps(names: list[str]) -> bool:
    """Whether column names are those of ``--query-compute-apps``: a ``pid`` and a process's own column."""
    return "pid" in names and any(n in _APP_NAMES for n in names)


@parser(KIND, sniff=sniff, title="nvidia-smi --query-gpu=... --format=csv (with header, or its command)")
def parse(text: str) -> NvidiaSmiRecord:
    """Parse ``--query-gpu`` CSV output; the first non-command line must be the header."""
    numbered = [(n, line) for n, line in enumerate(prepare(KIND, text), 1) if line.strip() and not is_noise(line)]
    if not numbered:
        raise ParseError(KIND, "no CSV lines")
    rows = [next(csv.reader([line], skipinitialspace=True), []) for _, line in numbered]
    header = [_UNIT.sub("", c).strip() for c in rows[0]]
    fields = query_fields(text)
    if not any(h in _KNOWN for h in header) and fields is not None and _known(fields):
        header = fields  # the rows start at once: the command line named their columns
        rows, numbered = [fields, *rows], [(0, ""), *numbered]
    if all(c in header for c in _PAGE_COLUMNS):
        return _retired_pages(numbered, rows, header)
    if _apps(header):
        return _compute_apps(numbered, rows, header)
    if not _known(header) and not any(h in _KNOWN for h in header):
        raise ParseError(KIND, "first line is not a --query-gpu header (was the output made with noheader?)",
                         numbered[0][0])
    gpus: list[SmiGpu] = []
    failures: list[SmiFailure] = []
    for (number, line), row in zip(numbered[1:], rows[1:], strict=True):
        if len(row) != len(header):
            raise ParseError(KIND, f"{len(row)} fields where the header names {len(header)}", number)
        values = {h: v.strip() for h, v in zip(header, row, strict=True)}
        gpus.append(gpu := _gpu(len(gpus), values))
        # a cell nvidia-smi filled with NVML's error for a GPU it cannot read ([GPU is lost], [GPU requires reset])
        failures += [SmiFailure(f.code, f.message, f.gpu or gpu.pci_bus_id or gpu.uuid, number)
                     for f in failures_in([line])]
        # --query-gpu's fabric.state / fabric.status (the -q Fabric block's State and Status)
        if (fabric := fabric_failure(values.get("fabric.state"), values.get("fabric.status"), {},
                                     gpu.pci_bus_id or gpu.uuid, number)) is not None:
            failures.append(fabric)
    counts = [to_int(v) for v in _column(rows, header, "count")]
    drivers = [as_string(v) for v in _column(rows, header, "driver_version")]
    return NvidiaSmiRecord(
        format="csv",
        driver_version=next((d for d in drivers if d), None),
        cuda_version=None,
        attached_gpus=next((c for c in counts if c is not None), None),
        gpus=gpus,
        failures=failures,
        selected=selected_ids(text),
    )


def _retired_pages(numbered: list[tuple[int, str]], rows: list[list[str]], header: list[str]) -> NvidiaSmiRecord:
    """``--query-retired-pages`` rows, counted per GPU (by bus id, else UUID) and cause."""
    gpus: dict[str, SmiGpu] = {}
    for (number, _), row in zip(numbered[1:], rows[1:], strict=True):
        if len(row) != len(header):
            raise ParseError(KIND, f"{len(row)} fields where the header names {len(header)}", number)
        v = {h: c.strip() for h, c in zip(header, row, strict=True)}
        bus, uuid = as_string(v.get("gpu_bus_id")), as_string(v.get("gpu_uuid"))
        key = bus or uuid or "?"
        gpu = gpus.get(key)
        if gpu is None:
            gpu = gpus[key] = SmiGpu(index=len(gpus), pci_bus_id=bus, uuid=uuid, name=as_string(v.get("gpu_name")),
                                     serial=as_string(v.get("gpu_serial")), retired_pages_sbe=0, retired_pages_dbe=0)
        cause = _CAUSES.get((v.get("retired_pages.cause") or "").strip().lower())
        if cause is None:
            raise ParseError(KIND, f"unknown retirement cause {v.get('retired_pages.cause')!r}", number)
        if as_string(v.get("retired_pages.address")) is not None:
            setattr(gpu, f"retired_pages_{cause}", (getattr(gpu, f"retired_pages_{cause}") or 0) + 1)
    if not gpus:
        raise ParseError(KIND, "a --query-retired-pages header without a row (not even an [N/A] one)")
    return NvidiaSmiRecord(format="retired-pages csv", gpus=list(gpus.values()))


def _compute_apps(numbered: list[tuple[int, str]], rows: list[list[str]], header: list[str]) -> NvidiaSmiRecord:
    """``--query-compute-apps`` rows: each process under its GPU (by bus id, else UUID, else one unnamed GPU)."""
    gpus: dict[str, SmiGpu] = {}
    for (number, _), row in zip(numbered[1:], rows[1:], strict=True):
        if len(row) != len(header):
            raise ParseError(KIND, f"{len(row)} fields where the header names {len(header)}", number)
        v = {h: c.strip() for h, c in zip(header, row, strict=True)}
        pid = to_int(v.get("pid"))
        if pid is None:
            raise ParseError(KIND, f"a process row without a pid: {v.get('pid')!r}", number)
        bus, uuid = as_string(v.get("gpu_bus_id")), as_string(v.get("gpu_uuid"))
        key = bus or uuid or "?"
        gpu = gpus.get(key)
        if gpu is None:
            gpu = gpus[key] = SmiGpu(index=len(gpus), pci_bus_id=bus, uuid=uuid, name=as_string(v.get("gpu_name")),
                                     serial=as_string(v.get("gpu_serial")), processes=[])
        memory = to_int(v.get("used_gpu_memory") or v.get("used_memory"))
        listed = gpu.processes if gpu.processes is not None else []
        listed.append(SmiProcess(pid, as_string(v.get("process_name") or v.get("name")), "C", memory))
        gpu.processes = listed
    stated = [] if gpus else ["no compute process listed (the query names no GPU)"]
    return NvidiaSmiRecord(format="compute-apps csv", gpus=list(gpus.values()), fragment=len(gpus), stated=stated)


def _column(rows: list[list[str]], header: list[str], name: str) -> list[str]:
    if name not in header:
        return []
    i = header.index(name)
    return [r[i] for r in rows[1:] if len(r) > i]


def _gpu(position: int, v: dict[str, str]) -> SmiGpu:
    def first(*names: str) -> str | None:
        for name in names:
            value = v.get(name)
            if value is not None and to_float(value) is not None:
                return value
        return next((v[n] for n in names if n in v), None)

    index = to_int(v.get("index"))
    return SmiGpu(
        index=index if index is not None else position,
        pci_bus_id=as_string(v.get("pci.bus_id") or v.get("gpu_bus_id")),  # --query-remapped-rows names it so
        name=as_string(v.get("name") or v.get("gpu_name")),
        uuid=as_string(v.get("uuid") or v.get("gpu_uuid")),
        serial=as_string(v.get("serial") or v.get("gpu_serial")),
        vbios=as_string(v.get("vbios_version")),
        memory_total_mib=to_int(v.get("memory.total")),
        memory_used_mib=to_int(v.get("memory.used")),
        temperature_c=to_int(v.get("temperature.gpu")),
        memory_temperature_c=to_int(v.get("temperature.memory")),
        power_draw_w=to_float(first("power.draw", "power.draw.instant", "power.draw.average")),
        power_draw_average_w=to_float(v.get("power.draw.average")),
        power_limit_w=to_float(first("enforced.power.limit", "power.limit")),
        power_default_limit_w=to_float(v.get("power.default_limit")),
        utilization_gpu_percent=to_int(v.get("utilization.gpu")),
        fan_speed_percent=to_int(v.get("fan.speed")),
        performance_state=as_string(v.get("pstate")),
        persistence_mode=to_bool(v.get("persistence_mode")),
        compute_mode=as_compute_mode(v.get("compute_mode")),
        ecc_mode=to_bool(v.get("ecc.mode.current")),
        ecc_mode_pending=to_bool(v.get("ecc.mode.pending")),
        ecc_volatile_corrected=to_int(v.get("ecc.errors.corrected.volatile.total")),
        ecc_volatile_uncorrected=to_int(v.get("ecc.errors.uncorrected.volatile.total")),
        ecc_aggregate_corrected=to_int(v.get("ecc.errors.corrected.aggregate.total")),
        ecc_aggregate_uncorrected=to_int(v.get("ecc.errors.uncorrected.aggregate.total")),
        sram_aggregate_corrected=to_int(v.get("ecc.errors.corrected.aggregate.sram")),
        sram_aggregate_uncorrected=to_int(v.get("ecc.errors.uncorrected.aggregate.sram")),
        remapped_rows_correctable=to_int(v.get("remapped_rows.correctable")),
        remapped_rows_uncorrectable=to_int(v.get("remapped_rows.uncorrectable")),
        remapped_rows_pending=to_bool(v.get("remapped_rows.pending")),
        remapped_rows_failure=to_bool(v.get("remapped_rows.failure")),
        retired_pages_sbe=to_int(v.get("retired_pages.single_bit_ecc.count") or v.get("retired_pages.sbe")),
        retired_pages_dbe=to_int(v.get("retired_pages.double_bit.count") or v.get("retired_pages.dbe")),
        retired_pages_pending=to_bool(v.get("retired_pages.pending")),
        clocks_event_reasons_active=_reasons(v),
        sm_clock_mhz=to_int(first("clocks.current.sm", "clocks.sm")),
        sm_clock_max_mhz=to_int(first("clocks.max.sm", "clocks.max.sm_clock")),
        pcie_gen_current=to_int(v.get("pcie.link.gen.current")),
        pcie_gen_max=to_int(v.get("pcie.link.gen.max")),
        pcie_width_current=to_int(v.get("pcie.link.width.current")),
        pcie_width_max=to_int(v.get("pcie.link.width.max")),
        mig_mode=as_mode(v.get("mig.mode.current")),
        mig_mode_pending=as_mode(v.get("mig.mode.pending")),
        recovery_action=as_string(v.get("gpu_recovery_action"), keep_none=True) or recovery_from_reset_status(
            v.get("reset_status.reset_required"), v.get("reset_status.drain_and_reset_recommended")),
    )


def _reasons(v: dict[str, str]) -> list[str] | None:
    """Active reasons from the hex mask column, else from the per-reason Active/Not Active columns."""
    for prefix in ("clocks_event_reasons", "clocks_throttle_reasons"):
        mask = to_int(v.get(f"{prefix}.active"))
        if mask is not None:
            names = [name for name, bit in CLOCK_REASON_BITS.items() if mask & bit]
            unknown = mask & ~sum(CLOCK_REASON_BITS.values())
            return names + ([f"unknown_0x{unknown:x}"] if unknown else [])
        columns = {k[len(prefix) + 1:]: val for k, val in v.items() if k.startswith(f"{prefix}.")}
        if columns:
            return [name for name in CLOCK_REASON_BITS if to_bool(columns.get(name)) is True]
    return None
