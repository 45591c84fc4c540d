"""``nvidia-smi topo -m``: how each GPU (and NIC) reaches the others, and its CPU/NUMA affinity.

The matrix is tab-separated; on a terminal the header row carries ANSI underline escapes,
which are stripped first. Pasted into a web page (an issue, a forum) the tabs usually become
runs of spaces: then the header's columns are split on two or more spaces ("CPU Affinity" keeps
its one) and each row on any whitespace (no cell of a row holds a space). Columns are found by
header name: device columns (``GPU0``, ``NIC3``) hold the connection type (``X``, ``NV18``,
``SYS``, ``PIX``...), then ``CPU Affinity``, ``NUMA Affinity`` and, on newer drivers, ``GPU
NUMA ID``. The ``NIC Legend`` maps ``NICn`` to device names.
"""

from __future__ import annotations

import re

from ...records.smi import TopoDevice as TopoDevice
from ...records.smi import TopoRecord as TopoRecord
from ..detect import parser
from ..errors import ParseError
from ..text import is_noise, prepare

KIND = "nvidia-smi-topo"

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_DEVICE = re.compile(r"^(?:GPU|NIC|mlx\d|CPU)\w*$")
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+):\s*(\S+)\s*$")
_SPACED_HEADER = re.compile(r"\s{2,}")  # a header whose tabs a paste turned into spaces


def sniff(text: str) -> int:
    clean = _ANSI.sub("", text)
    return 85 if re.search(r"^\s*GPU0\s.*CPU Affinity", clean, re.MULTILINE) else 0


@parser(KIND, sniff=sniff, title="nvidia-smi topo -m")
def parse(text: str) -> TopoRecord:
    """Parse the ``topo -m`` matrix and its NIC legend."""
    lines = [_ANSI.sub("", line) for line in prepare(KIND, text)]
    start = next((i for i, line in enumerate(lines) if "CPU Affinity" in line), None)
    if start is None:
        raise ParseError(KIND, "no header row with 'CPU Affinity'")
    tabbed = "\t" in lines[start]
    head = lines[start].split("\t") if tabbed else _SPACED_HEADER.split(lines[start].strip())
    header = [c.strip() for c in head]
    if header and header[0] == "":
        header = header[1:]
    record = TopoRecord()
    for number, raw in enumerate(lines[start + 1:], start + 2):
        if not raw.strip() or is_noise(raw):
            if record.devices:
                break
            continue
        cells = [c.strip() for c in (raw.split("\t") if tabbed else raw.split())]
        name, values = cells[0], [c for c in cells[1:] if c]
        if not _DEVICE.match(name):
            break
        if len(values) < len([h for h in header if _DEVICE.match(h)]):
            raise ParseError(KIND, f"row {name} has fewer cells than device columns", number)
        device = TopoDevice(name)
        for column, value in zip(header, values, strict=False):
            if _DEVICE.match(column):
                device.links[column] = value
            elif column == "CPU Affinity":
                device.cpu_affinity = value or None
            elif column == "NUMA Affinity":
                device.numa_affinity = value or None
            elif column == "GPU NUMA ID":
                device.gpu_numa_id = value or None
        record.devices.append(device)
    if not record.devices:
        raise ParseError(KIND, "no device rows under the header", start + 1)
    for line in lines:
        if m := _NIC_LEGEND.match(line):
            record.nic_names[m.group(1)] = m.group(2)
    return record
