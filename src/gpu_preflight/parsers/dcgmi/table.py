"""The ``dcgmi diag`` text table, DCGM 1.x to 4.x.

Rows are ``| label | result |``; a blank label continues the row above. Category rows
(``+-----  Stress  ---+---+`` or ``|-----  Deployment  ----+----|``) open a section. What
varies: ``Blacklist`` (≤2.4) / ``Denylist``; results ``Pass - All``, ``Pass - GPUs: 0, 2,
3`` with ``Fail - GPU: 1`` on the next row (3.x), or a bare status with ``GPU0: Pass``
sub-rows (4.x); ``Warning``/``Info``/``Error`` rows whose text DCGM hard-wraps at the cell
width *in the middle of words* — chunks are therefore joined exactly as printed (the cell
minus its one-space left and two-space right margin), which restores ``desire`` + ``d``
into ``desired``. Trailing blanks after the last ``|`` do not matter.

Completeness: dcgmi always closes the table with a ``+----+----+`` border after the last
row; what follows it is another command's output (a Slurm epilog's ``dcgmi stats`` table) and
is not read, unless it is a second run's table with its own ``Diagnostic | Result`` header.
A table without the border, or with lines elided (``...``), was cut: it is read as far as it
goes and the record says so in ``incomplete`` (a failing ``-r 2`` run cut after its
Deployment rows must not read as "5 tests passed"). So does a result fragment that is
not a status (``Fbil - GPU: 1``): it cannot be folded into the test, and dropping it
could turn a failed GPU into a pass. A paste that ends inside its last row (no closing ``|``),
with nothing after it but the author's ``...``, keeps the text that row has and is marked cut:
authors cut a long warning mid-row and mark the cut, and the rows above it still say what failed.
Rows pasted without the ``Diagnostic | Result`` header (a failing section quoted from a longer
table) are a ``fragment``: judged on the tests they
show; an ``Info`` row whose test was not pasted says nothing about health and is dropped, and
so is a row whose result is no status (``| Start Time | Fri Dec 10 ...``): without the header
that makes it a diagnostic's row, it is another command's table (``dcgmi stats``), not a failure.
The diagnostic's refusal to test a GPU in MIG mode ("GPU 0's MIG configuration is incompatible
with the diagnostic", from ``dcgmi diag`` or nvvs run by hand) is an error line naming that GPU
(``mig_gpus``): no test ran, and DCGM itself states the GPU's MIG mode.
"""

from __future__ import annotations

import re

from ...records.dcgm import DcgmDiagRecord, DcgmTest
from ..errors import ParseError
from ..text import is_elision, is_noise, prepare
from .common import (
    EXPORTER_FATAL,
    EXPORTER_STARTED,
    HOSTENGINE_DOWN,
    ITERATIONS_ABORTED,
    KIND,
    MIG_REFUSAL,
    NVVS_LOG_ERROR,
    fatal_message,
    gpu_ids_in,
    hostengine_start_errors,
    normalize_status,
    overall_of,
    worst_status,
)

_CATEGORY = re.compile(r"^[|+]-+\s+(?P<name>[A-Za-z][\w /]*?)\s+-+[+|]")
# dcgmi's "Error: ..." line (quoted '"Error: ..."' or '> Error: ...' in some pastes), and the diagnostic's
# "Error when executing the diagnostic: ..." (any case: one paste lower-cased it).
_ERROR = re.compile(r'^[>\s]*"?(?:Error|(?i:error when executing the diagnostic)):\s*(?P<msg>.*?)"?\s*$')
_RETURN = re.compile(r"Return:\s*\((?P<code>-?\d+)\)")
_PART = re.compile(r"^(?P<status>Pass|Fail|Warn|Skip|Skipped|Error|Not Run)\b\s*(?:-\s*(?P<scope>.*))?$",
                   re.IGNORECASE)
# 4.x's result row per entity ("<entity group><id>: <result>", dcgmi/Diag.cpp): GPU0, and where the run tested them
# CPU0 (the CPU EUD), Switch0, LINK0... (DcgmFieldsGetEntityGroupString's names). Only a GPU's goes by its id.
_PER_GPU = re.compile(r"^(?P<group>GPU|vGPU|GPU_I|GPU_CI|Switch|LINK|CPU|CPU_CORE|ConnectX)\s*(?P<id>\d+)\s*:\s*"
                      r"(?P<status>\w[\w ]*)$", re.IGNORECASE)
_MESSAGE_LABELS = ("warning", "info", "error", "note")
_CLOSING = re.compile(r"^\+-+\+-+\+$")
_HEADER = re.compile(r"^\|\s*Diagnostic\s*\|\s*Result\s*\|$")
_METADATA = {"dcgm version": "dcgm_version", "driver version detected": "driver_version"}
# `dcgmi diag --iterations N` (dcgmi/Diag.cpp, 2.4-4.x) opens each run with "Running iteration i of N..." and always
# ends with "Passed all N runs of the diagnostic" or its abort line (ITERATIONS_ABORTED): without either the paste
# stops inside the loop, and the runs after the last one shown are not shown.
_ITERATION = re.compile(r"^[>\s]*Running iteration (?P<i>\d+) of (?P<n>\d+)\.\.\.\s*$")
_PASSED_ALL = re.compile(r"^[>\s]*Passed all \d+ runs of the diagnostic\s*$")


def parse_table(text: str) -> DcgmDiagRecord:
    lines = prepare(KIND, text)
    record = DcgmDiagRecord(format="text")
    category: str | None = None
    current: DcgmTest | None = None
    message: tuple[str, list[str]] | None = None  # label and the raw chunks of the row being continued
    saw_table = False
    headed = False  # the "Diagnostic | Result" header row: rows pasted without it are a fragment
    closed = False
    foreign = False  # header-less rows whose result is no status were passed over (``dcgmi stats``' rows)
    ended = False  # the table's closing border was read: what follows is another command's output
    elided: list[int] = []
    exporter_log = bool(EXPORTER_STARTED.search(text))  # dcgm-exporter's log: its fatal lines are the result
    iteration: re.Match[str] | None = None  # the last "Running iteration i of N..." until the loop's closing line

    def flush() -> None:
        nonlocal message
        if message is not None and current is not None:
            label, chunks = message
            _attach(current, label, _join(chunks))
        message = None

    for number, raw in enumerate(lines, 1):
        line = raw.rstrip()
        if is_elision(raw) and saw_table and not ended:
            elided.append(number)
        if not line.strip() or is_noise(raw) or line.lstrip().startswith("#"):
            continue
        stripped = line.strip()
        if ended and stripped[:1] in ("|", "+"):
            if not _HEADER.match(stripped):
                continue  # `dcgmi stats`, `dcgmi discovery`...: a table of another command, not of this run
            ended = False  # a second run's table (two tasks' outputs, a rerun): read it too
        if stripped[:1] in ("|", "+"):
            closed = bool(_CLOSING.match(stripped))
            ended = closed and bool(record.tests)
        if m := MIG_REFUSAL.search(line):
            record.errors.append(m.group(0).strip())
            record.mig_gpus.append(int(m.group("id")))
            continue
        if m := NVVS_LOG_ERROR.match(line):
            record.errors.append(f"nvvs: {m.group('msg')}")
            continue
        if m := _ITERATION.match(line):
            iteration = m
            continue
        if _PASSED_ALL.match(line):
            iteration = None
            continue
        if m := ITERATIONS_ABORTED.match(line):
            record.errors.append(m.group(0).strip(" >"))
            iteration = None
            continue
        if m := _ERROR.match(line):
            record.errors.append(m.group("msg").strip())
            if (code := _RETURN.search(line)) is not None:
                record.return_code = int(code.group("code"))
            continue
        if m := HOSTENGINE_DOWN.search(line):  # inside a client's log line: DCGM's words only
            record.errors.append(m.group(0).strip())
            continue
        if exporter_log and (m := EXPORTER_FATAL.search(line)):
            record.errors.append(fatal_message(m))
            continue
        if m := _CATEGORY.match(line.strip()):
            flush()
            category, current, saw_table = m.group("name").strip(), None, True
            continue
        if stripped.startswith("+") or stripped.startswith("|=") or not stripped.startswith("|"):
            continue
        cells = stripped.split("|")
        if len(cells) == 3 and record.tests and not any(rest.strip() and not is_elision(rest)
                                                        for rest in lines[number:]):
            # the paste ends inside its last row (no closing '|'), perhaps with the author's '...' after it:
            # read the text it has, say it was cut (the elision is noted on its own)
            record.incomplete.append(f"the last row (line {number}) is cut before its closing '|'")
            cells.append("")
        if len(cells) < 4 and not saw_table and record.errors:
            continue  # after DCGM's own error lines, a one-cell row is another tool's table pasted along (nvidia-smi's)
        if len(cells) < 4:
            raise ParseError(KIND, "table row without a label and a result cell", number)
        saw_table = True
        label, raw_result = cells[1].strip(), cells[2]
        result = raw_result.strip()
        if label.lower() == "diagnostic" and result.lower() == "result":
            headed = True
            continue
        if category and category.lower() == "metadata":
            _metadata(record, label, result)
            continue
        if not label:
            if message is not None:
                message[1].append(raw_result)
            elif current is not None and not _status_part(current, result):
                record.incomplete.append(f"unreadable result {result!r} for {current.name} (line {number})")
            continue
        flush()
        if label.split(":")[0].strip().lower() in _MESSAGE_LABELS:
            if current is None and label.split(":")[0].strip().lower() == "info":
                message = (label, [raw_result])  # information about a test the excerpt does not show: dropped
                continue
            if current is None:  # a warning with no test before it (an excerpt): the category failed
                current = DcgmTest(category, label.split(":")[0].strip(), "fail")
                record.tests.append(current)
            current.rows.append([label, result])
            message = (label, [raw_result])
            continue
        if not headed and not _is_status(result):
            current, foreign = None, True  # a header-less row whose result is no status: another command's table
            continue
        current = DcgmTest(category, label, "pass", rows=[[label, result]])
        _status_part(current, result, first=True)
        record.tests.append(current)
    flush()
    if not saw_table and not record.errors:
        record.errors.extend(hostengine_start_errors(lines))
    if not saw_table and not record.errors:
        raise ParseError(KIND, "no dcgmi diag result table and no DCGM error line")
    if foreign and not record.tests and not record.errors:
        raise ParseError(KIND, "no dcgmi diag result row under the table's sections (another command's table)")
    if elided:
        record.incomplete.append(f"lines elided from the table (line {elided[0]})")
    if saw_table and record.tests and not closed:
        record.incomplete.append("the table has no closing border: the output was cut after its last row")
    if iteration is not None:
        run, runs = iteration.group("i"), iteration.group("n")
        record.incomplete.append(f"the output stops in run {run} of the {runs} iterations asked for, before dcgmi's "
                                 "closing line ('Passed all ...' or 'Aborting ...')")
    if saw_table and not headed:
        record.fragment = len(record.tests)
    record.overall = overall_of(record)
    return record


def _metadata(record: DcgmDiagRecord, label: str, value: str) -> None:
    key = label.lower()
    if key in _METADATA:
        setattr(record, _METADATA[key], value or None)
    elif key.startswith("gpu device ids"):
        record.gpu_device_ids = [v.strip() for v in value.split(",") if v.strip()]


def _is_status(result: str) -> bool:
    """Whether a result cell is phrased as a diagnostic's status (``Pass``, ``Fail - GPU: 1``, ``GPU0: Pass``)."""
    return bool(_PART.match(result) or ((m := _PER_GPU.match(result)) and normalize_status(m.group("status"))))


def _status_part(test: DcgmTest, result: str, first: bool = False) -> bool:
    """Fold one result fragment (``Pass - GPUs: 0, 2``, ``Fail - GPU: 1``, ``GPU0: Pass``) into ``test``.

    ``False`` when the fragment is not a status at all (damaged, or a format we do not know).
    """
    if m := _PER_GPU.match(result):
        status = normalize_status(m.group("status"))
        if status == "fail" and _headline(test) == "warn":
            status = "warn"  # 4.x prints a warned entity "Fail" under its test's "Warn" (no entity of it failed)
        if status and m.group("group").upper() == "GPU":
            test.gpu_status[m.group("id")] = status
            _fold(test, status, [int(m.group("id"))])
        elif status:
            _fold(test, status, [])
        return status is not None
    m = _PART.match(result)
    if m is None:
        if first:  # a result DCGM did not phrase as a status: not a pass
            test.status = "fail"
            test.messages.append(result)
        return first
    status = normalize_status(m.group("status")) or "fail"
    scope = m.group("scope") or ""
    ids = [int(x) for x in re.findall(r"\d+", scope.split(":", 1)[1])] if ":" in scope else []
    for gpu in ids:
        test.gpu_status[str(gpu)] = status
    if first:
        test.status = status
    _fold(test, status, ids)
    return True


def _headline(test: DcgmTest) -> str | None:
    """The status of a test's own row, as printed (``Warn`` in 4.x's ``| targeted_power | Warn |``).

    4.x prints the test's result with its warnings (the worst of its entities') and each entity's without them:
    an entity that warned reads ``GPU0: Fail`` (dcgmi/Diag.cpp, HelperDisplayDiagResult's DDR_NO_DISPLAY_WARN), so
    under a ``Warn`` headline no entity failed.
    """
    m = _PART.match(test.rows[0][1]) if test.rows else None
    return normalize_status(m.group("status")) if m else None


def _fold(test: DcgmTest, status: str, ids: list[int]) -> None:
    """Combine a part into the test: the worse status wins, but skipped GPUs do not demote a pass."""
    if {test.status, status} != {"pass", "skip"}:
        test.status = worst_status([test.status, status])
    if status in ("fail", "warn"):
        test.gpus.extend(i for i in ids if i not in test.gpus)


def _join(chunks: list[str]) -> str:
    """Undo DCGM's hard wrap: every chunk but the last is exactly the printed cell content."""
    parts = [c[1:-2] if len(c) >= 3 and c.startswith(" ") and c.endswith("  ") else c.strip() for c in chunks]
    return ("".join(parts[:-1]) + parts[-1].rstrip()).strip() if parts else ""


def _attach(test: DcgmTest, label: str, text: str) -> None:
    kind = label.split(":")[0].strip().lower()
    if kind == "info":
        test.info.append(text)
        return
    test.messages.append(text)
    named = gpu_ids_in(label) or gpu_ids_in(text)
    if kind in ("warning", "error") and test.status in ("pass", "skip") and not test.gpus:
        test.status = "warn" if kind == "warning" else "fail"
    if not test.gpus:
        test.gpus.extend(named)
