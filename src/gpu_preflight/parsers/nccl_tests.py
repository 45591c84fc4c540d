"""nccl-tests (``all_reduce_perf``, ``all_gather_perf``...): the result table and its verdicts.

Columns are located by the header names (``size count type redop root time algbw busbw
#wrong`` twice: out-of-place, then in-place), so these layouts all read the same:
the legacy one without ``root`` and with a float ``error`` column; ``#wrong`` counts (``N/A``
in-place for sendrecv); 2.17's ``# nccl-tests version`` line; 2.18's ``unalign`` and
two-decimal times. Every line may carry a launcher prefix — ``0: `` (``srun --label``) or
``[1,0]<stdout>:`` (Open MPI ``--tag-output``) — which is stripped first; preambles
(kubectl, mpirun, markdown) and elisions are skipped.

Derived values: ``peak_busbw_gbps`` is the maximum out-of-place bus bandwidth (not the
last row: it can peak earlier), ``avg_busbw_gbps`` the tool's own ``Avg bus bandwidth``
line when printed (``avg_busbw_source="reported"``), else the mean of the rows shown.
``nranks`` comes from the ``# Using devices`` rank lines; without them it is inferred
from busbw/algbw for the collectives whose factor depends on it, and flagged.

Completeness: every nccl-tests run that finishes prints ``# Out of bounds values : N
OK|FAILED`` (the verdict over *all* sizes, ``#`` omitted by old versions) and then ``#
Avg bus bandwidth``. A table without that line was cut (or the run died) before the
end, so the record lists it in ``incomplete``; so does a result cell that is neither a
number nor ``N/A`` (a damaged ``#wrong`` must not read as "no count").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .detect import parser
from .errors import ParseError
from .text import is_noise, is_not_available, prepare, to_float

KIND = "nccl-tests"

_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<(?:stdout|stderr)>:|\s{0,4}\d+:\s)")
_HEADER = re.compile(r"^#\s+size\s+count\b")
_RANK = re.compile(r"^#\s*Rank\s+(?P<rank>\d+)\s+Group\s+\d+\s+Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)\s+device\s+"
                   r"(?P<device>\d+)\s+\[(?P<pci>[^\]]+)\]\s*(?P<name>.*)$")
_TEST_NAME = re.compile(r"\b(?P<name>[a-z_]+_perf)\b")
_NCCL_VERSION = re.compile(r"NCCL version\s+(?P<v>[\d.]+(?:\+\S+)?)")
_LIBRARY = re.compile(r"nccl-library=(?P<code>\d+)")
_TESTS_VERSION = re.compile(r"#\s*nccl-tests version\s+(?P<v>\S+)")
_AVG = re.compile(r"\s*#?\s*Avg bus bandwidth\s*:\s*(?P<v>\S+)")
_OOB = re.compile(r"\s*#?\s*Out of bounds values\s*:\s*(?P<n>\d+)\s*(?P<verdict>\w+)?")
_FAILURE = re.compile(r"(?:(?<![\w.-])(?P<host>[\w.-]+):\s*)?Test (?P<what>NCCL|CUDA) failure "
                      r"(?P<file>[\w./-]+):(?P<line>\d+)\s*'?(?P<message>[^']*)'?")
# busbw = algbw * factor(n): invert it where the factor depends on the rank count.
_FACTORS = {"all_reduce": "2(n-1)/n", "all_gather": "(n-1)/n", "reduce_scatter": "(n-1)/n", "alltoall": "(n-1)/n"}


@dataclass
class PlacementResult:
    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    wrong: int | None
    error: float | None = None


@dataclass
class NcclTestRow:
    """One message size: out-of-place figures at the top level, in-place under ``in_place``."""

    size_bytes: int
    count: int | None
    type: str | None
    redop: str | None
    root: int | None
    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    wrong: int | None
    error: float | None = None
    in_place: PlacementResult | None = None


@dataclass
class NcclTestFailure:
    host: str | None
    kind: str
    file: str
    line: int
    message: str


@dataclass
class NcclTestDevice:
    """One ``# Using devices`` line: which GPU (by its CUDA name) a rank ran on, and where."""

    rank: int
    host: str
    name: str


@dataclass
class NcclTestsRecord:
    test: str | None = None
    nranks: int | None = None
    nranks_inferred: bool = False
    hosts: list[str] = field(default_factory=list)
    nccl_version: str | None = None
    nccl_tests_version: str | None = None
    rows: list[NcclTestRow] = field(default_factory=list)
    avg_busbw_gbps: float | None = None
    avg_busbw_source: str | None = None
    peak_busbw_gbps: float | None = None
    peak_size_bytes: int | None = None
    peak_busbw_in_place_gbps: float | None = None
    wrong_total: int | None = None
    max_error: float | None = None
    out_of_bounds: int | None = None
    errors: list[NcclTestFailure] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    gpus: list[NcclTestDevice] = field(default_factory=list)


def sniff(text: str) -> int:
    clean = "\n".join(_PREFIX.sub("", line) for line in text.splitlines()[:400])
    if re.search(r"^#\s+size\s+count\s+type\b", clean, re.MULTILINE):
        return 95
    if re.search(r"Test (?:NCCL|CUDA) failure \S+:\d+", clean) or "# Collective test starting" in clean:
        return 90
    return 0


@parser(KIND, sniff=sniff, title="nccl-tests (*_perf) output, any version, with or without rank prefixes")
def parse(text: str) -> NcclTestsRecord:
    """Parse nccl-tests output: the perf table, the trailer and ``Test ... failure`` lines."""
    record = NcclTestsRecord()
    columns: list[str] | None = None
    ranks: dict[int, str] = {}
    for number, raw in enumerate(prepare(KIND, text), 1):
        line = _PREFIX.sub("", raw, count=1).rstrip()
        if not line.strip() or is_noise(line):
            continue
        if m := _FAILURE.search(line):
            record.errors.append(NcclTestFailure(m.group("host"), m.group("what"), m.group("file"),
                                                 int(m.group("line")), m.group("message").strip()))
            continue
        if line.lstrip().startswith("#") or not line.lstrip()[:1].isdigit():
            columns = _header_line(record, ranks, line, columns)
            if record.test is None and (m := _TEST_NAME.search(line)):
                record.test = m.group("name").removesuffix("_perf")
            continue
        if columns is None:
            continue  # numbers before the table (a pasted pod listing, a command's output)
        record.rows.append(_row(columns, line, number, record.incomplete))
    if not record.rows and not record.errors:
        raise ParseError(KIND, "no nccl-tests result row and no 'Test ... failure' line")
    if record.rows and record.out_of_bounds is None and not record.errors:
        record.incomplete.append("no 'Out of bounds values' summary line: the output ends before the run finished")
    if ranks:
        record.nranks = max(ranks) + 1
        record.hosts = sorted(set(ranks.values()))
    _summarise(record)
    return record


def _header_line(record: NcclTestsRecord, ranks: dict[int, str], line: str,
                 columns: list[str] | None) -> list[str] | None:
    if _HEADER.match(line):
        return [t for t in line.lstrip("#").split()]
    if m := _RANK.match(line):
        ranks[int(m.group("rank"))] = m.group("host")
        if m.group("name").strip():
            record.gpus.append(NcclTestDevice(int(m.group("rank")), m.group("host"), m.group("name").strip()))
    elif m := _AVG.match(line):
        record.avg_busbw_gbps = to_float(m.group("v"))
        record.avg_busbw_source = "reported" if record.avg_busbw_gbps is not None else None
    elif m := _OOB.match(line):
        record.out_of_bounds = int(m.group("n"))
    elif m := _TESTS_VERSION.match(line):
        record.nccl_tests_version = m.group("v")
        if lib := _LIBRARY.search(line):
            record.nccl_version = record.nccl_version or _version_from_code(int(lib.group("code")))
    elif m := _NCCL_VERSION.search(line):
        record.nccl_version = m.group("v")
    return columns


def _version_from_code(code: int) -> str:
    """NCCL_VERSION_CODE → dotted version (2.9+ encode major*10000 + minor*100 + patch)."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def _row(columns: list[str], line: str, number: int, problems: list[str]) -> NcclTestRow:
    values = line.split()
    if len(values) != len(columns):
        raise ParseError(KIND, f"{len(values)} values where the header names {len(columns)} columns", number)
    first: dict[str, str] = {}
    second: dict[str, str] = {}
    for name, value in zip(columns, values, strict=True):
        key = name.lower().lstrip("#")
        (second if key in first else first)[key] = value
    size = _int(first.get("size"))
    if size is None:
        raise ParseError(KIND, f"size {first.get('size')!r} is not a byte count", number)
    for key, value in [*first.items(), *(("in-place " + k, v) for k, v in second.items())]:
        name = key.removeprefix("in-place ")
        if name in _NUMERIC and not is_not_available(value) and _NUMERIC[name](value) is None:
            problems.append(f"unreadable {key} value {value!r} (line {number})")
    out = _placement(first)
    return NcclTestRow(
        size_bytes=size, count=_int(first.get("count")), type=first.get("type"), redop=first.get("redop"),
        root=_int(first.get("root")), time_us=out.time_us, algbw_gbps=out.algbw_gbps, busbw_gbps=out.busbw_gbps,
        wrong=out.wrong, error=out.error, in_place=_placement(second) if second else None,
    )


def _placement(values: dict[str, str]) -> PlacementResult:
    return PlacementResult(time_us=to_float(values.get("time")), algbw_gbps=to_float(values.get("algbw")),
                           busbw_gbps=to_float(values.get("busbw")), wrong=_int(values.get("wrong")),
                           error=to_float(values.get("error")))


def _number(value: str) -> float | None:
    return to_float(value) if re.fullmatch(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", value) else None


def _int(value: str | None) -> int | None:
    if value is None or not re.fullmatch(r"-?\d+", value):
        return None
    return int(value)


_NUMERIC: dict[str, Callable[[str], float | int | None]] = {
    "time": _number, "algbw": _number, "busbw": _number, "error": _number, "wrong": _int}


def _summarise(record: NcclTestsRecord) -> None:
    rows = record.rows
    busbw = [(r.busbw_gbps, r.size_bytes) for r in rows if r.busbw_gbps is not None]
    if busbw:
        record.peak_busbw_gbps, record.peak_size_bytes = max(busbw, key=lambda b: (b[0], -b[1]))
    in_place = [r.in_place.busbw_gbps for r in rows if r.in_place and r.in_place.busbw_gbps is not None]
    record.peak_busbw_in_place_gbps = max(in_place) if in_place else None
    if record.avg_busbw_gbps is None:
        values = [b for b, _ in busbw] + in_place
        if values:
            record.avg_busbw_gbps = round(sum(values) / len(values), 4)
            record.avg_busbw_source = "computed"
    wrongs = [w for r in rows for w in (r.wrong, r.in_place.wrong if r.in_place else None) if w is not None]
    record.wrong_total = sum(wrongs) if wrongs else None
    errors = [e for r in rows for e in (r.error, r.in_place.error if r.in_place else None) if e is not None]
    record.max_error = max(errors) if errors else None
    if record.nranks is None:
        record.nranks = _infer_ranks(record)
        record.nranks_inferred = record.nranks is not None


def _infer_ranks(record: NcclTestsRecord) -> int | None:
    """Ranks from busbw/algbw of the largest row (most digits), for collectives whose factor depends on n."""
    factor = _FACTORS.get(record.test or "all_reduce")  # an unnamed table is most often all_reduce: flagged
    best = max((r for r in record.rows if r.algbw_gbps and r.busbw_gbps), key=lambda r: r.size_bytes, default=None)
    if factor is None or best is None or best.algbw_gbps is None or best.busbw_gbps is None:
        return None
    ratio = best.busbw_gbps / best.algbw_gbps
    denominator = (2 - ratio) if factor.startswith("2") else (1 - ratio)
    if denominator <= 0.001:
        return None
    n = round((2 if factor.startswith("2") else 1) / denominator)
    return n if n >= 2 else None
