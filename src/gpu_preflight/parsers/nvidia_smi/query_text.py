"""``nvidia-smi -q`` (and ``-q -d SECTION``): the indented ``Key : Value`` report.

The text is read into a tree by indentation first, then fields are looked up by their
path of labels (case-insensitive), so a section that moved or a label printed
``Gpu``/``GPU`` does not shift anything else. Differences handled: 535+ ``Clocks Event
Reasons`` vs older ``Clocks Throttle Reasons`` (reasons may nest: ``HW Thermal
Slowdown`` under ``HW Slowdown``); 590 ``Average``/``Instantaneous Power Draw`` vs one
``Power Draw``; ECC counted by memory (``DRAM Uncorrectable``, ``SRAM Uncorrectable
Parity``) or by bits (``Double Bit / Total``); ``Remapped Rows : N/A`` as a scalar; the
relative ``T.Limit`` temperatures of Hopper, which are not thresholds and are ignored.
An excerpt without the ``GPU <bus id>`` header (a pasted ``ECC Errors`` block) is read
as one GPU of unknown address and marked a ``fragment`` (the number of readings it shows):
its GPU count and driver are not in the text, so nothing is inferred about them. So is a text
with GPU headers but without the report's banner (neither ``Driver Version`` nor ``Attached
GPUs``: a ``-q -d CLOCK`` pasted from its first ``GPU`` line): a header names a GPU, not how many
there are, and "1 GPU(s) found" would be a PASS the text does not state. A header
with a suffix (``GPU 00000000:00:09.0 (MIG)``) is still a GPU.

Completeness (``incomplete``): a full report announces ``Attached GPUs`` and gives each
GPU a section that starts with ``Product Name`` and ends after ``Processes``. Fewer
sections than announced (unless the pasted command selected GPUs with ``-i``), a
section with a product name but no ``Processes``, a GPU header with nothing under it,
or a value that is neither a reading nor "not available" (``Pending : Yås``) all mean
the text is not what nvidia-smi printed, and are named rather than read as "no data".
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import msgspec

from ...records.smi import SmiFailure
from ..detect import parser
from ..errors import ParseError
from ..text import is_noise, is_not_available, prepare, to_bool, to_float, to_int
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
from .command import selected_ids
from .failures import failures_in

KIND = "nvidia-smi-q"

_GPU_HEADER = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])(?:\s+[^:]*)?$")
# A GPU section's node (:func:`_tree` names it from the header line): not a section that starts with "GPU" ("GPU
# Operation Mode", "GPU Reset Status"), which an excerpt without the header has at its top level.
_GPU_KEY = re.compile(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$")
_ENTRY = re.compile(r"^(?P<key>[^:]*?[^:\s])\s*(?::\s?(?P<value>.*))?$")
_REASONS = {
    "idle": "gpu_idle", "gpu idle": "gpu_idle", "applications clocks setting": "applications_clocks_setting",
    "sw power cap": "sw_power_cap", "hw slowdown": "hw_slowdown", "hw thermal slowdown": "hw_thermal_slowdown",
    "hw power brake slowdown": "hw_power_brake_slowdown", "sync boost": "sync_boost",
    "sw thermal slowdown": "sw_thermal_slowdown", "display clock setting": "display_clock_setting",
}
_UNCORRECTED = ("DRAM Uncorrectable", "SRAM Uncorrectable", "SRAM Uncorrectable Parity",
                "SRAM Uncorrectable SEC-DED")
_CORRECTED = ("DRAM Correctable", "SRAM Correctable")


class Node(msgspec.Struct):
    """One ``Key : Value`` line (value ``None`` for a section header) and what is indented under it."""

    key: str
    value: str | None
    line: int
    children: list[Node] = []

    def find(self, *path: str) -> Node | None:
        node: Node | None = self
        for label in path:
            if node is None:
                return None
            want = label.lower()
            node = next((c for c in node.children if c.key.lower() == want), None)
        return node

    def get(self, *path: str) -> str | None:
        node = self.find(*path)
        return node.value if node is not None else None

    def walk(self) -> Iterator[Node]:
        for child in self.children:
            yield child
            yield from child.walk()


# whatever prompt stands before it; at most eight other arguments before -q (bounded: linear on any line)
_COMMAND_Q = re.compile(r"(?<![\w.-])nvidia-smi(?:\.exe)?[ \t]+(?:[^\s|]+[ \t]+){0,8}?(?:-q|--query)(?=\s|$)")


def sniff(text: str) -> int:
    """nvidia-smi -q indents with spaces only, and its parser reads the nesting from their depth: a paste
    indented with tabs is not read as given (detection reads it with the tabs expanded, see
    :class:`~..text.PasteReader`), lest a section fold into its parent and its values go unjudged."""
    if re.search(r"^ *\t", text, re.MULTILINE):
        return 0
    if "NVSMI LOG" in text:
        return 90
    score = 30 if re.search(r"^Attached GPUs\s+:\s*\d+\s*$", text, re.MULTILINE) else 0
    # its own command pasted above a GPU's section (`nvidia-smi -q -d CLOCK`, whatever section was asked for)
    if _COMMAND_Q.search(text) and re.search(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:", text, re.MULTILINE):
        score += 45
    # the sections `-q -d <SECTION>` prints alone too (TEMPERATURE, POWER), and their first keys
    for label in ("Product Name", "ECC Errors", "Retired Pages", "Retired pages", "Remapped Rows",
                  "Clocks Event Reasons", "Clocks Throttle Reasons", "FB Memory Usage", "GPU Power Readings",
                  "Power Readings", "Temperature", "GPU Current Temp",
                  # a block a rule judges, pasted alone: reset status, ECC mode, one PCI block's link (not clocks:
                  # their keys alone name no tool, and judge nothing)
                  "GPU Reset Status", "GPU Recovery Action", "ECC Mode", "Ecc Mode", "GPU Link Info", "Link Width",
                  # the GPU's NVLink fabric (525+: State, Status; 550+: CliqueId, ClusterUUID), pasted to show its state
                  "Fabric", "CliqueId"):
        if re.search(rf"^\s+{label}\s*(?::|$)", text, re.MULTILINE):
            score += 15
    return min(score, 60)


@parser(KIND, sniff=sniff, title="nvidia-smi -q (text report, or an excerpt of one)")
def parse(text: str) -> NvidiaSmiRecord:
    """Parse ``nvidia-smi -q`` output, whole or a pasted section of it."""
    lines = prepare(KIND, text)
    root = _tree(lines)
    headers = [n for n in root.children if _GPU_KEY.match(n.key)]
    gpu_nodes = [n for n in headers if n.children]
    excerpt = not gpu_nodes
    if excerpt:
        body = [n for n in root.children if n.children]
        # `nvidia-smi -q | grep "GPU Recovery Action"`: one line per GPU, each a GPU of its own
        actions = [n for n in root.children if n.key.lower() == "gpu recovery action" and n.value is not None]
        if not body and not actions:
            raise ParseError(KIND, "no GPU section and no indented nvidia-smi -q block")
        gpu_nodes = [Node("GPU", None, body[0].line, body)] if body else [Node("GPU", None, n.line, [n])
                                                                          for n in actions]
    fabric = [_fabric_failure(g) for g in gpu_nodes]
    memory = [f for g in gpu_nodes for f in _memory_flags(g)]
    record = NvidiaSmiRecord(
        format="q",
        # driver 610 marks these two deprecated ("610.57.04 [Deprecated; ...]") and adds the new names
        driver_version=as_string(root.get("KMD Version") or _undeprecated(root.get("Driver Version"))),
        cuda_version=as_string(root.get("CUDA UMD Version") or _undeprecated(root.get("CUDA Version"))),
        attached_gpus=to_int(root.get("Attached GPUs")),
        timestamp=as_string(root.get("Timestamp")),
        gpus=[_gpu(i, n) for i, n in enumerate(gpu_nodes)],
        failures=failures_in(lines) + [f for f in fabric if f is not None] + memory,
    )
    if record.driver_version is None and record.attached_gpus is None:  # no banner: how many GPUs is not shown
        record.fragment = sum(1 for g in gpu_nodes for n in g.walk() if n.value is not None)
    if record.driver_version is None and not any(g.has_readings() for g in record.gpus) and not any(fabric):
        raise ParseError(KIND, "no nvidia-smi -q field found")
    record.selected = selected_ids(text)
    record.incomplete = _missing(root, headers, gpu_nodes, record.attached_gpus, record.selected is not None)
    record.incomplete += [f"{n.key} (line {n.line}): section present but no reading in it"
                          for n, g, f in zip(gpu_nodes, record.gpus, fabric, strict=True)
                          if not g.has_readings() and f is None]
    return record


def _memory_flags(g: Node) -> Iterator[SmiFailure]:
    """The ``ECC Errors`` flags set to ``Yes``: memory past its SRAM error threshold, memory the GPU cannot repair,
    a channel or TPC repair that waits for a reset."""
    ecc = g.find("ECC Errors")
    gpu = g.key[4:] if g.key.startswith("GPU ") else None
    for path, code in MEMORY_FLAGS:
        node = ecc.find(*path) if ecc is not None else None
        if node is not None and to_bool(node.value) is True:
            yield SmiFailure(code, f"ECC Errors / {' / '.join(path)} : {node.value}", gpu, node.line)


def _fabric_failure(g: Node) -> SmiFailure | None:
    """The ``Fabric`` block of a GPU section as the failure it shows (see :func:`fabric_failure`)."""
    node = g.find("Fabric")
    if node is None:
        return None
    health = node.find("Health")
    return fabric_failure(node.get("State"), node.get("Status"),
                          {c.key: c.value for c in health.children} if health is not None else {},
                          g.key[4:] if g.key.startswith("GPU ") else None, node.line)


def _undeprecated(value: str | None) -> str | None:
    """A header value without the bracketed deprecation note driver 610 appends to it."""
    return value.split(" [", 1)[0] if value is not None else None


def _missing(root: Node, headers: list[Node], gpu_nodes: list[Node], attached: int | None,
             selected: bool) -> list[str]:
    """What a full ``-q`` report would have printed and this text lacks or garbles."""
    out = [f"{h.key} (line {h.line}): section announced but empty" for h in headers if not h.children]
    if attached is not None and headers and len(headers) < attached and not selected:
        out.append(f"{len(headers)} of {attached} attached GPU section(s) present")
    for g in gpu_nodes:
        name = g.key if g.key.startswith("GPU ") else "GPU"
        if g.find("Product Name") is not None and g.find("Processes") is None:
            out.append(f"{name}: section ends before 'Processes' (cut)")
        out.extend(f"{name}: unreadable {label} {value!r} (line {line})" for label, value, line in _unreadable(g))
    return out


_BOOL_FIELDS = (("Persistence Mode",), ("ECC Mode", "Current"), ("ECC Mode", "Pending"), ("Remapped Rows", "Pending"),
                ("Remapped Rows", "Remapping Failure Occurred"), ("Retired Pages", "Pending Page Retirement"),
                ("Retired Pages", "Pending Page Blacklist"), ("Retired Pages", "Pending"))
_INT_FIELDS = (("Remapped Rows", "Correctable Error"), ("Remapped Rows", "Uncorrectable Error"),
               ("Retired Pages", "Single Bit ECC"), ("Retired Pages", "Double Bit ECC"), ("FB Memory Usage", "Total"),
               ("FB Memory Usage", "Used"), ("Temperature", "GPU Current Temp"), ("PCI", "Replays Since Reset"),
               ("PCI", "GPU Link Info", "PCIe Generation", "Current"),
               ("PCI", "GPU Link Info", "Link Width", "Current"))


def _unreadable(g: Node) -> Iterator[tuple[str, str, int]]:
    """Readings the checks use whose printed value is neither a value nor "not available"."""
    for path, convert in [*((p, to_bool) for p in _BOOL_FIELDS), *((p, to_int) for p in _INT_FIELDS)]:
        node = g.find(*path)
        if node is not None and node.value is not None and not is_not_available(node.value) \
                and convert(node.value) is None:
            yield " / ".join(path), node.value, node.line
    ecc = g.find("ECC Errors")
    for node in ecc.walk() if ecc is not None else ():
        if node.value is not None and not node.children and not is_not_available(node.value) \
                and to_int(node.value) is None and to_bool(node.value) is None:
            yield f"ECC Errors / {node.key}", node.value, node.line
    reasons = g.find("Clocks Event Reasons") or g.find("Clocks Throttle Reasons")
    if reasons is None:
        return
    for node in reasons.walk():
        if node.key.lower() in _REASONS and node.value is not None and not is_not_available(node.value) \
                and node.value.strip().lower() not in ("active", "not active"):
            yield f"{reasons.key} / {node.key}", node.value, node.line


def _tree(lines: list[str]) -> Node:
    """Nest ``Key : Value`` lines by indentation; a ``GPU <bus id>`` line opens a GPU section."""
    root = Node("", None, 0)
    stack: list[tuple[int, Node]] = [(-1, root)]
    for number, raw in enumerate(lines, 1):
        line = raw.expandtabs(4).rstrip()
        stripped = line.strip()
        if not stripped or is_noise(raw) or set(stripped) <= {"="} or "NVSMI LOG" in stripped:
            continue
        indent = len(line) - len(line.lstrip())
        if m := _GPU_HEADER.match(stripped):
            node = Node(f"GPU {m.group(1)}", None, number)
        elif m := _ENTRY.match(stripped):
            value = m.group("value")
            node = Node(m.group("key"), value.strip() if value is not None else None, number)
        else:
            continue
        while stack[-1][0] >= indent:
            stack.pop()
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    return root


def _gpu(index: int, g: Node) -> SmiGpu:
    bus = g.key[4:] if g.key.startswith("GPU ") else None
    power = g.find("GPU Power Readings") or g.find("Power Readings")
    temps = g.find("Temperature")
    remap = g.find("Remapped Rows")
    remap_ok = remap is not None and bool(remap.children)
    retired = g.find("Retired Pages")
    link = g.find("PCI", "GPU Link Info") or g.find("GPU Link Info")  # a PCI block pasted from its link info on
    mig_devices = [c for c in g.children if c.key.lower() == "mig device"]
    return SmiGpu(
        index=index,
        pci_bus_id=bus or as_string(g.get("PCI", "Bus Id")),
        name=as_string(g.get("Product Name")),
        uuid=as_string(g.get("GPU UUID")),
        serial=as_string(g.get("Serial Number")),
        vbios=as_string(g.get("VBIOS Version")),
        memory_total_mib=to_int(g.get("FB Memory Usage", "Total")),
        memory_used_mib=to_int(g.get("FB Memory Usage", "Used")),
        temperature_c=_temp(temps, "GPU Current Temp", "Gpu"),  # "Gpu : 49 C": the R304-R325 form
        temp_slowdown_c=_temp(temps, "GPU Slowdown Temp"),
        temp_shutdown_c=_temp(temps, "GPU Shutdown Temp"),
        temp_gpu_max_c=_temp(temps, "GPU Max Operating Temp"),
        memory_temperature_c=_temp(temps, "Memory Current Temp"),
        temp_memory_max_c=_temp(temps, "Memory Max Operating Temp"),
        power_draw_w=_first(power, "Instantaneous Power Draw", "Power Draw", "Average Power Draw"),
        power_draw_average_w=_first(power, "Average Power Draw"),
        power_limit_w=_first(power, "Current Power Limit", "Enforced Power Limit", "Power Limit"),
        power_default_limit_w=_first(power, "Default Power Limit"),
        utilization_gpu_percent=to_int(g.get("Utilization", "GPU")),
        fan_speed_percent=to_int(g.get("Fan Speed")),
        performance_state=as_string(g.get("Performance State")),
        persistence_mode=to_bool(g.get("Persistence Mode")),
        compute_mode=as_compute_mode(g.get("Compute Mode")),
        ecc_mode=to_bool(g.get("ECC Mode", "Current")),
        ecc_mode_pending=to_bool(g.get("ECC Mode", "Pending")),
        ecc_volatile_corrected=_ecc(g, "Volatile", _CORRECTED, "Single Bit"),
        ecc_volatile_uncorrected=_ecc(g, "Volatile", _UNCORRECTED, "Double Bit"),
        ecc_aggregate_corrected=_ecc(g, "Aggregate", _CORRECTED, "Single Bit"),
        ecc_aggregate_uncorrected=_ecc(g, "Aggregate", _UNCORRECTED, "Double Bit"),
        sram_aggregate_corrected=_sum(g.find("ECC Errors", "Aggregate"), ("SRAM Correctable",)),
        sram_aggregate_uncorrected=_sum(g.find("ECC Errors", "Aggregate"), _UNCORRECTED[1:]),
        remapped_rows_correctable=to_int(remap.get("Correctable Error")) if remap_ok and remap else None,
        remapped_rows_uncorrectable=to_int(remap.get("Uncorrectable Error")) if remap_ok and remap else None,
        remapped_rows_pending=to_bool(remap.get("Pending")) if remap_ok and remap else None,
        remapped_rows_failure=to_bool(remap.get("Remapping Failure Occurred")) if remap_ok and remap else None,
        retired_pages_sbe=to_int(retired.get("Single Bit ECC")) if retired else None,
        retired_pages_dbe=to_int(retired.get("Double Bit ECC")) if retired else None,
        retired_pages_pending=_retirement_pending(retired),
        clocks_event_reasons_active=_reasons(g),
        sm_clock_mhz=to_int(g.get("Clocks", "SM")),
        sm_clock_max_mhz=to_int(g.get("Max Clocks", "SM")),
        pcie_gen_current=to_int(link.get("PCIe Generation", "Current")) if link else None,
        pcie_gen_max=to_int(link.get("PCIe Generation", "Max")) if link else None,
        pcie_width_current=to_int(link.get("Link Width", "Current")) if link else None,
        pcie_width_max=to_int(link.get("Link Width", "Max")) if link else None,
        pcie_replay_counter=to_int(g.get("PCI", "Replays Since Reset")),
        mig_mode=as_mode(g.get("MIG Mode", "Current")),
        mig_mode_pending=as_mode(g.get("MIG Mode", "Pending")),
        mig_devices=len(mig_devices) if as_mode(g.get("MIG Mode", "Current")) is not None else None,
        recovery_action=as_string(g.get("GPU Recovery Action"), keep_none=True) or recovery_from_reset_status(
            g.get("GPU Reset Status", "Reset Required"), g.get("GPU Reset Status", "Drain and Reset Recommended")),
        processes=_processes(g.find("Processes")),
    )


def _temp(temps: Node | None, *labels: str) -> int | None:
    """The first of ``labels`` under ``Temperature`` that holds a reading."""
    if temps is None:
        return None
    return next((t for label in labels if (t := to_int(temps.get(label))) is not None), None)


def _first(section: Node | None, *labels: str) -> float | None:
    if section is None:
        return None
    for label in labels:
        value = to_float(section.get(label))
        if value is not None:
            return value
    return None


def _sum(section: Node | None, labels: tuple[str, ...]) -> int | None:
    if section is None:
        return None
    values = [v for label in labels if (v := to_int(section.get(label))) is not None]
    return sum(values) if values else None


def _ecc(g: Node, scope: str, labels: tuple[str, ...], bits: str) -> int | None:
    section = g.find("ECC Errors", scope)
    by_memory = _sum(section, labels)
    if by_memory is not None or section is None:
        return by_memory
    return to_int(section.get(bits, "Total"))


def _retirement_pending(retired: Node | None) -> bool | None:
    if retired is None:
        return None
    for label in ("Pending Page Retirement", "Pending Page Blacklist", "Pending"):
        value = to_bool(retired.get(label))
        if value is not None:
            return value
    return None


def _reasons(g: Node) -> list[str] | None:
    section = g.find("Clocks Event Reasons") or g.find("Clocks Throttle Reasons")
    if section is None:
        return None
    active, read = [], False
    for node in section.walk():
        name = _REASONS.get(node.key.lower())
        value = (node.value or "").strip().lower()
        read = read or (name is not None and value in ("active", "not active"))
        if name and value == "active":
            active.append(name)
    # ``Clocks Throttle Reasons : N/A`` (a vGPU, WSL), or every reason N/A: no reading, not "none active"
    return active if read else None


def _processes(section: Node | None) -> list[SmiProcess] | None:
    if section is None:
        return None
    out = []
    for node in section.walk():
        if node.key.lower() == "process id" and (pid := to_int(node.value)) is not None:
            out.append(SmiProcess(pid=pid, name=as_string(node.get("Name")), type=as_string(node.get("Type")),
                                  used_memory_mib=to_int(node.get("Used GPU Memory"))))
    return out
