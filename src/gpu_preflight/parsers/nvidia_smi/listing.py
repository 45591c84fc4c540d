"""``nvidia-smi nvlink -s|--status|-e`` and ``nvidia-smi -L``: per-GPU listings.

Both start each GPU with ``GPU <n>: <name> (UUID: <uuid>)`` (a paste may cut the UUID off: read
under ``nvlink``, whose link lines below say what it is). Under it, ``nvlink`` prints
one line per link (``Link 0: 26.562 GB/s``, ``Link 3: <inactive>``, or with ``-e``
``Link 0: Replay Errors: 0``) and ``-L`` one line per MIG instance. Indentation (tabs,
two or nine spaces) and pasted elisions (``[...]``) vary and are ignored; an elided
listing is flagged so a judge does not count links that were cut out as missing. A GPU
without NVLink makes ``nvidia-smi nvlink -s`` print nothing: that empty output is an
answer (no links), not an error. Newer drivers print a message under the GPU instead
(:data:`~gpu_preflight.records.smi.NVLINK_NOTES`): all links inactive, no NVLink on this
device, no NVLink query in MIG mode, or (``nvlink -g``/``-e`` as a user) counters kept to
administrators; the GPU keeps it as ``nvlink_note``. ``nvlink -c``/``--capabilities`` lists, per
link, what it supports (``Link 0, P2P is supported: true``, six lines a link): a GPU listed
so carries the ``capabilities`` note, since none of it says whether a link is up; so do the
traffic counters of ``nvlink -gt d``/``-gt r`` (``Link 0: Data Tx: 5863784 KiB``) and older
drivers' ``-g 0`` (``Link 0: Rx0: 0 KBytes, Tx0: 0 KBytes``), which carry the ``throughput`` note.
nvidia-smi wraps the all-inactive message at 80 columns in some captures (``... as all`` / ``links are inActive``), so a
continuation line is read as part of it. A paste cut above its first ``GPU`` line starts with
the last links (or MIG lines) of a GPU it does not name: they are passed over and the listing
is flagged ``elided``, judged on the GPUs it names.
"""

from __future__ import annotations

import re

from ...records.smi import ListedGpu as ListedGpu
from ...records.smi import MigInstance as MigInstance
from ...records.smi import NvLinkState as NvLinkState
from ...records.smi import SmiListingRecord as SmiListingRecord
from ..detect import parser
from ..errors import ParseError
from ..text import is_elision, is_noise, prepare, to_float

NVLINK_KIND = "nvidia-smi-nvlink"
LIST_KIND = "nvidia-smi-list"

_GPU = re.compile(r"^GPU\s+(?P<index>\d+):\s*(?P<name>.*?)\s*\(UUID:\s*(?P<uuid>[^)]+)\)\s*$")
# Under ``nvlink``, a GPU line whose UUID the poster cut off ('GPU 0: Tesla V100-SXM2-32GB'): the links
# under it say which tool printed it. ``-L`` has nothing else to go by and keeps the UUID required.
_GPU_NO_UUID = re.compile(r"^GPU\s+(?P<index>\d+):\s*(?P<name>[^()]*?)\s*$")
_LINK = re.compile(r"^Link\s+(?P<link>\d+):\s*(?P<rest>.*)$")
_COUNTER = re.compile(r"^(?P<label>[A-Za-z][\w ./-]*?):\s*(?P<value>\S+)\s*$")
_MIG = re.compile(r"^MIG\s+(?P<profile>\S+)\s+Device\s+(?P<index>\d+):\s*\(UUID:\s*(?P<uuid>[^)]+)\)")
_NOTES = (
    ("all_inactive", re.compile(
        r"^(?:NVML:\s*)?Unable to retrieve NVLink information as all(?:\s+links are inactive\.?)?$", re.IGNORECASE)),
    ("not_supported", re.compile(r"^Device does not (?:have or )?support NVLink\.?$", re.IGNORECASE)),
    ("mig_mode", re.compile(r"^NVLink queries are not supported for Devices in MIG mode\.?$", re.IGNORECASE)),
    ("no_permission", re.compile(r"^(?:NVML:\s*)?Unable to (?:get|retrieve|read|query)\b.*:\s*"
                                 r"Insufficient Permissions\.?$", re.IGNORECASE)),
)
_CAPABILITY = re.compile(r"^Link\s+\d+,\s*[A-Za-z][\w ]*?:\s*(?:true|false)$", re.IGNORECASE)  # nvlink -c
# nvlink -gt d|r (Data/Raw Tx/Rx in KiB) and older drivers' -g 0|1 (Rx0/Tx0 in KBytes): traffic, not state
_THROUGHPUT = re.compile(r"^(?:(?:Data|Raw)\s+[TR]x:\s*[\d,]+\s*KiB|Rx\d:\s*\d+\s*KBytes,\s*Tx\d:\s*\d+\s*KBytes)$",
                         re.IGNORECASE)
_WRAPPED = re.compile(r"^links are inactive\.?$", re.IGNORECASE)  # the second half of a wrapped all_inactive


def sniff_nvlink(text: str) -> int:
    has_gpu = re.search(r"^GPU\s+\d+:.*\(UUID:", text, re.MULTILINE) or re.search(
        r"^GPU\s+\d+:[^()\n]*\n\s*Link\s+\d+[:,]", text, re.MULTILINE)
    if not has_gpu:
        return 0
    if re.search(r"^\s*Link\s+\d+(?::|,\s*[A-Za-z][\w ]*?:\s*(?:true|false)\s*$)", text, re.MULTILINE):
        return 85
    lines = (line.strip() for line in text.splitlines())
    return 85 if any(_note(line) for line in lines) else 0


def _note(line: str) -> str | None:
    """The :data:`~gpu_preflight.records.smi.NVLINK_NOTES` code a line prints, if it is one."""
    return next((code for code, pattern in _NOTES if pattern.match(line)), None)


def sniff_list(text: str) -> int:
    """``-L`` output is nothing but GPU and MIG lines (the last may be cut by the sniff window). A paste
    that starts with such a listing and goes on with another tool's output is less surely ``-L``: it is
    that tool's when its sniffer recognises the rest, else the listing's (read up to where it ends)."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not is_noise(line)]
    if not lines or not _GPU.match(lines[0]):
        return 0
    hits = sum(1 for line in lines if _GPU.match(line) or _MIG.match(line))
    return 80 if hits >= len(lines) - 1 else 30


@parser(NVLINK_KIND, sniff=sniff_nvlink, title="nvidia-smi nvlink -s / --status / -e")
def parse_nvlink(text: str) -> SmiListingRecord:
    """Parse NVLink status or error-counter listings (empty output: no NVLink)."""
    return _parse(NVLINK_KIND, text, "nvlink")


@parser(LIST_KIND, sniff=sniff_list, title="nvidia-smi -L")
def parse_list(text: str) -> SmiListingRecord:
    """Parse ``nvidia-smi -L`` (GPUs and their MIG instances)."""
    record = _parse(LIST_KIND, text, "list")
    if not record.gpus:
        raise ParseError(LIST_KIND, "no 'GPU <n>: <name> (UUID: ...)' line")
    return record


def _parse(kind: str, text: str, fmt: str) -> SmiListingRecord:
    record = SmiListingRecord(format=fmt)
    current: ListedGpu | None = None
    for number, raw in enumerate(prepare(kind, text, allow_empty=(fmt == "nvlink")), 1):
        line = raw.strip()
        if not line or is_noise(raw):
            record.elided = record.elided or is_elision(raw)
            continue
        if (m := _GPU.match(line)) or (fmt == "nvlink" and (m := _GPU_NO_UUID.match(line))):
            uuid = m.groupdict().get("uuid")
            current = ListedGpu(int(m.group("index")), m.group("name") or None, uuid.strip() if uuid else None)
            record.gpus.append(current)
        elif current is not None and fmt == "nvlink" and (m := _LINK.match(line)) and _THROUGHPUT.match(m["rest"]):
            current.nvlink_note = current.nvlink_note or "throughput"
        elif current is not None and (m := _LINK.match(line)):
            _add_link(current, int(m.group("link")), m.group("rest"))
        elif current is not None and (m := _MIG.match(line)):
            current.mig_devices.append(MigInstance(m.group("profile"), int(m.group("index")), m.group("uuid")))
        elif current is not None and fmt == "nvlink" and (note := _note(line)):
            current.nvlink_note = note
        elif current is not None and fmt == "nvlink" and _CAPABILITY.match(line):
            current.nvlink_note = current.nvlink_note or "capabilities"
        elif current is not None and current.nvlink_note == "all_inactive" and _WRAPPED.match(line):
            continue
        elif current is None and (_LINK.match(line) or _MIG.match(line) or _note(line) or _CAPABILITY.match(line)):
            record.elided = True  # a cut paste: the GPU these lines belong to is not shown
        else:
            raise ParseError(kind, f"unexpected line {line[:60]!r}", number)
    if fmt == "nvlink" and record.gpus and not any(g.links or g.nvlink_note for g in record.gpus):
        raise ParseError(kind, "GPU lines but no 'Link <n>:' line")
    return record


def _add_link(gpu: ListedGpu, number: int, rest: str) -> None:
    link = next((x for x in gpu.links if x.link == number), None)
    if link is None:
        link = NvLinkState(number)
        gpu.links.append(link)
    text = rest.strip()
    if "inactive" in text.lower():
        link.active = False
    elif text.endswith("/s"):
        link.speed_gb_per_s = to_float(text)
        link.active = True
    elif m := _COUNTER.match(text):
        label = m.group("label").lower().replace(" errors", "").replace(" ", "_")
        value = m.group("value")
        if value.isdigit():
            link.errors[label] = int(value)
