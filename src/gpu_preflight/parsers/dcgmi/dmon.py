"""``dcgmi dmon``: DCGM's field monitor, one row per entity per interval, like ``nvidia-smi dmon``.

dcgmi/DeviceMonitor.cpp prints a header of the fields' short names after ``#Entity`` and a second line of
their units after ``ID`` (both again every 14 samples), then a row per entity: its group and id (``GPU 0``,
``GPU-I 1``, ``GPU-CI 2``, ``Switch 0``, ``LINK 3``, from 4.6 ``GPU 0 LINK 3``, ``CPU Core 4``...) and each field's
value in a column as wide as the header's, ``N/A`` where DCGM has no value and blanks where the entity has no such
field. Samples are keyed by the header's names (the fields are whatever ``-e``/``-f`` asked for), never by position
alone. When dmon cannot watch the fields it says so after the header (``Error setting watches. Result: -6: Feature
not supported``) and samples nothing: the record keeps that line.
"""

from __future__ import annotations

import re

from ...records.dcgm import DcgmDmonRecord, DcgmDmonSample
from ..detect import parser
from ..errors import ParseError
from ..text import is_noise, prepare, to_float

KIND = "dcgmi-dmon"

_HEADER = re.compile(r"^\s*#Entity\s+\S")
# DCGM 4.6 names a link by its owner (PrintMetricsRow: "GPU 0 LINK 3", "SW 1 LINK 5"); before, "LINK <id>". A GPU's link
# is not that GPU: the row is the link's, its entity the owner and "LINK".
_ROW = re.compile(r"^\s*(?P<entity>(?:GPU|SW) \d+ LINK|GPU-CI|GPU-I|vGPU|GPU|Switch|LINK|CPU Core|CPU|CX|UNKNOWN) "
                  r"(?P<index>\d+)(?=\s|$)")
# dmon's own failures (DeviceMonitor.cpp: the watch, the reads, the entity group) and dcgmi's connection answer
_ERROR = re.compile(r"^\s*(?:Error setting watches\. Result: .+|Error getting values information\. .+"
                    r"|No data returned from the hostengine\.|Unable to get DCGM sorted entities\. .+"
                    r"|Unable to retrieve information about (?:field )?group.+|Error: .+)$")


def sniff(text: str) -> int:
    return 90 if any(_HEADER.match(line) for line in text.splitlines()) else 0


@parser(KIND, sniff=sniff, title="dcgmi dmon (DCGM field samples per entity)")
def parse(text: str) -> DcgmDmonRecord:
    """Parse ``dcgmi dmon`` output (repeated headers allowed; a paste may start or stop mid-stream)."""
    record = DcgmDmonRecord()
    starts: list[int] = []  # where each field's column starts on the header line
    for number, raw in enumerate(prepare(KIND, text), 1):
        line = raw.rstrip()
        if not line.strip() or is_noise(raw):
            continue
        if _HEADER.match(line):
            names = line.split()[1:]
            starts = [m.start() for m in re.finditer(r"\S+", line)][1:]
            if record.fields and names != record.fields:
                raise ParseError(KIND, "a second header with other fields: two dmon runs in one text", number)
            record.fields = names
            continue
        if m := _ERROR.match(line):
            record.errors.append(m.group(0).strip())
            continue
        if not (m := _ROW.match(line)):
            continue  # dmon's own 'ID' units line, a signal notice, a prompt: no sample
        if not record.fields:
            raise ParseError(KIND, "a sample before the '#Entity' header", number)
        record.samples.append(DcgmDmonSample(m.group("entity"), int(m.group("index")),
                                             _values(line, m.end(), record.fields, starts)))
    if not record.fields:
        raise ParseError(KIND, "no '#Entity' header line")
    return record


def _values(line: str, after: int, fields: list[str], starts: list[int]) -> dict[str, float | None]:
    """A row's values: one token per field, or, where blanks stand for fields the entity lacks, by column."""
    tokens = line[after:].split()
    if len(tokens) == len(fields):
        return {f: to_float(v) for f, v in zip(fields, tokens, strict=True)}
    ends = [*starts[1:], None]
    return {f: to_float(line[s:e].strip()) if len(line) > s else None
            for f, s, e in zip(fields, starts, ends, strict=True)}
