"""``nvidia-smi topo -p2p r|w|n|a|p``: whether each GPU pair can reach the other's memory directly.

A matrix like ``topo -m``'s (a header of ``GPU0 GPU1 ...``, a row per GPU, ``X`` on the diagonal) whose
cells are peer-to-peer statuses, followed by its legend: ``OK`` (status ok), ``CNS`` (chipset not
supported), ``GNS`` (GPU not supported), ``TNS`` (topology not supported), ``NS`` (not supported),
``DR`` (disabled by regkey), ``U`` (unknown). Tabs or runs of spaces separate the cells (a paste),
so rows are split on whitespace. Which capability the matrix shows (read, write, NVLink, atomics,
prop) is printed nowhere but on the pasted command line (``nvidia-smi topo -p2p r``).
"""

from __future__ import annotations

import re

from ...records.smi import P2P_STATUSES, P2pRecord
from ..detect import parser
from ..errors import ParseError
from ..text import is_noise, prepare
from .command import smi_commands

KIND = "nvidia-smi-p2p"

_HEADER = re.compile(r"^\s*GPU0(?:\s+GPU\d+)*\s*$")
_ROW = re.compile(r"^\s*(?P<gpu>GPU\d+)\s+(?P<cells>\S.*?)\s*$")
_LEGEND = re.compile(r"^\s*(?:X|OK|CNS|GNS|TNS|NS|DR|U)\s+=\s+\S")
_CAPABILITY = re.compile(r"\btopo\s+(?:-p2p|--p2p)[=\s]+(?P<cap>[rwnap]+)\b")


def sniff(text: str) -> int:
    """A GPU header row followed by rows of peer statuses; the legend's ``OK = Status Ok`` makes it sure."""
    lines = text.splitlines()[:200]
    if not any(_HEADER.match(line) for line in lines):
        return 0
    if any(re.match(r"^\s*OK\s+=\s+Status Ok", line, re.IGNORECASE) for line in lines):
        return 85
    rows = [m.group("cells").split() for line in lines if not _HEADER.match(line) and (m := _ROW.match(line))]
    statuses = {cell for cells in rows for cell in cells}
    return 70 if rows and statuses <= {"X", *P2P_STATUSES} and statuses - {"X"} else 0


@parser(KIND, sniff=sniff, title="nvidia-smi topo -p2p (peer-to-peer status matrix)")
def parse(text: str) -> P2pRecord:
    """The matrix (every cell must be ``X`` or a legend status) and, from a pasted command, its capability."""
    lines = prepare(KIND, text)
    start = next((i for i, line in enumerate(lines) if _HEADER.match(line)), None)
    if start is None:
        raise ParseError(KIND, "no 'GPU0 GPU1 ...' header row")
    gpus = lines[start].split()
    record = P2pRecord(gpus=gpus)
    for number, raw in enumerate(lines[start + 1:], start + 2):
        if not raw.strip() or is_noise(raw):
            if record.cells:
                break
            continue
        m = _ROW.match(raw)
        if m is None:
            break
        cells = m.group("cells").split()
        if len(cells) != len(gpus):
            raise ParseError(KIND, f"row {m.group('gpu')} has {len(cells)} cells for {len(gpus)} GPUs", number)
        unknown = [c for c in cells if c != "X" and c not in P2P_STATUSES]
        if unknown:
            raise ParseError(KIND, f"row {m.group('gpu')}: {unknown[0]!r} is no peer-to-peer status", number)
        record.cells[m.group("gpu")] = dict(zip(gpus, cells, strict=True))
    if set(record.cells) != set(gpus):
        raise ParseError(KIND, f"rows {sorted(record.cells)} do not match the header's GPUs {gpus}")
    for line in lines[start + 1 + len(gpus):]:
        if line.strip() and not is_noise(line) and line.strip() != "Legend:" and not _LEGEND.match(line):
            raise ParseError(KIND, f"unexpected line after the matrix {line.strip()[:60]!r}")
    capabilities = {m.group("cap") for c in smi_commands(text) if (m := _CAPABILITY.search(c))}
    record.capability = capabilities.pop() if len(capabilities) == 1 else None
    return record
