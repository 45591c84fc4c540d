"""``nvidia-smi -q -x``: the machine format, DTD v10 to v13.

Prefer this over any text form: tags are stable names. What moved between versions is
handled by trying the new tag, then the old one: ``gpu_power_readings`` /
``power_readings``, ``clocks_event_reasons`` / ``clocks_throttle_reasons`` (renamed with
driver 535 inside DTD v12), ``instant_power_draw`` / ``power_draw`` (v13), the ECC
counters split by memory (``dram_uncorrectable``, ``sram_uncorrectable_parity``) or by
bit count (``double_bit/total``, pre-Ampere). The XML is parsed with the standard
library after refusing entity declarations, which nvidia-smi never writes.

Each health-bearing element is judged as the same value in ``-q`` text is, by the same rule: the
GPU's ``<fabric>`` (state, status, 555+ ``<health>``) by :func:`fabric_failure`, the
``<ecc_errors>`` flags (SRAM threshold, unrepairable memory, pending repairs) by :data:`MEMORY_FLAGS`,
nvidia-smi's failure sentences (``GPU requires reset`` in place of a value, ``Unable to determine the
device handle`` printed above the document) by :func:`failures_in`, and a value that is neither a
reading nor "not available" is named (``incomplete``). A document cut before ``</nvidia_smi_log>`` is
read up to the cut (an element cut inside its value has no value) and marked incomplete.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable

from ...records.smi import SmiFailure
from ..detect import parser
from ..errors import ParseError
from ..text import is_not_available, prepare, to_bool, to_float, to_int
from . import (
    MEMORY_FLAGS,
    NvidiaSmiRecord,
    SmiGpu,
    SmiProcess,
    as_compute_mode,
    as_mode,
    as_string,
    fabric_failure,
    recovery_from_reset_status,
)
from .failures import failures_in

KIND = "nvidia-smi-xml"

_UNCORRECTED = ("dram_uncorrectable", "sram_uncorrectable", "sram_uncorrectable_parity",
                "sram_uncorrectable_secded")
_CORRECTED = ("dram_correctable", "sram_correctable")
_SRAM_UNCORRECTED = ("sram_uncorrectable", "sram_uncorrectable_parity", "sram_uncorrectable_secded")
_REASON_PREFIX = re.compile(r"^clocks_(?:event|throttle)_reason_")
_REASON_ALIASES = {"display_clocks_setting": "display_clock_setting"}


def sniff(text: str) -> int:
    return 100 if "<nvidia_smi_log" in text else 0


@parser(KIND, sniff=sniff, title="nvidia-smi -q -x (XML, DTD v10-v13)")
def parse(text: str) -> NvidiaSmiRecord:
    """Parse an ``nvidia-smi -q -x`` report (pasted prompt lines before it are ignored)."""
    lines = prepare(KIND, text)
    if re.search(r"<!ENTITY", text, re.IGNORECASE):
        raise ParseError(KIND, "XML entity declarations are not nvidia-smi output")
    start = text.find("<?xml")
    if start < 0:
        start = text.find("<nvidia_smi_log")
    if start < 0:
        raise ParseError(KIND, "no <nvidia_smi_log> element")
    end = text.rfind("</nvidia_smi_log>")
    body = text[start:end + len("</nvidia_smi_log>")] if end > start else text[start:]
    root, cut = _read(body, text[:start].count("\n"))
    if root.tag != "nvidia_smi_log":
        raise ParseError(KIND, f"root element is <{root.tag}>, expected <nvidia_smi_log>")
    gpus = root.findall("gpu")
    health = [_health(g) for g in gpus]
    record = NvidiaSmiRecord(
        format="xml",
        driver_version=_text(root, "driver_version"),
        cuda_version=_text(root, "cuda_version"),
        attached_gpus=to_int(_text(root, "attached_gpus")),
        timestamp=_text(root, "timestamp"),
        gpus=[_gpu(i, g) for i, g in enumerate(gpus)],
        failures=failures_in(lines) + [f for shown in health for f in shown],
    )
    if cut is not None:
        record.incomplete.append(cut)
    record.incomplete += [f"<gpu id={g.pci_bus_id!r}> (GPU {g.index}): element present but no reading in it"
                          for g, shown in zip(record.gpus, health, strict=True) if not g.has_readings() and not shown]
    record.incomplete += [f"<gpu id={e.get('id')!r}> (GPU {i}): unreadable <{path}> {value!r}"
                          for i, e in enumerate(gpus) for path, value in _unreadable(e)]
    return record


def _read(body: str, offset: int) -> tuple[ET.Element, str | None]:
    """The document's root element, and what says it was cut (``None`` when it is whole).

    A text that stops before ``</nvidia_smi_log>`` (a paste cut short, an ``-f`` file read while it was written)
    is read up to the cut: the elements closed before it keep their values, the one cut inside its value has none
    (the tree builder keeps a value back until its element ends), so nothing is judged on half a number. An
    error before the end is a garbled document, not a cut, and is refused.
    """
    # no entities (refused above), no external DTD fetch in expat
    reader: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start",))
    try:
        reader.feed(body)
        # the reader queues an error among the events: reading them all raises it (a mismatched tag mid-document)
        root = next((e for event in list(reader.read_events()) if isinstance(e := event[-1], ET.Element)), None)
    except ET.ParseError as exc:
        line = exc.position[0] + offset if exc.position else None
        raise ParseError(KIND, f"malformed XML: {exc}", line) from None
    try:
        reader.close()
    except ET.ParseError:
        if root is None:
            raise ParseError(KIND, "malformed XML: no element") from None
        last = root.findall("gpu")
        where = f" inside <gpu id={last[-1].get('id')!r}> (GPU {len(last) - 1})" if last else ""
        return root, f"document cut{where}: no </nvidia_smi_log>"
    assert root is not None
    return root, None


def _health(g: ET.Element) -> list[SmiFailure]:
    """The GPU's fabric and ECC memory flags as the failures they show: the ``-q`` rules, on the XML's elements."""
    bus = g.get("id")
    out = []
    fabric = g.find("fabric")
    if fabric is not None:
        health = fabric.find("health")
        shown = {c.tag.replace("_", " "): c.text for c in health} if health is not None else {}
        failure = fabric_failure(_text(fabric, "state"), _text(fabric, "status"), shown, bus, None)
        if failure is not None:
            out.append(failure)
    errors = g.find("ecc_errors")
    for path, code in MEMORY_FLAGS:
        value = _text(errors, "/".join(label.lower().replace(" ", "_") for label in path))
        if to_bool(value) is True:
            out.append(SmiFailure(code, f"ECC Errors / {' / '.join(path)} : {value}", bus))
    return out


# The readings the checks use, as ``-q``'s reader names them (query_text._BOOL_FIELDS, _INT_FIELDS), by their tags.
_BOOL_FIELDS = ("persistence_mode", "ecc_mode/current_ecc", "ecc_mode/pending_ecc",
                "remapped_rows/remapped_row_pending", "remapped_rows/remapped_row_failure",
                "retired_pages/pending_retirement", "retired_pages/pending_blacklist")
_INT_FIELDS = ("remapped_rows/remapped_row_corr", "remapped_rows/remapped_row_unc",
               "retired_pages/multiple_single_bit_retirement/retired_count",
               "retired_pages/double_bit_retirement/retired_count", "fb_memory_usage/total", "fb_memory_usage/used",
               "temperature/gpu_temp", "pci/replay_counter", "pci/pci_gpu_link_info/pcie_gen/current_link_gen",
               "pci/pci_gpu_link_info/link_widths/current_link_width")


def _unreadable(g: ET.Element) -> list[tuple[str, str]]:
    """Readings the checks use whose value is neither a value nor "not available" (``Yås``): named, as in ``-q``."""
    out = []
    readers: tuple[tuple[tuple[str, ...], Callable[[str], object]], ...] = ((_BOOL_FIELDS, to_bool),
                                                                            (_INT_FIELDS, to_int))
    for paths, convert in readers:
        for path in paths:
            value = _text(g, path)
            if value and not is_not_available(value) and convert(value) is None:
                out.append((path, value))
    errors = g.find("ecc_errors")
    for leaf in errors.iter() if errors is not None else ():
        value = (leaf.text or "").strip()
        if len(leaf) == 0 and value and not is_not_available(value) and to_int(value) is None \
                and to_bool(value) is None:
            out.append((f"ecc_errors/.../{leaf.tag}", value))
    reasons = g.find("clocks_event_reasons")
    if reasons is None:
        reasons = g.find("clocks_throttle_reasons")
    if reasons is None:
        return out
    for child in reasons:
        value = (child.text or "").strip()
        if _REASON_PREFIX.match(child.tag) and value and not is_not_available(value) \
                and value.lower() not in ("active", "not active"):
            out.append((f"{reasons.tag}/{child.tag}", value))
    return out


def _text(elem: ET.Element | None, path: str) -> str | None:
    if elem is None:
        return None
    found = elem.find(path)
    if found is None or found.text is None:
        return None
    return found.text.strip()


def _first(elem: ET.Element | None, *paths: str) -> str | None:
    """The first of ``paths`` that holds a reading (not missing, not N/A)."""
    if elem is None:
        return None
    for path in paths:
        value = _text(elem, path)
        if value is not None and to_float(value) is not None:
            return value
    return None


def _sum(elem: ET.Element | None, names: tuple[str, ...]) -> int | None:
    """Sum of the counters present among ``names``; ``None`` when none is readable."""
    if elem is None:
        return None
    values = [to_int(_text(elem, n)) for n in names]
    readable = [v for v in values if v is not None]
    return sum(readable) if readable else None


def _ecc(errors: ET.Element | None, scope: str, names: tuple[str, ...], bits: str) -> int | None:
    if errors is None:
        return None
    section = errors.find(scope)
    by_memory = _sum(section, names)
    if by_memory is not None:
        return by_memory
    return to_int(_text(section, f"{bits}/total")) if section is not None else None


def _gpu(index: int, g: ET.Element) -> SmiGpu:
    power = g.find("gpu_power_readings")
    if power is None:
        power = g.find("power_readings")
    errors = g.find("ecc_errors")
    remap = g.find("remapped_rows")
    remap_ok = remap is not None and len(remap) > 0
    temps = g.find("temperature")
    link = g.find("pci/pci_gpu_link_info")
    mig_devices = g.find("mig_devices")
    return SmiGpu(
        index=index,
        pci_bus_id=g.get("id") or _text(g, "pci/pci_bus_id"),
        name=as_string(_text(g, "product_name")),
        uuid=as_string(_text(g, "uuid")),
        serial=as_string(_text(g, "serial")),
        vbios=as_string(_text(g, "vbios_version")),
        memory_total_mib=to_int(_text(g, "fb_memory_usage/total")),
        memory_used_mib=to_int(_text(g, "fb_memory_usage/used")),
        temperature_c=to_int(_text(temps, "gpu_temp")),
        temp_slowdown_c=to_int(_text(temps, "gpu_temp_slow_threshold")),
        temp_shutdown_c=to_int(_text(temps, "gpu_temp_max_threshold")),
        temp_gpu_max_c=to_int(_text(temps, "gpu_temp_max_gpu_threshold")),
        memory_temperature_c=to_int(_text(temps, "memory_temp")),
        temp_memory_max_c=to_int(_text(temps, "gpu_temp_max_mem_threshold")),
        power_draw_w=to_float(_first(power, "instant_power_draw", "power_draw", "average_power_draw")),
        power_draw_average_w=to_float(_text(power, "average_power_draw")),
        power_limit_w=to_float(_first(power, "current_power_limit", "enforced_power_limit", "power_limit")),
        power_default_limit_w=to_float(_text(power, "default_power_limit")),
        utilization_gpu_percent=to_int(_text(g, "utilization/gpu_util")),
        fan_speed_percent=to_int(_text(g, "fan_speed")),
        performance_state=_text(g, "performance_state"),
        persistence_mode=to_bool(_text(g, "persistence_mode")),
        compute_mode=as_compute_mode(_text(g, "compute_mode")),
        ecc_mode=to_bool(_text(g, "ecc_mode/current_ecc")),
        ecc_mode_pending=to_bool(_text(g, "ecc_mode/pending_ecc")),
        ecc_volatile_corrected=_ecc(errors, "volatile", _CORRECTED, "single_bit"),
        ecc_volatile_uncorrected=_ecc(errors, "volatile", _UNCORRECTED, "double_bit"),
        ecc_aggregate_corrected=_ecc(errors, "aggregate", _CORRECTED, "single_bit"),
        ecc_aggregate_uncorrected=_ecc(errors, "aggregate", _UNCORRECTED, "double_bit"),
        sram_aggregate_corrected=_sum(errors.find("aggregate") if errors is not None else None,
                                      ("sram_correctable",)),
        sram_aggregate_uncorrected=_sum(errors.find("aggregate") if errors is not None else None,
                                        _SRAM_UNCORRECTED),
        remapped_rows_correctable=to_int(_text(remap, "remapped_row_corr")) if remap_ok else None,
        remapped_rows_uncorrectable=to_int(_text(remap, "remapped_row_unc")) if remap_ok else None,
        remapped_rows_pending=to_bool(_text(remap, "remapped_row_pending")) if remap_ok else None,
        remapped_rows_failure=to_bool(_text(remap, "remapped_row_failure")) if remap_ok else None,
        retired_pages_sbe=to_int(_text(g, "retired_pages/multiple_single_bit_retirement/retired_count")),
        retired_pages_dbe=to_int(_text(g, "retired_pages/double_bit_retirement/retired_count")),
        retired_pages_pending=to_bool(_text(g, "retired_pages/pending_retirement")
                                      or _text(g, "retired_pages/pending_blacklist")),
        clocks_event_reasons_active=_reasons(g),
        sm_clock_mhz=to_int(_text(g, "clocks/sm_clock")),
        sm_clock_max_mhz=to_int(_text(g, "max_clocks/sm_clock")),
        pcie_gen_current=to_int(_text(link, "pcie_gen/current_link_gen")),
        pcie_gen_max=to_int(_text(link, "pcie_gen/max_link_gen")),
        pcie_width_current=to_int(_text(link, "link_widths/current_link_width")),
        pcie_width_max=to_int(_text(link, "link_widths/max_link_width")),
        pcie_replay_counter=to_int(_text(g, "pci/replay_counter")),
        mig_mode=as_mode(_text(g, "mig_mode/current_mig")),
        mig_mode_pending=as_mode(_text(g, "mig_mode/pending_mig")),
        mig_devices=len(mig_devices.findall("mig_device"))
        if mig_devices is not None and as_mode(_text(g, "mig_mode/current_mig")) is not None else None,
        recovery_action=as_string(_text(g, "gpu_recovery_action"), keep_none=True) or recovery_from_reset_status(
            _text(g, "gpu_reset_status/reset_required"), _text(g, "gpu_reset_status/drain_and_reset_recommended")),
        processes=_processes(g),
    )


def _reasons(g: ET.Element) -> list[str] | None:
    reasons = g.find("clocks_event_reasons")
    if reasons is None:
        reasons = g.find("clocks_throttle_reasons")
    if reasons is None:
        return None
    active, read = [], False
    for child in reasons:
        value = (child.text or "").strip().lower()
        read = read or (_REASON_PREFIX.match(child.tag) is not None and value in ("active", "not active"))
        if value == "active":
            name = _REASON_PREFIX.sub("", child.tag)
            active.append(_REASON_ALIASES.get(name, name))
    # ``<clocks_throttle_reasons>N/A</clocks_throttle_reasons>`` (a vGPU), or every reason N/A: no reading, as in -q
    return active if read else None


def _processes(g: ET.Element) -> list[SmiProcess] | None:
    procs = g.find("processes")
    if procs is None:
        return None
    out = []
    for p in procs.findall("process_info"):
        pid = to_int(_text(p, "pid"))
        if pid is not None:
            out.append(SmiProcess(pid=pid, name=_text(p, "process_name") or None, type=_text(p, "type"),
                                  used_memory_mib=to_int(_text(p, "used_memory"))))
    return out
