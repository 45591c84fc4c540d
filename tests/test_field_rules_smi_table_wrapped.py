"""An nvidia-smi table copied from a terminal narrower than it (issue 27's field corpus).

HPE's passthrough notes paste the 91-column table of driver 550 with every line wrapped at column
80 and re-joined by a run of blanks, so the border reads ``+---...---`` (80) + blanks + ``-----+``
and a header cell ``Volatile Un`` + blanks + ``corr. ECC``. The border rows, which hold no blank
of their own, give the wrap column and the run's width; the run is taken out of every row and the
table reads as printed. A table pasted whole is left as it is.
"""

from __future__ import annotations

from pathlib import Path

from gpu_preflight.parsers.detect import parse_text
from gpu_preflight.parsers.nvidia_smi.table import _unwrap

# a clean 91-column table of the field corpus (driver 590, one H100), wrapped here as the terminal did
CLEAN = (Path(__file__).parent / "fixtures" / "field" / "nvidia-smi" / "exporter-table-h100-590.48.01-idle.txt"
         ).read_text()


def wrapped(text: str, column: int = 80, total: int = 248) -> str:
    lines = text.splitlines()
    width = max(len(line) for line in lines)
    return "\n".join(line[:column] + " " * (total - width) + line[column:] if len(line) == width else line
                     for line in lines) + "\n"


def test_a_wrapped_table_reads_as_the_table() -> None:
    kind, record = parse_text(wrapped(CLEAN))
    _, clean = parse_text(CLEAN)
    assert kind == "nvidia-smi-table"
    assert record.driver_version == clean.driver_version and record.cuda_version == clean.cuda_version
    assert record.gpus == clean.gpus and record.gpus[0].compute_mode is not None


def test_a_table_pasted_whole_is_left_as_it_is() -> None:
    lines = CLEAN.splitlines()
    assert _unwrap(lines) == lines
