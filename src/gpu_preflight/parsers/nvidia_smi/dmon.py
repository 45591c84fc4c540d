"""``nvidia-smi dmon``: periodic samples, one row per GPU per interval.

The two ``#`` header lines name the columns and their units; the set of columns depends
on ``-s`` and the driver (``jpg``/``ofa`` appeared with Ampere), so samples are keyed by
the header's names, never by position. ``-`` means "not sampled" and reads as ``None``.
"""

from __future__ import annotations

import re

from ...records.smi import DmonRecord as DmonRecord
from ..detect import parser
from ..errors import ParseError
from ..text import is_noise, prepare, to_float

KIND = "nvidia-smi-dmon"


def sniff(text: str) -> int:
    return 85 if re.search(r"^#\s*gpu\s+(?:pwr|sm|gtemp)\b", text, re.MULTILINE) else 0


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
            if tokens and tokens[0].lower() == "gpu":
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
