"""``nvidia-smi dmon``: periodic samples, one row per GPU per interval.

The two ``#`` header lines name the columns and their units; the set of columns depends
on ``-s`` and the driver (``jpg``/``ofa`` appeared with Ampere), so samples are keyed by
the header's names, never by position. ``-`` means "not sampled" and reads as ``None``.
Each ``-s`` group puts its own columns first after ``gpu`` (:data:`COLUMNS`: ``p`` pwr
gtemp mtemp, older drivers pwr temp; ``u`` sm mem enc dec [jpg ofa]; ``c`` mclk pclk; ``v``
pviol tviol; ``m`` fb bar1 [ccpm]; ``e`` sbecc dbecc pci; ``t`` rxpci txpci), and ``-o D``/``T``
put ``Date``/``Time`` before ``gpu`` (``#Date Time gpu ...`` over ``#YYYYMMDD HH:MM:SS Idx
...``), so a header is known by ``gpu`` followed by one of those names.
"""

from __future__ import annotations

import re

from ...records.smi import DmonRecord as DmonRecord
from ..detect import parser
from ..errors import ParseError
from ..text import is_noise, prepare, to_float

KIND = "nvidia-smi-dmon"

COLUMNS = ("pwr", "gtemp", "mtemp", "temp", "sm", "mem", "enc", "dec", "jpg", "ofa", "mclk", "pclk", "pviol",
           "tviol", "fb", "bar1", "ccpm", "sbecc", "dbecc", "pci", "rxpci", "txpci")
"""The columns ``dmon -s pucvmet`` can print, in the order the groups print them."""
_HEADER = re.compile(rf"^[ \t]*#[ \t]*(?:date[ \t]+)?(?:time[ \t]+)?gpu[ \t]+(?:{'|'.join(COLUMNS)})\b",
                     re.IGNORECASE | re.MULTILINE)


def sniff(text: str) -> int:
    return 85 if _HEADER.search(text) else 0


@parser(KIND, sniff=sniff, title="nvidia-smi dmon")
def parse(text: str) -> DmonRecord:
    """Parse ``nvidia-smi dmon`` output (repeated header blocks are allowed)."""
    record = DmonRecord()
    for number, raw in enumerate(prepare(KIND, text), 1):
        line = raw.strip()
        if not line or is_noise(raw):
            continue
        if line.startswith("#"):
            tokens = line.lstrip("#").split()
            if _HEADER.match(line) or (tokens and tokens[0].lower() == "gpu"):
                record.columns = [t.lower() for t in tokens]
            elif tokens and record.columns and not record.units:
                record.units = tokens
            continue
        if not record.columns:
            raise ParseError(KIND, "sample before the '# gpu ...' header", number)
        values = line.split()
        if len(values) != len(record.columns):
            raise ParseError(KIND, f"{len(values)} values for {len(record.columns)} columns", number)
        record.samples.append({c: to_float(v) for c, v in zip(record.columns, values, strict=True)})
    if not record.columns:
        raise ParseError(KIND, "no '# gpu ...' header line")
    return record
