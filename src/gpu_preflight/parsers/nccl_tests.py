"""nccl-tests (``all_reduce_perf``, ``all_gather_perf``...): the result table and its verdicts.

Columns are located by the header names (``size count type redop root time algbw busbw
#wrong`` twice: out-of-place, then in-place), so these layouts all read the same:
the legacy one without ``root`` and with a float ``error`` column; ``#wrong`` counts (``N/A``
in-place for sendrecv); 2.17's ``# nccl-tests version`` line; 2.18's ``unalign`` and
two-decimal times. Every line may carry a launcher prefix — ``0: `` (``srun --label``) or
``[1,0]<stdout>:`` (Open MPI ``--tag-output``) — which is stripped first; preambles
(kubectl, mpirun, markdown) and elisions are skipped. A paste that starts below the column header (the tail of
a run quoted with its summary) is read by its rows' own cells (``_HEADERLESS``). rccl-tests' ``--output_file``
JSON records (one per size and placement) are read as rows too; they carry no end-of-run line, so such a file is
always listed incomplete (a run that died between sizes reads the same as one that finished). nccl-tests' own ``-J``
report (2.17.3+, one JSON document) is read like its stdout: devices, results, summary (``_JSON_REPORT``).

Derived values: ``peak_busbw_gbps`` is the maximum out-of-place bus bandwidth (not the
last row: it can peak earlier), ``avg_busbw_gbps`` the tool's own ``Avg bus bandwidth``
line when printed (``avg_busbw_source="reported"``), else the mean of the rows shown.
``nranks`` comes from the ``# Using devices`` rank lines; without them it is inferred
from busbw/algbw for the collectives whose factor depends on it, and flagged.

Completeness: every nccl-tests run that finishes prints ``# Out of bounds values : N
OK|FAILED`` (the verdict over *all* sizes, ``#`` omitted by old versions) and then ``#
Avg bus bandwidth``. A table without that line was cut (or the run died) before the
end, so the record lists it in ``incomplete``; so does a result cell that is neither a
number nor ``N/A`` (a damaged ``#wrong`` must not read as "no count"). A log of several runs
(a soak loop appending to one file) is judged over all of them: ``#wrong`` and out-of-bounds
counts add up, and rows after the last summary line mean the last run was cut. A paste of the summary
alone (the line that said ``FAILED``) is judged on it and listed as incomplete.

Failure lines: ``host: Test NCCL|CUDA failure file:line 'error'`` and, before nccl-tests' 2019 resync with
NCCL 2.4, the same without host and "Test" (``NCCL failure common.cu:874 'unhandled system error'``).
The test's line names what NCCL returned to it ('unhandled cuda error'), not why: with ``NCCL_DEBUG=WARN`` or
``INFO`` the cause is an ``NCCL WARN`` line above it (``NET/IB : Got completion with error 12`` before the
'unhandled cuda error' of nccl-tests#24). Those whose job-log signature (:func:`.nccl_log.classify`) names a
failure are kept in ``warn_causes``, grouped by (signature, host) like the failure lines; the judge reads them
only for a run that stopped (see ``checks/evidence_nccl.py``).

Streaming: a log of many runs, or with ``NCCL_DEBUG=INFO`` lines between them, can be
gigabytes. :class:`NcclTestsScanner` reads it line by line; the derived values above are
kept up to date as rows arrive, ``rows`` keeps the first and last :data:`KEPT_ROWS` rows
(``rows_total`` counts them all), ``busbw_by_size`` the best out-of-place busbw per message
size and ``wrong_sizes`` the sizes of rows with wrong values, so the judge needs no other row;
``gpus`` lists each (rank, host, GPU) once, however many runs repeat it. ``Test ... failure``
lines are counted the same way: ``errors_total`` all of them, ``failure_groups`` by signature
and host (each with its exact count and first lines), ``errors`` the first and last
:data:`~gpu_preflight.records.nccl.KEPT_FAILURES` (``errors_omitted`` the rest), so an aborted
job's log of one failure per rank and iteration keeps memory flat. :func:`scan` is the
fast form of :meth:`NcclTestsScanner.feed` on every line (``tests/test_nccl_tests_fast_path.py``
holds them equal): INFO lines that cannot matter are dropped by one list comprehension per
chunk, rows are matched a window at a time and counted by column.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache, reduce
from itertools import chain, compress, islice, repeat
from operator import add, eq, gt, itemgetter, methodcaller, not_, or_
from typing import TypeVar, cast

import msgspec

from ..records.nccl import (
    FAILURE_EXAMPLES,
    FAILURE_MESSAGE_CHARS,
    KEPT_FAILURES,
    MAX_FAILURE_GROUPS,
    NcclFailureGroup,
)
from ..records.nccl import NcclTestDevice as NcclTestDevice
from ..records.nccl import NcclTestFailure as NcclTestFailure
from ..records.nccl import NcclTestRow as NcclTestRow
from ..records.nccl import NcclTestsRecord as NcclTestsRecord
from ..records.nccl import PlacementResult as PlacementResult
from .detect import parser
from .errors import ParseError
from .nccl_log import UNCLASSIFIED_WARN, classify
from .text import ContentGate, is_noise, is_not_available, to_float

_N = TypeVar("_N", int, float)

KIND = "nccl-tests"
KEPT_ROWS = 500  # the first and the last this many rows are kept in ``rows``
MAX_SIZES = 65_536  # distinct message sizes remembered in busbw_by_size / wrong_sizes
MAX_PROBLEMS = 100  # ``incomplete`` entries listed; more are counted in one last entry

_Failure = tuple[str | None, str, str, int, str, str | None]  # NcclTestFailure's fields, built when listed
_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<(?:stdout|stderr)>:|\s{0,4}\d+:\s)")
_GROUPS = methodcaller("groups")
_WINDOW = 1024  # lines matched at once against a header's row regex
_REPEATS = 4096  # distinct lines remembered by NcclTestsScanner._repeatable, messages and failure lines by _failure
_REMEMBERED = 2 * FAILURE_MESSAGE_CHARS  # longer lines are not remembered: 4096 of up to 16 MiB would not be flat
_ACTIVE = ("Out of bounds", "size", "bytes", "Rank", "Avg", "nccl-tests", "NCCL version", "_perf", "failure",
           "Test timeout", "NCCL WARN")  # see feed
_PREFIX_STARTS = frozenset("[ \t0123456789")
# '#' lost when a paste went through markdown; "size time algbw busbw" where an author abridged the table to the
# columns that matter (the cells are read by their header's names, so the row is read the same)
_HEADER = re.compile(r"^#?\s*size\s+(?:count\s+type|time\s+algbw\s+busbw)\b")
# nccl-tests 1.0 (2018, each test's src/*.cu): "# bytes N type op time algbw busbw res ...", time in ms and "res" the
# largest deviation (%7.0le), read under today's names (the time kept apart: it is not microseconds)
_V1_HEADER = re.compile(r"^#?\s*bytes\s+N\s+type\b")
_V1_NAMES = {"bytes": "size", "N": "count", "op": "redop", "res": "error", "time": "time(ms)"}
# The host is every word between "on" and "device": nccl-tests prints the hostname, but a paste that hides it
# often writes words ("on NODE A device 0", nccl-tests#347), which are still one host.
_HOST = r"(?P<host>\S++(?:[ \t]++\S++)*?)"
# nccl-tests before 2.0 (v1.0.0, 2018) printed no Pid: "#   Rank  0 on dgx1 device  0 [0x06] Tesla V100-SXM2-16GB".
_RANK = re.compile(r"^#?\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?(?:Pid\s+(?P<pid>\d+)\s+)?on\s+" + _HOST + r"\s+"
                   r"device\s+(?P<device>\d+)\s+\[(?P<pci>[^\]]+)\]\s*(?P<name>.*)$")
# The parameter line every nccl-tests version prints first, and a rank's device line found anywhere in a line
# (after a launcher's prefix too): what only nccl-tests prints, before any table (see sniff).
_PARAMS = re.compile(r"\bnThread\s+\d+\s+nGpus\s+\d+\s+minBytes\s+\d+")
_RANK_ANYWHERE = re.compile(r"(?:^|[:#\s])Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+\S++(?:[ \t]++\S++)*?\s+"
                            r"device\s+\d+\s+\[",
                            re.MULTILINE)
_TEST_NAME = re.compile(r"\b(?P<name>[a-z_]+_perf)\b")
_NCCL_VERSION = re.compile(r"NCCL version\s+(?P<v>[\d.]+(?:\+\S+)?)")
_LIBRARY = re.compile(r"nccl-library=(?P<code>\d+)")
_TESTS_VERSION = re.compile(r"#\s*nccl-tests version\s+(?P<v>\S+)")
_AVG = re.compile(r"\s*#?\s*Avg bus bandwidth\s*:\s*(?P<v>\S+)(?:\s+(?P<verdict>OK|FAILED))?")
_OOB = re.compile(r"\s*#?\s*Out of bounds values\s*:\s*(?P<n>\d+)\s*(?P<verdict>\w+)?")
_FAILURE = re.compile(r"(?:(?<![\w.-])(?P<host>[\w.-]+):\s*)?Test (?P<what>NCCL|CUDA) failure "
                      r"(?P<file>[\w./-]+):(?P<line>\d+)\s*'?(?P<message>[^']*)'?")
# nccl-tests' two other abort lines (src/common.h, common.cu): TESTCHECK's relay of a failed step up the stack
# (" .. host pid 123: Test failure common.cu:401", printed after the NCCL or CUDA failure that caused it, alone
# when that line was lost) and its own watchdog ("host: Test timeout (600s) common.cu:523": a collective that
# made no progress).
# nccl-tests before its 2019 resync with NCCL 2.4 (common.h's NCCLCHECK / CUDACHECK) printed the same failure with
# neither host nor "Test": "NCCL failure common.cu:874 'unhandled system error'", "Cuda failure common.cu:90 '...'".
_OLD_FAILURE = re.compile(r"(?<![\w'])(?P<what>NCCL|Cuda) failure (?P<file>[\w./-]+\.(?:cu|cc|c|h)):(?P<line>\d+)\s*"
                          r"'(?P<message>[^']*)'")
# (" .. host: Test failure common.cu:401" without the pid through 2.10, common.h:57)
_RELAY = re.compile(r"\.\. (?P<host>[\w.-]+)(?: pid \d+)?: Test failure (?P<file>[\w./-]+):(?P<line>\d+)")
_TIMEOUT = re.compile(r"(?:(?<![\w.-])(?P<host>[\w.-]+):\s*)?Test timeout \((?P<secs>\d+)s\) "
                      r"(?P<file>[\w./-]+):(?P<line>\d+)")
# NCCL's own warning (debug.cc): "host:pid:tid [dev] file.cc:N NCCL WARN message", the file omitted by some
# builds, whatever a launcher or a console put before it.
_WARN = re.compile(r"(?:(?<![\w.-])(?P<host>[\w.-]+):\d+:\d+ \[\d+\] )?(?:(?P<file>[\w/.-]+\.(?:c|cc|cpp|cu|h)):"
                   r"(?P<line>\d+) )?NCCL WARN (?P<message>.*)")
_NOT_A_CAUSE = frozenset({UNCLASSIFIED_WARN, "net_plugin_fallback"})  # a WARN naming no failure; a fact, not one
# Its refusals to run (common.cu's argument checks): an NCCL other than the one it was built for, sizes it cannot
# step through, an option the NCCL it runs on lacks or another option excludes, more GPUs than the node has
# (util.cu's "Invalid number of GPUs", 2.17.3+; rccl-tests' "[ERROR] The number of requested GPUs"), a device
# implementation the test lacks (2.17.4+). Nothing was measured.
_REFUSAL = re.compile(r"nccl-tests was compiled with NCCL"
                      r"|Invalid number of GPUs: \d+ requested but only \d+ were found"
                      r"|The number of requested GPUs \(\d+\) is greater than the number of GPUs available"
                      r"|Device implementation \d+ is not supported by this test"
                      r"|invalid sizes? (?:specified )?for '(?:minbytes|maxbytes|stepBytes)'"
                      r"|\(-[A-Za-z](?: [^)]*)?\) (?:requires|must be|only supports|is incompatible)"
                      r"(?!.*(?:Disabling\.|Using default value))"  # 2.19's warnings that go on with the option off
                      r"|Option -[A-Za-z] \([^)]*\) requires")
# busbw = algbw * factor(n): invert it where the factor depends on the rank count.
_FACTORS = {"all_reduce": "2(n-1)/n", "all_gather": "(n-1)/n", "reduce_scatter": "(n-1)/n", "alltoall": "(n-1)/n"}
# rccl-tests' --output_file (ROCm/rccl-tests#93, json the default format): one object per line for each size and
# placement, {"#wrong":"0","algBw":0.053,"busBw":0.080,"gpus":4,"inPlace":0,"name":"AllReduce","redop":"sum",
# "size":1024,"time":19.18,"type":"float"}; other builds write "wrong" as a number and add "numCycle". Keys are
# written sorted, so a record is found by its keys, not their order.
_JSON_RECORD = re.compile(r'^\s*\{(?=.*"busBw"\s*:)(?=.*"algBw"\s*:)(?=.*"size"\s*:)', re.MULTILINE)
# nccl-tests' own report (-J/--output_file FILE.json, 2.17.3+, src/util.cu): one JSON document, written without
# blanks and closed only when the run ends: {"version":N,"start_time":..,"args":[..],"env":[..],"nccl_version":N,
# "config":{..,"devices":[{"rank","group","pid","hostname","device","device_hex","device_info"}]},"results":[{"size",
# "count","type","redop","root","out_of_place":{"time"|"cpu_time","alg_bw","bus_bw","nwrong"}|null,"in_place":{..},
# ..}],"out_of_bounds":{"count","okay"},"average_bus_bandwidth":{"bandwidth","okay"},"errors":[..],"end_time":..};
# 2.17.3-2.17.8 spell the average "average_bus_bandwidith":{"bandwidith":..}. A report that does not close is a
# run that died (or a file cut): its whole result objects are read (see _json_objects).
_JSON_REPORT = re.compile(r'\{\s*"version"\s*:\s*\d+\s*,\s*"start_time"\s*:')
_JSON_REPORT_LINE = re.compile(r'^[ \t]*(?=\{\s*"version"\s*:\s*\d+\s*,\s*"start_time"\s*:)', re.MULTILINE)
_JSON_RESULT = re.compile(r'"(?:out_of_place|in_place)"\s*:\s*\{\s*"(?:cpu_)?time"\s*:')
_JSON_COLLECTIVES = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
                     "alltoall": "alltoall", "alltoallv": "alltoallv", "broadcast": "broadcast", "reduce": "reduce",
                     "sendrecv": "sendrecv", "gather": "gather", "scatter": "scatter", "hypercube": "hypercube"}


def sniff(text: str) -> int:
    """The table header or a test failure anywhere in the head: with ``NCCL_DEBUG=INFO`` the table
    comes after hundreds of NCCL INFO lines, which alone would read as a job log (``nccl-log``).

    A run that never reached its table (hung in communicator setup, or a paste cut there) is
    still nccl-tests when it printed what only nccl-tests prints: its parameter line
    (``nThread 1 nGpus 4 minBytes 8 maxBytes ...``, every version since 2.0) or a rank's device
    line. Such a text is judged as an unfinished run (:meth:`NcclTestsScanner.finish`), and the
    ``NCCL WARN`` lines in it that name a failure say why it stopped (``warn_causes``, judged for a
    run that stopped), so one that names a failure stays nccl-tests too: its kind does not flip to
    ``nccl-log`` as a paste gains or loses the WARN line (nccl-tests#217's middle, cut above it)."""
    clean = "\n".join(_PREFIX.sub("", line) for line in text.splitlines()
                      if "size" in line or "failure" in line or "Collective test" in line or "Test timeout" in line
                      or "Out of bounds" in line)
    if any(_HEADER.match(line) for line in clean.splitlines()):
        return 95
    if re.search(r"Test (?:NCCL|CUDA) failure \S+:\d+", clean) or "# Collective test starting" in clean \
            or _RELAY.search(clean) or _TIMEOUT.search(clean) or _REFUSAL.search(text) or _OLD_FAILURE.search(clean):
        return 90
    if _PARAMS.search(text) or _RANK_ANYWHERE.search(text):
        return 90
    if _JSON_RECORD.search(text):
        return 85  # rccl-tests' JSON records (--output_file)
    if _JSON_REPORT.search(text) or _JSON_RESULT.search(text):
        return 85  # nccl-tests' JSON report (-J), or a piece of one
    # the summary alone (a paste of the one line that said FAILED): nccl-tests' verdict over every size it ran
    if re.search(r"^\s*#?\s*Out of bounds values\s*:\s*\d+\s+(?:OK|FAILED)\s*$", clean, re.MULTILINE):
        return 80
    return 0


class NcclTestsScanner:
    """Feed lines in order, then :meth:`finish`; see the module docstring."""

    def __init__(self) -> None:
        self.record = NcclTestsRecord()
        self.columns: list[str] | None = None
        self.layout: _Layout | None = None
        self.ranks: dict[int, str] = {}
        self.devices: set[tuple[int, str, str]] = set()  # (rank, host, name) already in record.gpus
        self.repeats: dict[str, tuple[int, str, str] | bool] = {}  # see _repeatable
        self.number = 0
        self.piece: tuple[list[str], int, int] | None = None  # see _line_number
        self.piece_numbers: list[int] | None = None
        self.head: list[NcclTestRow] = []
        self.tail: deque[NcclTestRow | tuple[_Layout, tuple[str, ...]]] = deque(maxlen=KEPT_ROWS)
        self.failure_head: list[NcclTestFailure] = []
        self.failure_tail: deque[_Failure] = deque(maxlen=KEPT_FAILURES)
        self.failure_groups: dict[tuple[str | None, str | None, bool], NcclFailureGroup] = {}
        self.signatures: dict[tuple[str, str], str | None] = {}  # (CUDA|NCCL, message) -> classify()'s kind
        self.failure_lines: dict[str, tuple[_Failure, NcclFailureGroup]] = {}  # see _failure
        self.causes: dict[tuple[str, str | None, bool], NcclFailureGroup] = {}  # see _warned
        self.warn_lines: dict[str, NcclFailureGroup | None] = {}  # a WARN line already read -> its group, if any
        self.problems: list[str] = []
        self.problem_count = 0
        self.rows_since_summary = 0
        self.busbw_sum = [0.0, 0.0]  # out-of-place, in-place: the computed average is over both
        self.busbw_n = 0
        self.largest_measured: tuple[int, float, float] | None = None  # size, algbw, busbw of the largest row
        self.cut_row: ParseError | None = None  # a row short of cells: the paste's cut, unless anything follows
        self.started = False  # the parameter line was read: the run started, table or not
        self.relayed: list[tuple[str, re.Match[str]]] = []  # TESTCHECK relays: a failure only when nothing else says
        self.refusals: list[str] = []  # its argument checks' answers (_REFUSAL)
        # rccl-tests' JSON records by (collective, size, type, redop, root): [out-of-place, in-place], in file order
        self.json_rows: dict[tuple[str, int, object, object, object], list[PlacementResult | None]] = {}
        self.json_ranks: int | None = None
        self.commanded: str | None = None  # the test a pasted command line ran (*_perf), used where none is printed

    def feed(self, raw: str) -> None:
        self.number += 1
        if _matters(raw):
            self._line(raw)

    def _line(self, raw: str) -> None:
        """One line that :func:`_matters` (see :meth:`feed`); its number, needed only to name a bad row,
        comes from :meth:`_line_number`."""
        if (seen := self.failure_lines.get(raw)) is not None:
            self._count_failure(*seen)
            return
        prefixed = ":" in raw[:24] and raw[:1] in _PREFIX_STARTS
        line = _PREFIX.sub("", raw, count=1).rstrip() if prefixed else raw.rstrip()
        stripped = line.lstrip()
        if not stripped or is_noise(line):
            # a pasted command line ('$ ./build/broadcast_perf -g 2', 'mpirun ... all_reduce_perf'): the binary it
            # ran names the collective where the output does not (nccl-tests before 2.14 prints no test name; see
            # finish)
            if self.commanded is None and "_perf" in line and (m := _TEST_NAME.search(line)):
                self.commanded = m.group("name").removesuffix("_perf")
            return
        if stripped[0] == "{" and _JSON_REPORT.match(stripped):
            self.json_report(stripped)  # a compact report pasted after (or without) the run's stdout
            return
        record = self.record
        if self.cut_row is not None and (stripped[0].isdigit() or "Out of bounds" in line or "bus bandwidth" in line):
            raise self.cut_row
        if "failure" in line and ("Test NCCL" in line or "Test CUDA" in line) and (m := _FAILURE.search(line)):
            self._failure(raw, *m.group("host", "what", "file", "line", "message"))
            return
        if "failure" in line and (m := _OLD_FAILURE.search(line)):
            self._failure(raw, None, m.group("what").upper(), *m.group("file", "line", "message"))
            return
        if "Test timeout" in line and (m := _TIMEOUT.search(line)):
            self._failure(raw, m.group("host"), "timeout", m.group("file"), m.group("line"),
                          f"no progress for {m.group('secs')} s (nccl-tests' own timeout)", "watchdog_timeout")
            return
        if len(self.refusals) < FAILURE_EXAMPLES and _REFUSAL.search(line):
            self.refusals.append(stripped)
            return
        if "Test failure" in line and (m := _RELAY.search(line)):
            if len(self.relayed) < FAILURE_EXAMPLES:
                self.relayed.append((raw, m))
            return
        if "NCCL WARN" in line and (m := _WARN.search(line)):
            self._warned(raw, line, m)
            return
        if stripped[0] == "{" and '"busBw"' in line:
            self._json_record(stripped)
            return
        if stripped[0] == "#" or not stripped[0].isdigit():
            if "nThread" in line and _PARAMS.search(line):
                self.started = True
            elif "Out of bounds" in line and (m := _OOB.match(line)):
                record.out_of_bounds = (record.out_of_bounds or 0) + int(m.group("n"))
                self.rows_since_summary = 0
            elif (columns := _header_line(record, self._rank, line, self.columns)) is not self.columns:
                self.columns, self.layout = columns, _layout(tuple(columns)) if columns else None
            if record.test is None and "_perf" in line and (m := _TEST_NAME.search(line)):
                record.test = m.group("name").removesuffix("_perf")
            return
        if self.columns is None:
            if (columns := _headerless(line)) is None:
                return  # numbers before the table (a pasted pod listing, a command's output)
            self.columns, self.layout = columns, _layout(tuple(columns))  # a paste that starts below its header
        assert self.layout is not None
        if (m := self.layout.pattern.fullmatch(line)) is not None:
            self._add_rows(self.layout, [m.groups()])
        else:
            try:
                self._add(_row(self.columns, line, self._line_number(), self.problem))
            except _ShortRow as exc:
                self.cut_row = exc  # the last line of a paste cut mid-row; any row or summary after it re-raises

    def _json_record(self, line: str) -> None:
        """One of rccl-tests' JSON records: a size's out-of-place or in-place result (see ``_JSON_RECORD``), kept
        until :meth:`finish` pairs the two into one row. A line that does not decode is a record cut or damaged."""
        try:
            data = msgspec.json.decode(line)
        except msgspec.DecodeError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("size"), int):
            self.problem(f"unreadable JSON record (line {self._line_number()}): {line[:80]!r}")
            return
        name = str(data.get("name", "")).lower().replace("_", "").removesuffix("perf")
        if self.record.test is None and name in _JSON_COLLECTIVES:
            self.record.test = _JSON_COLLECTIVES[name]
        if isinstance(gpus := data.get("gpus"), int) and gpus > 0:
            self.json_ranks = max(self.json_ranks or 0, gpus)
        key = (name, data["size"], data.get("type"), data.get("redop"), data.get("root"))
        if key not in self.json_rows and len(self.json_rows) >= MAX_SIZES:
            return
        slots = self.json_rows.setdefault(key, [None, None])
        slots[1 if data.get("inPlace") else 0] = PlacementResult(
            time_us=_json_number(data.get("time")), algbw_gbps=_json_number(data.get("algBw")),
            busbw_gbps=_json_number(data.get("busBw")), wrong=_json_wrong(data.get("#wrong", data.get("wrong"))))

    def json_report(self, text: str) -> None:
        """nccl-tests' JSON report (see ``_JSON_REPORT``), whole or cut: its devices, results and summary read as
        the same lines of its stdout would be. A report that does not close keeps the results it holds whole and
        is listed incomplete (the run died, or the file was cut, before its summary)."""
        try:
            data = msgspec.json.decode(text)
        except msgspec.DecodeError:  # cut, or lines after it (a paste's next command): the report's own braces
            data = next(_json_objects(text, "version"), None)
        if not isinstance(data, dict):
            self.problem("the JSON report does not close: the run died, or the file was cut, before its end")
            code = re.search(r'"nccl_version"\s*:\s*(\d+)', text)
            binary = re.search(r'"args"\s*:\s*\[\s*("[^"]*")', text)
            data = {"nccl_version": int(code.group(1)) if code else None,
                    "args": [msgspec.json.decode(binary.group(1))] if binary else None,
                    "config": {"devices": list(_json_objects(text, "rank"))}, "results": _json_objects(text, "size")}
        self.started = True
        record = self.record
        if isinstance(code := data.get("nccl_version"), int) and code > 0:
            record.nccl_version = record.nccl_version or _version_from_code(code)
        if isinstance(args := data.get("args"), list) and args and isinstance(args[0], str) \
                and (m := _TEST_NAME.search(args[0])):
            self.commanded = self.commanded or m.group("name").removesuffix("_perf")
        config = data.get("config")
        for device in config.get("devices", ()) if isinstance(config, dict) else ():
            if isinstance(device, dict) and isinstance(rank := device.get("rank"), int) \
                    and isinstance(host := device.get("hostname"), str):
                self._rank(rank, host, str(device.get("device_info") or "").strip())
        for result in data.get("results") or ():
            self._json_result(result)
        if isinstance(oob := data.get("out_of_bounds"), dict) and isinstance(count := oob.get("count"), int):
            record.out_of_bounds = (record.out_of_bounds or 0) + count
            self.rows_since_summary = 0
        average = data.get("average_bus_bandwidth", data.get("average_bus_bandwidith"))
        if isinstance(average, dict):
            record.avg_busbw_gbps = _json_number(average.get("bandwidth", average.get("bandwidith")))
            record.avg_busbw_source = "reported" if record.avg_busbw_gbps is not None else None
            record.avg_busbw_failed = average.get("okay") is False

    def _json_result(self, result: object) -> None:
        """One size of the JSON report: out-of-place (null where only in-place ran) and in-place figures."""
        if not isinstance(result, dict) or not isinstance(size := result.get("size"), int):
            self.problem(f"unreadable result in the JSON report: {str(result)[:80]!r}")
            return
        out, in_place = (_json_placement(result.get(key)) for key in ("out_of_place", "in_place"))
        if out is None and in_place is None:
            self.problem(f"a result of the JSON report with no figures (size {size})")
            return
        first = out or PlacementResult(None, None, None, None)
        kind, redop, count = result.get("type"), result.get("redop"), result.get("count")
        self._add(NcclTestRow(size, count if isinstance(count, int) else None, kind if isinstance(kind, str) else None,
                              redop if isinstance(redop, str) else None, _int(str(result.get("root", "")).strip()),
                              first.time_us, first.algbw_gbps, first.busbw_gbps, first.wrong, in_place=in_place))

    def _failure(self, raw: str, host: str | None, what: str, file: str, number: str, message: str,
                 known: str | None = None) -> None:
        """A ``Test ... failure`` line not seen lately: read, classified (``known``: the signature its form
        names), given its (signature, host) group (whose examples are its first distinct lines) and remembered
        with it, since an aborted job repeats the same line for every iteration; then counted
        (:meth:`_count_failure`)."""
        message = _cut(message.strip())
        said = (what, message)
        if known is not None:
            signature: str | None = known
        elif said in self.signatures:
            signature = self.signatures[said]
        else:  # a "Test CUDA failure" quotes cudaGetErrorString: 'out of memory', 'an illegal memory access...'
            found = classify(f"CUDA error: {message}" if what == "CUDA" else message)
            signature = found[0] if found else None
            if len(self.signatures) >= _REPEATS:
                self.signatures.clear()
            self.signatures[said] = signature
        failure: _Failure = (host, what, file, int(number), message, signature)
        groups = self.failure_groups
        key = (signature, host, False)
        if key not in groups and len(groups) >= MAX_FAILURE_GROUPS:
            key = (signature, None, True)
        if (group := groups.get(key)) is None:
            group = groups[key] = NcclFailureGroup(signature, key[1], other_hosts=key[2])
        if len(group.examples) < FAILURE_EXAMPLES and all(
                (e.kind, e.file, e.line, e.message) != failure[1:5] for e in group.examples):
            group.examples.append(NcclTestFailure(*failure))
        if len(raw) <= _REMEMBERED:
            if len(self.failure_lines) >= _REPEATS:
                self.failure_lines.clear()
            self.failure_lines[raw] = (failure, group)
        self._count_failure(failure, group)

    def _warned(self, raw: str, line: str, m: re.Match[str]) -> None:
        """An ``NCCL WARN`` line: kept in its (signature, host) group of ``warn_causes`` when its job-log signature
        names a failure, counted when a line read before repeats (an aborted job's ranks warn alike), else
        dropped. Groups and examples are bounded as for failure lines."""
        if raw in self.warn_lines:
            if (known := self.warn_lines[raw]) is not None:
                known.count += 1
            return
        found = classify(line)
        group: NcclFailureGroup | None = None
        if found is not None and found[0] not in _NOT_A_CAUSE:
            signature, host = found[0], m.group("host")
            key = (signature, host, False)
            if key not in self.causes and len(self.causes) >= MAX_FAILURE_GROUPS:
                key = (signature, None, True)
            if (group := self.causes.get(key)) is None:
                group = self.causes[key] = NcclFailureGroup(signature, key[1], other_hosts=key[2])
            group.count += 1
            warning = NcclTestFailure(host, "NCCL WARN", m.group("file") or "", int(m.group("line") or 0),
                                      _cut(m.group("message").strip()), signature)
            if len(group.examples) < FAILURE_EXAMPLES and all(
                    (e.file, e.line, e.message) != (warning.file, warning.line, warning.message)
                    for e in group.examples):
                group.examples.append(warning)
        if len(raw) <= _REMEMBERED:
            if len(self.warn_lines) >= _REPEATS:
                self.warn_lines.clear()
            self.warn_lines[raw] = group

    def _count_failure(self, failure: _Failure, group: NcclFailureGroup) -> None:
        """Every failure line counts in ``errors_total`` and its group; only the first and last KEPT_FAILURES
        are listed in ``errors``."""
        self.record.errors_total += 1
        group.count += 1
        if len(self.failure_head) < KEPT_FAILURES:
            self.failure_head.append(NcclTestFailure(*failure))
        else:
            self.failure_tail.append(failure)

    def _line_number(self) -> int:
        """The 1-based number of the line being read: :attr:`number` after :meth:`feed`; in
        :meth:`feed_text`, found from the piece's lines only when asked (a bad row), since the
        lines that matter are picked out without their positions."""
        if self.piece is None:
            return self.number
        lines, base, at = self.piece
        if self.piece_numbers is None:
            self.piece_numbers = [i for i, line in enumerate(lines) if _matters(line)]
        return base + self.piece_numbers[at] + 1

    def feed_text(self, text: str) -> None:
        """A piece of log of whole lines: the same as :meth:`feed` on each of ``text.splitlines()``, faster.

        The lines that cannot matter (NCCL INFO lines naming no version, ``_perf`` or
        ``failure``: most of a long log) are dropped by one list comprehension; the rest are
        matched against the current header's row regex a window at a time (``map``, no Python
        per line), and the rows it reads whole are counted column by column (:meth:`_add_rows`)
        when a line of another sort ends them. Lines outside the table that a soak log repeats
        every run are classified once (:meth:`_repeatable`); what is left goes through :meth:`_line`.
        """
        lines = text.splitlines()
        kept = [line for line in lines if " NCCL INFO " not in line
                or "version" in line or "_perf" in line or "failure" in line]
        base = self.number
        self.piece, self.piece_numbers = (lines, base, 0), None
        try:
            self._feed_kept(kept, lines, base)
        finally:
            self.piece, self.piece_numbers = None, None
            self.number = base + len(lines)

    def _feed_kept(self, kept: list[str], lines: list[str], base: int) -> None:
        batch: list[tuple[str, ...]] = []
        start = 0
        while start < len(kept):
            layout = self.layout
            if layout is None:
                self.piece = (lines, base, start)
                self._line(kept[start])
                start += 1
                continue
            window = kept[start:start + _WINDOW]
            found = list(map(layout.pattern.fullmatch, map(str.rstrip, window)))
            at = 0
            for stop in chain(compress(range(len(found)), map(not_, found)), [len(found)]):
                batch.extend(map(_GROUPS, found[at:stop]))
                at = stop + 1
                if stop == len(found):
                    break
                raw = window[stop]
                if (effect := self.repeats.get(raw)) is None:
                    effect = self._repeatable(raw)
                if effect is not False:
                    if effect is not True:
                        self._rank(*effect)
                    continue
                if raw[:1] in _PREFIX_STARTS and ":" in raw[:24] and (
                        m := layout.pattern.fullmatch(_PREFIX.sub("", raw, count=1).rstrip())) is not None:
                    batch.append(m.groups())
                    continue
                if batch:
                    self._add_rows(layout, batch)
                    batch = []
                self.piece = (lines, base, start + stop)
                self._line(raw)
                if self.layout is not layout:
                    break
            start += min(at, len(found))
        if batch and self.layout is not None:
            self._add_rows(self.layout, batch)

    def _repeatable(self, raw: str) -> tuple[int, str, str] | bool:
        """What :meth:`feed` would do with a line outside the table that cannot change with the state:
        ``True`` nothing (a comment, a blank), a (rank, host, GPU) for a ``# Rank`` line and
        nothing else, ``False`` anything else. Remembered per line but for rows: a soak log repeats
        the others every run, the header and trailer (``False``) included."""
        prefixed = ":" in raw[:24] and raw[:1] in _PREFIX_STARTS
        line = _PREFIX.sub("", raw, count=1).rstrip() if prefixed else raw.rstrip()
        stripped = line.lstrip()
        effect: tuple[int, str, str] | bool
        if not stripped or is_noise(line):
            effect = True
        elif stripped[0] != "#" and stripped[0].isdigit():
            return False
        elif not (words := [word for word in _ACTIVE if word in line]):
            effect = True
        elif words == ["Rank"]:
            m = _RANK.match(line)
            effect = (int(m.group("rank")), m.group("host"), m.group("name").strip()) if m else True
        else:
            effect = False
        if len(raw) <= _REMEMBERED:
            if len(self.repeats) >= _REPEATS:
                self.repeats.clear()
            self.repeats[raw] = effect
        return effect

    def _rank(self, rank: int, host: str, name: str) -> None:
        self.ranks[rank] = host
        if name and (rank, host, name) not in self.devices:
            self.devices.add((rank, host, name))
            self.record.gpus.append(NcclTestDevice(rank, host, name))

    def problem(self, text: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)

    def _add(self, row: NcclTestRow) -> None:
        self._keep(row)
        ip = row.in_place
        self._count(row.size_bytes, row.algbw_gbps, row.busbw_gbps, row.wrong, row.error,
                    ip.busbw_gbps if ip else None, ip.wrong if ip else None, ip.error if ip else None)

    def _add_rows(self, layout: _Layout, batch: list[tuple[str, ...]]) -> None:
        """Rows matched by their layout, in log order: built into objects only where kept, counted by column.

        The same figures as :meth:`_count` row by row: maxima are order-free, sums are added
        in log order (``reduce``, not ``sum``: the result must not depend on the Python version),
        and what is listed (sizes, the first largest row) is walked in order.
        """
        record = self.record
        if self.cut_row is not None:
            raise self.cut_row
        record.rows_total += len(batch)
        self.rows_since_summary += len(batch)
        room = KEPT_ROWS - len(self.head)
        if room > 0:
            self.head.extend(map(layout.build, batch[:room]))
        self.tail.extend(zip(repeat(layout), batch[max(room, 0):][-KEPT_ROWS:]))
        at = layout.at
        sizes = list(map(int, map(itemgetter(at[0]), batch)))
        busbw, error, ip_busbw, ip_error = (_column(batch, i, float) for i in (at[2], at[4], at[5], at[7]))
        wrong, ip_wrong = _column(batch, at[3], int), _column(batch, at[6], int)
        if busbw is not None:
            best = max(busbw)
            if record.peak_busbw_gbps is None or best >= record.peak_busbw_gbps:
                at_size = min(compress(sizes, map(eq, busbw, repeat(best))))
                if record.peak_busbw_gbps is None or (best, -at_size) > (record.peak_busbw_gbps,
                                                                         -(record.peak_size_bytes or 0)):
                    record.peak_busbw_gbps, record.peak_size_bytes = best, at_size
            by_size = record.busbw_by_size
            known = list(map(by_size.get, sizes))
            for i in range(len(sizes)) if None in known else compress(range(len(sizes)),
                                                                      map(gt, busbw, cast(list[float], known))):
                size, value = sizes[i], busbw[i]
                if size in by_size:
                    if value > by_size[size]:
                        by_size[size] = value
                elif len(by_size) < MAX_SIZES:
                    by_size[size] = value
            self.busbw_sum[0] = reduce(add, busbw, self.busbw_sum[0])
            self.busbw_n += len(busbw)
        if ip_busbw is not None:
            best_in_place = max(ip_busbw)
            if record.peak_busbw_in_place_gbps is None or best_in_place > record.peak_busbw_in_place_gbps:
                record.peak_busbw_in_place_gbps = best_in_place
            self.busbw_sum[1] = reduce(add, ip_busbw, self.busbw_sum[1])
            self.busbw_n += len(ip_busbw)
        if wrong is not None or ip_wrong is not None:
            record.wrong_total = (record.wrong_total or 0) + sum(wrong or ()) + sum(ip_wrong or ())
            if any(wrong or ()) or any(ip_wrong or ()):
                flags = map(or_, wrong or repeat(0), ip_wrong or repeat(0))
                room = MAX_SIZES - len(record.wrong_sizes)
                record.wrong_sizes.extend(islice(compress(sizes, flags), max(room, 0)))
        errors = [*(error or ()), *(ip_error or ())]
        if errors and (record.max_error is None or max(errors) > record.max_error):
            record.max_error = max(errors)
        if busbw is not None and at[1] >= 0 and (
                self.largest_measured is None or max(sizes) > self.largest_measured[0]):
            algbw = list(map(float, map(itemgetter(at[1]), batch)))
            measured = list(map(all, zip(algbw, busbw, strict=True)))
            largest = max(compress(sizes, measured), default=None)
            if largest is not None and (self.largest_measured is None or largest > self.largest_measured[0]):
                i = next(i for i in compress(range(len(sizes)), measured) if sizes[i] == largest)
                self.largest_measured = (largest, algbw[i], busbw[i])

    def _keep(self, row: NcclTestRow) -> None:
        self.record.rows_total += 1
        self.rows_since_summary += 1
        if len(self.head) < KEPT_ROWS:
            self.head.append(row)
        else:
            self.tail.append(row)

    def _count(self, size: int, algbw: float | None, busbw: float | None, wrong: int | None, error: float | None,
               ip_busbw: float | None, ip_wrong: int | None, ip_error: float | None) -> None:
        record = self.record
        if busbw is not None:
            peak = record.peak_busbw_gbps
            if peak is None or (busbw, -size) > (peak, -(record.peak_size_bytes or 0)):
                record.peak_busbw_gbps, record.peak_size_bytes = busbw, size
            if size in record.busbw_by_size:
                record.busbw_by_size[size] = max(record.busbw_by_size[size], busbw)
            elif len(record.busbw_by_size) < MAX_SIZES:
                record.busbw_by_size[size] = busbw
            self.busbw_sum[0] += busbw
            self.busbw_n += 1
        if ip_busbw is not None:
            if record.peak_busbw_in_place_gbps is None or ip_busbw > record.peak_busbw_in_place_gbps:
                record.peak_busbw_in_place_gbps = ip_busbw
            self.busbw_sum[1] += ip_busbw
            self.busbw_n += 1
        if wrong is not None or ip_wrong is not None:
            record.wrong_total = (record.wrong_total or 0) + (wrong or 0) + (ip_wrong or 0)
            if ((wrong or 0) > 0 or (ip_wrong or 0) > 0) and len(record.wrong_sizes) < MAX_SIZES:
                record.wrong_sizes.append(size)
        for e in (error, ip_error):
            if e is not None and (record.max_error is None or e > record.max_error):
                record.max_error = e
        if algbw and busbw and (self.largest_measured is None or size > self.largest_measured[0]):
            self.largest_measured = (size, algbw, busbw)

    def finish(self) -> NcclTestsRecord:
        record = self.record
        for (_, size, kind, redop, root), (out, in_place) in self.json_rows.items():
            first = out or PlacementResult(None, None, None, None)
            self._add(NcclTestRow(size, None, kind if isinstance(kind, str) else None,
                                  redop if isinstance(redop, str) else None, _int(str(root)) if root is not None
                                  else None, first.time_us, first.algbw_gbps, first.busbw_gbps, first.wrong,
                                  in_place=in_place))
        # A relay is read only where nothing else says why the run failed: no failure line (lost, or cut from the
        # paste) and no result row (with rows, the relay is the run's final check, common.cu's exit on #wrong or
        # on an average bandwidth below -c, which the rows and summary already show).
        if not record.errors_total and not (self.head or self.tail):
            for raw, m in self.relayed:
                self._failure(raw, m.group("host"), "test", m.group("file"), m.group("line"),
                              "a test step failed (its cause was printed before this relay line)")
        record.rows = [*self.head, *(r if isinstance(r, NcclTestRow) else r[0].build(r[1]) for r in self.tail)]
        record.rows_omitted = record.rows_total - len(record.rows)
        record.errors = [*self.failure_head, *(NcclTestFailure(*failure) for failure in self.failure_tail)]
        record.errors_omitted = record.errors_total - len(record.errors)
        record.failure_groups = list(self.failure_groups.values())
        record.warn_causes = list(self.causes.values())
        if self.cut_row is not None:
            self.problem(f"the last row was cut ({self.cut_row}): the paste ends mid-row")
        if not record.rows and not record.errors_total and self.columns is None and not (
                self.started or self.ranks or self.refusals or record.out_of_bounds is not None):
            raise ParseError(KIND, "no nccl-tests result row and no 'Test ... failure' line")
        record.incomplete = self.problems
        if not record.rows and not record.errors_total and self.refusals:
            record.incomplete.insert(0, f"nccl-tests refused to run: {'; '.join(self.refusals)}"[:400])
        elif not record.rows and not record.errors_total and self.columns is None and not (self.started or self.ranks):
            # the summary lines alone: their verdict is judged, the sizes and bandwidths were never shown
            record.incomplete.insert(0, "only the summary lines were shown (no column header, no result row): "
                                        "judged on the summary alone")
        elif not record.rows and not record.errors_total and self.columns is None:
            # its parameters or device lines and no table: hung in setup, died, or a paste cut there
            record.incomplete.insert(0, "the run printed its parameters/devices but no column header or result: "
                                        "it stopped (hung, died or was cut) before its first result")
        elif not record.rows and not record.errors_total:
            # a column header and nothing after it: a paste cut (or a run that died) before its first result
            record.incomplete.insert(0, "the output ends after the column header: cut before any result row")
        if self.problem_count > len(self.problems):
            record.incomplete.append(f"{self.problem_count - len(self.problems)} more unreadable value(s)")
        if record.rows and record.out_of_bounds is None and not record.errors_total and self.json_rows \
                and self.columns is None:
            # records are written as each size finishes and no line ends the file: a run that died reads the same
            record.incomplete.append("rccl-tests' JSON records have no end-of-run line (its 'Out of bounds values' "
                                     "summary is printed to stdout only): whether the run finished cannot be told "
                                     "from them; judge the run's stdout")
        elif record.rows and record.out_of_bounds is None and not record.errors_total:
            record.incomplete.append("no 'Out of bounds values' summary line: the output ends before the run finished")
        elif record.out_of_bounds is not None and self.rows_since_summary and not record.errors_total:
            record.incomplete.append(f"{self.rows_since_summary} row(s) after the last 'Out of bounds values' "
                                     "summary line: the last run ends before it finished")
        if self.ranks:
            record.nranks = max(self.ranks) + 1
            record.hosts = sorted(set(self.ranks.values()))
        if record.avg_busbw_gbps is None and self.busbw_n:
            record.avg_busbw_gbps = round((self.busbw_sum[0] + self.busbw_sum[1]) / self.busbw_n, 4)
            record.avg_busbw_source = "computed"
        if record.test is None:
            record.test = self.commanded
        if record.nranks is None and self.json_ranks is not None:
            record.nranks = self.json_ranks  # the records' own "gpus"
        if record.nranks is None:
            record.nranks = _infer_ranks(record, self.largest_measured)
            record.nranks_inferred = record.nranks is not None
        return record


class _ShortRow(ParseError):
    """A row with fewer cells than its header: a paste cut mid-row when nothing follows it (see ``cut_row``)."""


def _cut(message: str) -> str:
    """A failure message as kept and classified: its first FAILURE_MESSAGE_CHARS characters (NCCL's are one
    short sentence; a damaged log's line can run to megabytes, and hundreds of them are kept)."""
    return message if len(message) <= FAILURE_MESSAGE_CHARS else message[:FAILURE_MESSAGE_CHARS] + "... (cut)"


def _column(batch: list[tuple[str, ...]], at: int, read: Callable[[str], _N]) -> list[_N] | None:
    """Column ``at`` of the rows in ``batch`` read as numbers, None where the layout has no such column: only
    the columns the counts need are taken out of the rows (algbw only when a larger size may need it)."""
    return None if at < 0 else list(map(read, map(itemgetter(at), batch)))


def scan(chunks: Iterable[bytes]) -> NcclTestsRecord:
    """nccl-tests output streamed as chunks of whole lines (see :func:`gpu_preflight.boundedio.iter_chunks`)."""
    gate = ContentGate(KIND)
    scanner = NcclTestsScanner()
    report: list[str] | None = None  # the pieces of a file that is nccl-tests' JSON report (pretty-printed too)
    for chunk in chunks:
        gate.check(chunk)
        text = chunk.decode("utf-8", errors="replace")
        if report is None and not scanner.number and (start := _JSON_REPORT_LINE.search(text)):
            scanner.feed_text(text[:start.start()])  # what was pasted above the report ('$ cat out.json')
            report, text = [], text[start.start():]
        if report is not None:
            report.append(text)
        else:
            scanner.feed_text(text)
    gate.finish()
    if report is not None:
        scanner.json_report("".join(report))
    return scanner.finish()


def _matters(line: str) -> bool:
    """Whether :meth:`NcclTestsScanner.feed` reads ``line`` at all: NCCL_DEBUG=INFO chatter, most of a
    long log, is never table, trailer or failure unless it names a version, ``_perf`` or ``failure``.
    :meth:`NcclTestsScanner.feed_text` spells the same test inline."""
    return " NCCL INFO " not in line or "version" in line or "_perf" in line or "failure" in line


@parser(KIND, sniff=sniff, stream=scan,
        title="nccl-tests (*_perf) output, any version, with or without rank prefixes")
def parse(text: str) -> NcclTestsRecord:
    """Parse nccl-tests output: the perf table, the trailer and ``Test ... failure`` lines."""
    return scan([text.encode("utf-8", errors="surrogatepass")])


def _header_line(record: NcclTestsRecord, rank: Callable[[int, str, str], None], line: str,
                 columns: list[str] | None) -> list[str] | None:
    """A line outside the table: the column header, a rank's device (listed once however many runs
    of a soak log repeat it), the trailer, versions.

    Each pattern is tried only when the word it needs is in the line: most lines of a long
    log are NCCL INFO lines that match none.
    """
    if "size" in line and _HEADER.match(line):
        return _stamped([t for t in line.lstrip("#").split()])
    if "bytes" in line and _V1_HEADER.match(line):
        return [_V1_NAMES.get(t, t) for t in line.lstrip("#").split()]
    if "Rank" in line and (m := _RANK.match(line)):
        rank(int(m.group("rank")), m.group("host"), m.group("name").strip())
    elif "Avg" in line and (m := _AVG.match(line)):
        record.avg_busbw_gbps = to_float(m.group("v"))
        record.avg_busbw_source = "reported" if record.avg_busbw_gbps is not None else None
        record.avg_busbw_failed = m.group("verdict") == "FAILED"
    elif "nccl-tests" in line and (m := _TESTS_VERSION.match(line)):
        record.nccl_tests_version = m.group("v")
        if lib := _LIBRARY.search(line):
            record.nccl_version = record.nccl_version or _version_from_code(int(lib.group("code")))
    elif "NCCL version" in line and (m := _NCCL_VERSION.search(line)):
        record.nccl_version = m.group("v")
    return columns


def _stamped(columns: list[str]) -> list[str]:
    """A header's names, one per cell of its rows: nccl-tests 2.18+ with ``-S 1`` (``--report_timestamps``) ends
    the header with ``timestamp`` over strftime's ``%Y-%m-%d %H:%M:%S`` (util.cu), two cells in every row, so
    the one name stands for a date and a clock."""
    return [*columns[:-1], "timestamp", "timestamp-clock"] if columns and columns[-1] == "timestamp" else columns


_NUM = r"(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_CHECK = r"(?:\d+|N/A|\d+\.?\d*[eE][-+]?\d+)"  # a #wrong count (N/A in-place for sendrecv) or a legacy error
# A result row as nccl-tests prints it (common.cu's format: size, count, a datatype name, the reduction and root
# where the collective has them, then time, algbw, busbw and its check out-of-place and in-place), recognised by
# its own cells where the paste left out the column header above it: the datatype and reduction names and the
# cell count say which columns are there, so a pod listing or a command's numbers are never read as one.
_HEADERLESS = re.compile(
    r"\s*\d+\s+\d+\s+(?:u?int(?:8|32|64)|half|float|double|bfloat16|f8e4m3|f8e5m2|fp8_e4m3|fp8_e5m2)"
    r"(?P<redop>\s+(?:sum|prod|max|min|avg|none|mulsum|premulsum))?(?P<root>\s+-?\d+)?"
    r"(?:\s+" + _NUM + r"){3}\s+(?P<check>" + _CHECK + r")(?:\s+" + _NUM + r"){3}\s+" + _CHECK +
    r"(?P<stamp>\s+\d{4}-\d\d-\d\d\s+\d\d:\d\d:\d\d)?\s*")  # -S 1's timestamp (see _stamped)


def _headerless(line: str) -> list[str] | None:
    """The column header a result row implies when the paste starts below the header (the tail of a run quoted
    with its summary): ``#wrong`` or the legacy ``error`` by the check cell's form, ``redop``/``root`` where the
    row has them. None for any other line."""
    if not (m := _HEADERLESS.fullmatch(line)):
        return None
    check = "#wrong" if re.fullmatch(r"\d+|N/A", m.group("check")) else "error"
    head = ["size", "count", "type", *(["redop"] if m.group("redop") else []), *(["root"] if m.group("root") else [])]
    stamp = ["timestamp", "timestamp-clock"] if m.group("stamp") else []
    return [*head, "time", "algbw", "busbw", check, "time", "algbw", "busbw", check, *stamp]


class _Layout(msgspec.Struct, frozen=True):
    """One header's row shape as a regex: a row whose cells are all plain numbers is read in one match.

    Anything else (a value count that differs, ``N/A``, a damaged cell) goes through
    :func:`_row`, which names the problem.
    """

    columns: list[str]
    first: dict[str, int]
    second: dict[str, int]
    pattern: re.Pattern[str]
    at: tuple[int, ...]  # size, algbw, busbw, wrong, error, in-place busbw, wrong, error (-1: no such column)

    @classmethod
    def of(cls, columns: list[str]) -> _Layout:
        first: dict[str, int] = {}
        second: dict[str, int] = {}
        cells = []
        for i, name in enumerate(columns):
            key = name.lower().lstrip("#")
            (second if key in first else first)[key] = i
            cells.append(_CELLS["integral" if key in _INTEGRAL else "numeric" if key in _NUMERIC else "other"])
        at = (first.get("size", -1), first.get("algbw", -1), first.get("busbw", -1), first.get("wrong", -1),
              first.get("error", -1), second.get("busbw", -1), second.get("wrong", -1), second.get("error", -1))
        return cls(columns, first, second, re.compile(r"\s*+" + r"\s++".join(cells) + r"\s*+", re.ASCII), at)

    def build(self, values: tuple[str, ...]) -> NcclTestRow:
        first, second = self.first, self.second
        out = self._placement(values, first)
        return NcclTestRow(
            size_bytes=int(values[first["size"]]), count=int(values[first["count"]]) if "count" in first else None,
            type=values[first["type"]] if "type" in first else None,
            redop=values[first["redop"]] if "redop" in first else None,
            root=_int(values[first["root"]]) if "root" in first else None, time_us=out.time_us,
            algbw_gbps=out.algbw_gbps, busbw_gbps=out.busbw_gbps, wrong=out.wrong, error=out.error,
            in_place=self._placement(values, second) if second else None)

    @staticmethod
    def _placement(values: tuple[str, ...], at: dict[str, int]) -> PlacementResult:
        return PlacementResult(
            time_us=float(values[at["time"]]) if "time" in at else None,
            algbw_gbps=float(values[at["algbw"]]) if "algbw" in at else None,
            busbw_gbps=float(values[at["busbw"]]) if "busbw" in at else None,
            wrong=int(values[at["wrong"]]) if "wrong" in at else None,
            error=float(values[at["error"]]) if "error" in at else None)


_INTEGRAL = frozenset({"size", "count", "wrong"})
# Possessive (no backtracking: every cell is followed by blanks or the end, and no cell starts with one), the
# same language as \d+, \d+\.?\d*|\.\d+ and \S+, matched faster.
_CELLS = {"integral": r"(\d++)", "numeric": r"((?:\d++\.?+|\.\d)\d*+)", "other": r"(\S++)"}


@lru_cache(maxsize=64)
def _layout(columns: tuple[str, ...]) -> _Layout:
    """One :class:`_Layout` per distinct header: a soak log repeats the same header every run."""
    return _Layout.of(list(columns))


def _version_from_code(code: int) -> str:
    """NCCL_VERSION_CODE → dotted version (2.9+ encode major*10000 + minor*100 + patch)."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def _row(columns: list[str], line: str, number: int, problem: Callable[[str], None]) -> NcclTestRow:
    values = line.split()
    if len(values) == len(columns) - 1 and "redop" in columns and _number(values[columns.index("redop")]) is not None:
        # old alltoall_perf: a redop header over blank cells, so a number stands where the redop would; a row
        # that still shows its redop ("sum") but lacks a cell was cut, and is read as such below
        columns = [c for c in columns if c != "redop"]
    if len(values) != len(columns):
        message = f"{len(values)} values where the header names {len(columns)} columns"
        raise (_ShortRow if len(values) < len(columns) else ParseError)(KIND, message, number)
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
        if name in _NUMERIC and not ((value.isascii() and value.isdigit()) or (name != "wrong" and _decimal(value))) \
                and not is_not_available(value) and _NUMERIC[name](value) is None:
            problem(f"unreadable {key} value {value[:80]!r} (line {number})")
    out = _placement(first)
    return NcclTestRow(
        size_bytes=size, count=_int(first.get("count")), type=first.get("type"), redop=first.get("redop"),
        root=_int(first.get("root")), time_us=out.time_us, algbw_gbps=out.algbw_gbps, busbw_gbps=out.busbw_gbps,
        wrong=out.wrong, error=out.error, in_place=_placement(second) if second else None,
    )


def _placement(values: dict[str, str]) -> PlacementResult:
    return PlacementResult(time_us=_float(values.get("time")), algbw_gbps=_float(values.get("algbw")),
                           busbw_gbps=_float(values.get("busbw")), wrong=_count(values.get("wrong")),
                           error=_float(values.get("error")))


def _json_number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _json_wrong(value: object) -> int | None:
    """A JSON record's wrong count: ``"0"`` (rccl-tests#93), ``0``, nccl-tests' ``0.000000`` (a double), or
    ``"N/A"`` and null (not checked) as None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return _int(value) if isinstance(value, str) else None


def _json_placement(value: object) -> PlacementResult | None:
    """One placement of nccl-tests' JSON report: ``{"time"|"cpu_time","alg_bw","bus_bw","nwrong"}``."""
    if not isinstance(value, dict):
        return None
    return PlacementResult(time_us=_json_number(value.get("time", value.get("cpu_time"))),
                           algbw_gbps=_json_number(value.get("alg_bw")), busbw_gbps=_json_number(value.get("bus_bw")),
                           wrong=_json_wrong(value.get("nwrong")))


def _json_objects(text: str, key: str) -> Iterator[dict[str, object]]:
    """The objects of a cut JSON report that start with ``key`` and close before the cut, decoded one by one."""
    for start in re.finditer(r'\{\s*"' + key + r'"\s*:', text):
        depth, quoted, escaped = 0, False, False
        for at in range(start.start(), len(text)):
            c = text[at]
            if quoted:
                escaped, quoted = (False, True) if escaped else (c == "\\", c != '"')
            elif c == '"':
                quoted = True
            elif c in "{[":
                depth += 1
            elif c in "}]":
                depth -= 1
                if depth == 0:
                    try:
                        found = msgspec.json.decode(text[start.start():at + 1])
                    except msgspec.DecodeError:
                        break
                    if isinstance(found, dict):
                        yield found
                    break


def _decimal(value: str) -> bool:
    """``15.31``, ``0``: the plain form nearly every cell has, read without a regex."""
    return value.replace(".", "", 1).isdigit() and value.isascii()


def _float(value: str | None) -> float | None:
    return float(value) if value is not None and _decimal(value) else to_float(value)


def _number(value: str) -> float | None:
    return to_float(value) if re.fullmatch(r"[-+]?" + _NUM, value) else None


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    if value.isascii() and value.isdigit():
        return int(value)
    return int(value) if _INTEGER.fullmatch(value) else None


def _count(value: str | None) -> int | None:
    """A ``#wrong`` cell: nccl-tests 2.13+ prints the count with ``%5g`` (``%6g`` from 2.17.4, util.cu), so a
    count of a million or more reads ``1e+06`` or ``3.35544e+07``: six significant digits of a count that is
    above zero all the same, not an unreadable cell (a row of 33 million wrong values must not leave the run
    validated)."""
    if value is not None and _G_COUNT.fullmatch(value):
        return round(float(value))
    return _int(value)


_INTEGER = re.compile(r"-?\d+")
_G_COUNT = re.compile(r"\d(?:\.\d+)?e\+\d+")  # printf's %g of an integer too large for its six digits
_NUMERIC: dict[str, Callable[[str], float | int | None]] = {
    "time": _number, "algbw": _number, "busbw": _number, "error": _number, "wrong": _count}


def _infer_ranks(record: NcclTestsRecord, best: tuple[int, float, float] | None) -> int | None:
    """Ranks from busbw/algbw of the largest row (most digits), for collectives whose factor depends on n."""
    factor = _FACTORS.get(record.test or "all_reduce")  # an unnamed table is most often all_reduce: flagged
    if factor is None or best is None:
        return None
    ratio = best[2] / best[1]
    denominator = (2 - ratio) if factor.startswith("2") else (1 - ratio)
    if denominator <= 0.001:
        return None
    n = round((2 if factor.startswith("2") else 1) / denominator)
    return n if n >= 2 else None
