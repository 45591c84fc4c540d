"""``dcgmi nvlink -s`` (link states) and ``dcgmi nvlink -e -g N`` (error counters, table or ``-j`` JSON).

What DCGM prints (``dcgmi/Nvlink.cpp``, DCGM 2.x-4.x):

* ``-s``: a ``NvLink Link Status`` box, then ``GPUs:`` with ``gpuId <n>:`` and, on the next line, one
  letter per link slot (``DCGM_NVLINK_MAX_LINKS_PER_GPU`` of them: 12 or 18) from
  ``nvLinkStateToCharacter``: ``U`` up, ``D`` down, ``X`` disabled, ``_`` not supported (a slot the GPU
  does not have); then ``NvSwitches:`` with ``physicalId <n>:`` rows of the same letters, or ``No
  NvSwitches found.``, and the key line. People paste it whole or ``grep -A1 gpuId``'d (no box, no key).
* ``-e``: a tree box headed ``NVLINK Error Counts`` / ``GPU <n>`` with ``Link <n>`` and its
  ``-> CRC FLIT Error``, ``-> CRC Data Error``, ``-> Replay Error``, ``-> Recovery Error`` counters;
  with ``-j`` the same as ``{"body": {"Link <n>": {"children": {"<counter>": {"value": "<n>"}}}},
  "header": ["NVLINK Error Counts", "GPU <n>"]}``.

Both read into the NVLink listing record the ``nvidia-smi nvlink`` reader fills, so ``gpu.nvlink``
judges them by one rule: a link ``D`` or ``X`` is not active (down or disabled: either way the GPU
lost that link's bandwidth), a ``_`` slot is no link at all; counters keep NVML's names
(``crc_flit``, ``crc_data``, ``replay``, ``recovery``). NvSwitch rows are kept as the record's
``switches``. A command line pasted above the output (``> dcgmi nvlink -s``) is not output.
"""

from __future__ import annotations

import json
import re

from ...records.smi import ListedGpu, NvLinkState, SmiListingRecord
from ..detect import parser
from ..errors import ParseError
from ..text import is_elision, is_noise, prepare

KIND = "dcgmi-nvlink"

_STATUS_BOX = re.compile(r"^\|\s*NvLink Link Status\s*\|", re.MULTILINE)
_KEY = re.compile(r"^Key: Up=U, Down=D, Disabled=X, Not Supported=_", re.MULTILINE)
_ENTITY = re.compile(r"^\s*(?P<what>gpuId|physicalId)\s+(?P<id>\d+):\s*$")
_STATES = re.compile(r"^\s*[UDX_](?:\s+[UDX_])*\s*$")
_ERRORS_HEADER = re.compile(r"^\|\s*NVLINK Error Counts\s*\|", re.MULTILINE)
_JSON_HEADER = re.compile(r'"header"\s*:\s*\[\s*"NVLINK Error Counts"')
_GPU_BOX = re.compile(r"^\|\s*GPU\s+(?P<id>\d+)\s*\|\s*$")
_LINK_ROW = re.compile(r"^\|\s*Link\s+(?P<link>\d+)\s*\|\s*\|\s*$")
_COUNTER_ROW = re.compile(r"^\|\s*->\s*(?P<label>[A-Za-z][A-Za-z ]*?)\s*\|\s*(?P<value>-?\d+)\s*\|\s*$")
_COMMAND = re.compile(r"^\s*(?:[>$#]\s*)?dcgmi\s+nvlink\b")
_COUNTER_NAMES = {"crc flit error": "crc_flit", "crc data error": "crc_data", "replay error": "replay",
                  "recovery error": "recovery"}


def sniff(text: str) -> int:
    if _STATUS_BOX.search(text) or _KEY.search(text) or _ERRORS_HEADER.search(text) or _JSON_HEADER.search(text):
        return 95
    lines = text.splitlines()
    pairs = sum(1 for i, line in enumerate(lines[:-1])
                if _ENTITY.match(line) and line.strip().startswith("gpuId") and _STATES.match(lines[i + 1]))
    if pairs:
        return 70  # `dcgmi nvlink -s | grep -A1 gpuId`: the rows without their box
    return 60 if any(_COUNTER_ROW.match(line) for line in lines) else 0


@parser(KIND, sniff=sniff, title="dcgmi nvlink -s (link states) / -e (error counts, table or -j JSON)")
def parse(text: str) -> SmiListingRecord:
    """Parse ``dcgmi nvlink`` link states or error counters into an NVLink listing."""
    lines = [line for line in prepare(KIND, text) if not _COMMAND.match(line)]
    body = "\n".join(lines)
    if body.lstrip().startswith("{"):
        return _parse_json(body)
    if any(_COUNTER_ROW.match(line) for line in lines):
        return _parse_errors(lines)
    return _parse_states(lines)


def _states(gpu: ListedGpu, letters: str) -> None:
    for number, letter in enumerate(letters.split()):
        if letter != "_":
            gpu.links.append(NvLinkState(number, active=letter == "U"))
    if not gpu.links:
        gpu.nvlink_note = "not_supported"


def _parse_states(lines: list[str]) -> SmiListingRecord:
    record = SmiListingRecord(format="nvlink", tool="dcgmi")
    pending: ListedGpu | None = None
    for number, line in enumerate(lines, 1):
        if m := _ENTITY.match(line):
            pending = ListedGpu(int(m.group("id")), None, None)
            (record.gpus if m.group("what") == "gpuId" else record.switches).append(pending)
        elif pending is not None and _STATES.match(line):
            _states(pending, line)
            pending = None
        elif pending is not None and line.strip():
            raise ParseError(KIND, f"'{line.strip()[:40]}' where the link states of an entity belong", number)
    if not record.gpus and not record.switches:
        raise ParseError(KIND, "no 'gpuId <n>:' line with its link states")
    return record


def _parse_errors(lines: list[str]) -> SmiListingRecord:
    record = SmiListingRecord(format="nvlink", tool="dcgmi")
    gpu: ListedGpu | None = None
    link: NvLinkState | None = None
    for line in lines:  # the box's borders, header and a newer DCGM's "Error Detail" rows are passed over
        if not line.strip() or is_noise(line):
            record.elided = record.elided or is_elision(line)
        elif m := _GPU_BOX.match(line):
            gpu = ListedGpu(int(m.group("id")), None, None)
            record.gpus.append(gpu)
        elif (m := _LINK_ROW.match(line)) and gpu is not None:
            link = NvLinkState(int(m.group("link")))
            gpu.links.append(link)
        elif (m := _COUNTER_ROW.match(line)) and link is not None:
            name = _COUNTER_NAMES.get(m.group("label").strip().lower())
            if name is not None:
                link.errors[name] = int(m.group("value"))
    if not record.gpus or not any(g.links for g in record.gpus):
        raise ParseError(KIND, "no 'GPU <n>' box with a 'Link <n>' row")
    return record


def _parse_json(body: str) -> SmiListingRecord:
    try:
        doc = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ParseError(KIND, f"not a JSON document: {exc.msg}", exc.lineno) from exc
    header = doc.get("header") if isinstance(doc, dict) else None
    links = doc.get("body") if isinstance(doc, dict) else None
    gpu_names = [h for h in header or [] if isinstance(h, str) and re.fullmatch(r"GPU \d+", h)]
    if not gpu_names or not isinstance(links, dict):
        raise ParseError(KIND, "no 'GPU <n>' header or no link body")
    gpu = ListedGpu(int(gpu_names[0].split()[1]), None, None)
    for label, box in links.items():
        m = re.fullmatch(r"Link (\d+)", label)
        children = box.get("children") if isinstance(box, dict) else None
        if not m or not isinstance(children, dict):
            continue
        link = NvLinkState(int(m.group(1)))
        for counter, cell in children.items():
            name = _COUNTER_NAMES.get(counter.strip().lower())
            value = cell.get("value") if isinstance(cell, dict) else None
            if name is not None and isinstance(value, str | int) and str(value).lstrip("-").isdigit():
                link.errors[name] = int(value)
        gpu.links.append(link)
    if not gpu.links:
        raise ParseError(KIND, "no 'Link <n>' in the body")
    return SmiListingRecord(format="nvlink", tool="dcgmi", gpus=[gpu])
