"""``dcgmi stats``: DCGM's job (``-j``) and process (``-p``) statistics, one box per GPU.

dcgmi/ProcessStats.cpp prints, per GPU, a header box ``| GPU ID: <n> |`` (``| Summary |`` for a job's summary
box), then sections headed ``|-----  Execution Stats  ---...`` / ``+-----  Performance Stats  ---...`` (also
``Event Stats``, ``Slowdown Stats``, ``Overall Health`` and the process utilisation sections), each a list of
``| <label> | <value> |`` rows: ``Double Bit ECC Errors``, ``PCIe Replay Warnings``, ``Critical XID Errors``,
``Overall Health``... Rows are kept by label as printed; what they mean is the judge's. Every box ends with
its ``Overall Health`` section, so a box without that row was cut: the record says so (``incomplete``), and
the rows it kept are still judged. Rows pasted without their box's header (a section rule such as ``+-----
Performance Stats  ---...`` and its rows, after the poster's ``...<snip>``: DCGM#305) are such a box of no
known GPU (``fragment``): judged on what they show, never a GPU counted.
"""

from __future__ import annotations

import re

from ...records.dcgm import DcgmStatsGpu, DcgmStatsRecord
from ..detect import parser
from ..errors import ParseError
from ..text import is_noise, prepare

KIND = "dcgmi-stats"

_BOX = re.compile(r"^\|\s*(?:GPU ID: (?P<gpu>\d+)|Summary)\s*\|$")
_SECTION = re.compile(r"^[|+]-{3,}\s+(?P<name>Execution Stats|Performance Stats|Event Stats|Slowdown Stats"
                      r"|Overall Health|Compute Process Utilization|Graphics Process Utilization"
                      r"|Process Utilization)\s+-+[+|]", re.IGNORECASE)
_ROW = re.compile(r"^\|\s*(?P<label>[^|]*?)\s*\|\s*(?P<value>[^|]*?)\s*\|$")


def sniff(text: str) -> int:
    """A box header and a section rule (80); a section rule and two rows pasted without the header (60)."""
    lines = [line.strip() for line in text.splitlines()]
    if not any(_SECTION.match(line) for line in lines):
        return 0
    if any(_BOX.match(line) for line in lines):
        return 80
    return 60 if sum(1 for line in lines if (m := _ROW.match(line)) and m.group("label")) >= 2 else 0


@parser(KIND, sniff=sniff, title="dcgmi stats (a job's or process's DCGM statistics per GPU)")
def parse(text: str) -> DcgmStatsRecord:
    """Parse ``dcgmi stats`` boxes; a paste cut inside a box keeps the rows it has."""
    record = DcgmStatsRecord()
    current: DcgmStatsGpu | None = None
    for raw in prepare(KIND, text):
        line = raw.strip()
        if not line or is_noise(raw):
            continue
        if m := _BOX.match(line):
            current = DcgmStatsGpu(int(m.group("gpu")) if m.group("gpu") is not None else None)
            record.gpus.append(current)
        elif current is None and _SECTION.match(line):
            current = DcgmStatsGpu(None, fragment=True)  # a section pasted without its box header
            record.gpus.append(current)
        elif current is not None and not _SECTION.match(line) and (m := _ROW.match(line)) and m.group("label"):
            current.rows.setdefault(m.group("label").rstrip(" *"), m.group("value"))
    if not record.gpus:
        raise ParseError(KIND, "no 'GPU ID: <n>' or 'Summary' box, nor a section of one")
    record.incomplete = [f"the box of {_name(box)} ends before its Overall Health row"
                         for box in record.gpus if "Overall Health" not in box.rows]
    return record


def _name(box: DcgmStatsGpu) -> str:
    if box.fragment:
        return "rows pasted without their box header (no GPU ID shown)"
    return f"GPU {box.gpu}" if box.gpu is not None else "the job summary"
