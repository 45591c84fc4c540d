"""Plain ``nvidia-smi``: the boxed summary table people paste most often.

Each GPU is a block of rows (two or three, as many as the header has) of ``|``-separated
cells. The header cells say what each data cell holds (``Pwr:Usage/Cap``,
``Memory-Usage``, ``MIG M.``...), so a value is read from the cell under its label, not
from a fixed column: the 79-column layout (up to 525), the 89-column layout (530+),
Windows' ``Driver-Model`` in place of ``Persistence-M`` all read the same way. MIG mode
prints ``On`` in the ECC cell and ``N/A`` utilisation; names longer than the cell end in
``...``. The ``MIG devices:`` and ``Processes:`` boxes give instance and process counts per GPU.

``ERR!`` stands where nvidia-smi asked the driver for a reading and got an error (a fan
tachometer or power sensor that does not answer): it is not "no reading". Each one is kept
as an ``unreadable_reading`` failure naming the GPU and the column, so the GPU is never
passed on the readings that are left.

A table pasted without its banner (the GPU table cut out from its header row down, the way
issues quote the one GPU that misbehaves) is a ``fragment``: its labelled cells are read the
same way, judged on the GPUs it shows, and nothing is assumed of the driver or the GPU count.

A table copied from a terminal narrower than it can come back with each wrapped line re-joined by
a run of blanks at the wrap column (``+-----...-----`` then 150 blanks then ``----------+``):
the border rows, which hold no blank of their own, show that column and the run's width, and the
run is taken out of every row before the cells are read (:func:`_unwrap`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ...records.smi import SmiFailure
from ..detect import parser
from ..errors import ParseError
from ..text import prepare, to_bool, to_int
from . import NvidiaSmiRecord, SmiGpu, SmiProcess, as_compute_mode, as_mode, as_string
from .failures import failures_in

ERR = "ERR!"  # nvidia-smi's mark for a reading the driver failed to return
KIND = "nvidia-smi-table"

# Driver 610 renamed the banner's fields: "KMD Version" for the driver, "CUDA UMD Version" for CUDA.
_VERSIONS = re.compile(r"NVIDIA-SMI\s+(?P<smi>\S+)\s+(?:Driver|KMD) Version:\s*(?P<driver>\S+)"
                       r"(?:\s+CUDA (?:UMD )?Version:\s*(?P<cuda>[\w.]+))?")
_RULE = re.compile(r"^\|?[=|+]+\|?$")
_BORDER = re.compile(r"^\+[-+]+\+$")
_BUS = re.compile(r"([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])(?:\s+(\S+))?")
_POWER = re.compile(r"(?<!\d)(\d+|N/A)W\s*/\s*(\d+|N/A)W")
_MEMORY = re.compile(r"(?<!\d)(\d+)Mi?B\s*/\s*(\d+)Mi?B")  # MiB; 'MB' before R346 (the same mebibytes)
_PROCESS = re.compile(r"^\|\s*(?P<gpu>\d+)\s+(?:(?P<gi>\S+)\s+(?P<ci>\S+)\s+)?(?P<pid>\d+)\s+"
                      r"(?:(?P<type>C\+G|M\+C|C|G|M)\s+)?(?P<name>.*?)\s+(?P<mem>\d+Mi?B|N/A)\s*\|$")
# The process box's title: ``Processes:``; before R346 ``Compute processes:``, compute ones only, no Type column,
# and on a GeForce of then a row ``0  Not Supported``: its processes are not shown (unknown, not none).
_PROCESS_TITLES = ("Processes:", "Compute processes:")
_MIG_ROW = re.compile(r"^\|\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*\|")
# The cells a table without its banner is known by, read cell by cell (linear on any line): the GPU table's
# first header row (``GPU  Name ... | Bus-Id ...``), its second (``Fan  Temp ... | Memory-Usage |``), and a GPU
# block's first two rows (``0  NVIDIA ... | 00000000:18:00.0 Off |`` over ``... | 1MiB /  81559MiB |``).
_GPU_LABEL = re.compile(r"GPU\s+Name\b")
_FAN_LABEL = re.compile(r"Fan\s+Temp\b")
_INDEX_CELL = re.compile(r"\d+\s+\S")
_BUS_CELL = re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]\b")
_MEMORY_CELL = re.compile(r"\d+Mi?B\s*/\s*\d+Mi?B")
# The header nvidia-smi prints above every GPU table, but for the first row's mode label (see _MODE_LABEL).
_STANDARD_HEADER = (["GPU  Name", "Bus-Id  Disp.A", "Volatile Uncorr. ECC"],
                    ["Fan  Temp  Perf  Pwr:Usage/Cap", "Memory-Usage", "GPU-Util  Compute M."], ["", "", "MIG M."])
# The first data cell ends with the mode its (lost) header row names: Persistence-M on Linux, Driver-Model on Windows.
_MODE_LABEL = {"On": "Persistence-M", "Off": "Persistence-M", "WDDM": "Driver-Model", "TCC": "Driver-Model"}
# A border row a terminal's wrap was re-joined into with blanks: dashes, the blank run, the rest of the border.
_WRAPPED_BORDER = re.compile(r"^(?P<head>[+|][-=+]{20,})(?P<gap> {8,})[-=+]+[+|]$")


def _unwrap(lines: list[str]) -> list[str]:
    """The table's rows with the blanks a terminal's wrap left in them taken out (see the module's doc).

    Only where at least two border rows agree on the wrap column and the run's width: a row of cells
    keeps its own blanks, and a table pasted whole is returned as it is.
    """
    gaps = {(len(m.group("head")), len(m.group("gap"))) for line in lines if (m := _WRAPPED_BORDER.match(line))}
    count = sum(1 for line in lines if _WRAPPED_BORDER.match(line))
    if len(gaps) != 1 or count < 2:
        return lines
    [(column, width)] = gaps
    return [line[:column] + line[column + width:]
            if len(line) > column + width and not line[column:column + width].strip() else line for line in lines]


def sniff(text: str) -> int:
    """95 for the whole table (banner and ``Memory-Usage``); 80 for its GPU table without the banner; 70 for
    its GPU rows without a header."""
    if "Memory-Usage" in text and _VERSIONS.search(text):
        return 95
    lines = text.splitlines()
    if "Memory-Usage" in text and _labelled_header(lines) is not None:
        return 80
    return 70 if _data_block(lines) is not None else 0


def _row(line: str) -> list[str] | None:
    """The cells of a ``|``-bounded table row, or ``None`` for any other line."""
    stripped = line.strip()
    return _cells(stripped) if stripped.startswith("|") and len(stripped) > 1 else None


def _labelled_header(lines: list[str]) -> tuple[int, bool] | None:
    """Where the GPU table's header starts in a text without its banner, and whether its first row is there: the
    ``Fan  Temp | Memory-Usage`` row with the ``|===`` rule within the header's next rows."""
    for i, line in enumerate(lines):
        cells = _row(line) if "Memory-Usage" in line else None
        if not cells or len(cells) < 2 or not _FAN_LABEL.match(cells[0]) or cells[1] != "Memory-Usage":
            continue
        if any(_RULE.match(lines[j].strip()) for j in range(i + 1, min(i + 4, len(lines)))):
            first = _row(lines[i - 1]) if i else None
            has_first = bool(first and len(first) > 1 and _GPU_LABEL.match(first[0]) and "Bus-Id" in first[1])
            return (i - 1, True) if has_first else (i, False)
    return None


def _data_block(lines: list[str]) -> int | None:
    """The first line of a GPU block pasted without any header: an index-and-name cell beside a bus id, over a
    row with a ``used / total`` memory cell."""
    for i in range(len(lines) - 1):
        cells = _row(lines[i])
        if cells and len(cells) > 1 and _INDEX_CELL.match(cells[0]) and _BUS_CELL.match(cells[1]):
            below = _row(lines[i + 1])
            if below and len(below) > 1 and _MEMORY_CELL.fullmatch(below[1]):
                return i
    return None


@parser(KIND, sniff=sniff, title="nvidia-smi (the default table)")
def parse(text: str) -> NvidiaSmiRecord:
    """Parse the default ``nvidia-smi`` table, with its MIG and process boxes when present."""
    lines = _unwrap([line.rstrip() for line in prepare(KIND, text)])
    top = next((i for i, line in enumerate(lines) if _VERSIONS.search(line)), None)
    if top is None:
        return _fragment(lines)
    versions = _VERSIONS.search(lines[top])
    assert versions is not None
    header, first_data = _header(lines, top)
    gpus = [_gpu(header, block) for block in _blocks(lines, first_data, len(header))]
    incomplete = [] if gpus else [_no_rows(lines, first_data)]
    _add_mig_devices(lines, gpus)
    _add_processes(lines, gpus)
    stamp = next((line.strip() for line in lines[:top] if line.strip() and not line.startswith(("$", "+"))), None)
    return NvidiaSmiRecord(format="table", driver_version=versions.group("driver"),
                           cuda_version=versions.group("cuda"), attached_gpus=len(gpus), timestamp=stamp,
                           gpus=gpus, failures=failures_in(lines) + _errors(header, lines, first_data),
                           incomplete=incomplete)


def _no_rows(lines: list[str], first_data: int) -> str:
    """Why a table with its banner and header has no GPU row: nvidia-smi never prints that header without one
    (with no GPU it prints ``No devices were found`` instead), so the output stopped there: cut, or nvidia-smi
    died, which the shell then says on the next line (``Segmentation fault (core dumped)``)."""
    after = next((line.strip() for line in lines[first_data:] if line.strip()), "")
    said = f": {after[:120]!r} follows" if after and not after.startswith(("|", "+")) else ""
    return f"the GPU table ends after its header (line {first_data}), no GPU row{said}"


def _fragment(lines: list[str]) -> NvidiaSmiRecord:
    """The GPU table without the banner: judged on the GPUs it shows (no driver, no GPU count assumed).

    A paste that starts at the header's second row (``Fan  Temp ...``) lost the first, and one that
    starts at a GPU's rows lost them all: nvidia-smi prints the same labels in every layout (the GPU and
    its name, bus id, uncorrected ECC; power, memory, utilisation; MIG mode), so they are read back
    from the shape of the first data row, whose name cell ends with the mode the first row names.
    """
    headed = _labelled_header(lines)
    lost = 0 if headed is None or headed[1] else 1
    if headed is not None:
        header, first_data = _header(lines, headed[0] - 1)
    elif (found := _data_block(lines)) is not None:
        first_data, lost = found, len(_STANDARD_HEADER)
        height = next((i for i in range(first_data, len(lines)) if not lines[i].strip().startswith("|")), len(lines))
        header = [list(row) for row in _STANDARD_HEADER[1:max(2, min(3, height - first_data))]]
    else:
        raise ParseError(KIND, "no 'NVIDIA-SMI ... Driver Version' (or 'KMD Version') line")
    if lost:
        first = _cells(lines[first_data]) if first_data < len(lines) else []
        mode = _MODE_LABEL.get(first[0].rsplit(None, 1)[-1], "") if first and first[0] else ""
        header.insert(0, [f"{_STANDARD_HEADER[0][0]}  {mode}".rstrip(), *_STANDARD_HEADER[0][1:]])
    gpus = [_gpu(header, block) for block in _blocks(lines, first_data, len(header))]
    if not gpus:
        raise ParseError(KIND, "the GPU table has no rows", first_data + 1)
    _add_mig_devices(lines, gpus)
    _add_processes(lines, gpus)
    return NvidiaSmiRecord(format="table", gpus=gpus, failures=failures_in(lines) + _errors(header, lines, first_data),
                           fragment=len(gpus))


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _header(lines: list[str], top: int) -> tuple[list[list[str]], int]:
    """Header rows (cells per row) of the GPU table and the index of its first data line."""
    rows: list[list[str]] = []
    for i in range(top + 1, len(lines)):
        line = lines[i].strip()
        if line.startswith("|=") or (line.startswith("|") and set(line) <= {"|", "=", "+"}):
            if not rows:
                break
            return rows, i + 1
        if line.startswith("|") and not set(line) <= {"|", "-", "+"}:
            rows.append(_cells(line))
    raise ParseError(KIND, "GPU table header not terminated by a '|====' rule", top + 1)


def _blocks(lines: list[str], start: int, height: int) -> list[tuple[int, list[list[str]]]]:
    """Data rows grouped per GPU (``height`` rows each) until the table's end."""
    blocks: list[tuple[int, list[list[str]]]] = []
    current: list[list[str]] = []
    begin = start
    for i in range(start, len(lines)):
        line = lines[i].strip()
        if _BORDER.match(line) or not line:
            if current:
                blocks.append((begin, current))
                current = []
            if not line or (i + 1 < len(lines) and not lines[i + 1].strip().startswith("|")):
                break
            begin = i + 1
            continue
        if not line.startswith("|"):
            break
        current.append(_cells(line))
        if len(current) > height:
            raise ParseError(KIND, f"a GPU block has more than the {height} rows of the header", i + 1)
    if current:
        blocks.append((begin, current))
    return blocks


def _errors(header: list[list[str]], lines: list[str], first_data: int) -> list[SmiFailure]:
    """An ``unreadable_reading`` failure for every ``ERR!`` cell of the GPU table, named by its column."""
    out: list[SmiFailure] = []
    for begin, rows in _blocks(lines, first_data, len(header)):
        bus = None
        for r, labels in enumerate(header):
            for c, label in enumerate(labels):
                cell = rows[r][c] if r < len(rows) and c < len(rows[r]) else ""
                bus = bus or (m.group(1) if "Bus-Id" in label and (m := _BUS.search(cell)) else None)
        for r, row in enumerate(rows):
            for c, cell in enumerate(row):
                if ERR in cell:
                    label = header[r][c] if r < len(header) and c < len(header[r]) else "?"
                    out.append(SmiFailure("unreadable_reading", f"{ERR} in the '{label}' cell: {cell}", bus,
                                          begin + r + 1))
    return out


def _gpu(header: list[list[str]], block: tuple[int, list[list[str]]]) -> SmiGpu:
    begin, rows = block
    gpu = SmiGpu()
    for r, labels in enumerate(header):
        for c, label in enumerate(labels):
            cell = rows[r][c] if r < len(rows) and c < len(rows[r]) else ""
            for key, reader in _READERS:
                if key in label:
                    reader(gpu, label, cell)
    if gpu.index is None:
        raise ParseError(KIND, "GPU row without an index", begin + 1)
    return gpu


def _name(gpu: SmiGpu, label: str, cell: str) -> None:
    m = re.match(r"^(\d+)\s+(.*)$", cell)
    if m is None:
        return
    gpu.index = int(m.group(1))
    rest = m.group(2).strip()
    if any(k in label for k in ("Persistence-M", "Driver-Model", "TCC/WDDM")):
        rest, _, mode = rest.rpartition(" ")
        if "Persistence-M" in label:
            gpu.persistence_mode = to_bool(mode)
    gpu.name = as_string(rest.strip()) or None


def _bus(gpu: SmiGpu, label: str, cell: str) -> None:
    if m := _BUS.search(cell):
        gpu.pci_bus_id = m.group(1)


def _ecc(gpu: SmiGpu, label: str, cell: str) -> None:
    gpu.ecc_volatile_uncorrected = to_int(cell) if cell.isdigit() else None
    if cell in ("On", "Off"):  # MIG mode prints the ECC mode here instead of a count
        gpu.ecc_mode = cell == "On"


def _power_row(gpu: SmiGpu, label: str, cell: str) -> None:
    tokens = cell.split()
    if tokens and "Fan" in label:
        gpu.fan_speed_percent = to_int(tokens[0]) if tokens[0].endswith("%") else None
    if m := re.search(r"(-?\d+)C\b", cell):
        gpu.temperature_c = int(m.group(1))
    if m := re.search(r"\b(P\d+)\b", cell):
        gpu.performance_state = m.group(1)
    if m := _POWER.search(cell):
        gpu.power_draw_w = float(m.group(1)) if m.group(1).isdigit() else None
        gpu.power_limit_w = float(m.group(2)) if m.group(2).isdigit() else None


def _memory(gpu: SmiGpu, label: str, cell: str) -> None:
    if m := _MEMORY.search(cell):
        gpu.memory_used_mib, gpu.memory_total_mib = int(m.group(1)), int(m.group(2))


def _util(gpu: SmiGpu, label: str, cell: str) -> None:
    tokens = cell.split()
    if tokens:
        gpu.utilization_gpu_percent = to_int(tokens[0]) if tokens[0].endswith("%") else None
    if len(tokens) > 1 and "Compute M" in label:
        gpu.compute_mode = as_compute_mode(tokens[-1].replace(".", "_"))


def _mig(gpu: SmiGpu, label: str, cell: str) -> None:
    gpu.mig_mode = as_mode(cell)


_READERS: tuple[tuple[str, Callable[[SmiGpu, str, str], None]], ...] = (
    ("Name", _name), ("Bus-Id", _bus), ("Uncorr. ECC", _ecc), ("Pwr:Usage/Cap", _power_row),
    ("Memory-Usage", _memory), ("GPU-Util", _util), ("MIG M.", _mig),
)


def _section(lines: list[str], title: str) -> list[str]:
    """Data rows of a titled box (``MIG devices:``, ``Processes:``) after its ``|===`` rule."""
    start = next((i for i, line in enumerate(lines) if title in line), None)
    if start is None:
        return []
    rows = []
    seen_rule = False
    for line in lines[start + 1:]:
        text = line.strip()
        if not seen_rule:
            seen_rule = text.startswith("|=")
            continue
        if not text or not (text.startswith("|") or text.startswith("+")):
            break
        rows.append(text)
    return rows


def _add_mig_devices(lines: list[str], gpus: list[SmiGpu]) -> None:
    by_index = {g.index: g for g in gpus}
    for g in gpus:
        if g.mig_mode == "enabled":
            g.mig_devices = 0
    for row in _section(lines, "MIG devices:"):
        if (m := _MIG_ROW.match(row)) and (gpu := by_index.get(int(m.group(1)))) is not None:
            gpu.mig_devices = (gpu.mig_devices or 0) + 1


def _add_processes(lines: list[str], gpus: list[SmiGpu]) -> None:
    title = next((t for t in _PROCESS_TITLES if any(t in line for line in lines)), None)
    if title is None:
        return
    by_index = {g.index: g for g in gpus}
    for g in gpus:
        g.processes = []
    for row in _section(lines, title):
        if (cells := _cells(row)) and (m := re.match(r"(\d+)\s+Not Supported$", cells[0])) \
                and (gpu := by_index.get(int(m.group(1)))) is not None:
            gpu.processes = None
            continue
        m = _PROCESS.match(row)
        if m is None or (gpu := by_index.get(int(m.group("gpu")))) is None or gpu.processes is None:
            continue
        gpu.processes.append(SmiProcess(pid=int(m.group("pid")), name=m.group("name").strip() or None,
                                        type=m.group("type") or "C", used_memory_mib=to_int(m.group("mem"))))
