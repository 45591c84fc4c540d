"""Each completeness rule of the nccl-tests parser, caught by in-repository fixtures alone.

Issue 27: letting a log without its summary lines count as complete passed every in-repository
test and was caught only by a corpus file under ../shared. These tests need no corpus: one real,
complete output (``fixtures/nccl_completeness/``, provenance there) is cut the way real pastes and
dying runs cut it, and each rule must turn the cut into an ``incomplete`` entry (judged ERROR on
``evidence.complete``, never exit 0) or a parse error, while the uncut text stays complete.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from gpu_preflight.cli.main import main
from gpu_preflight.parsers.errors import ParseError
from gpu_preflight.parsers.nccl_tests import parse

COMPLETE = (Path(__file__).parent / "fixtures" / "nccl_completeness" /
            "all_reduce-gb200-2racks-complete.txt").read_text(encoding="utf-8")
LINES = COMPLETE.splitlines()
ROWS = [i for i, line in enumerate(LINES) if line[:1] == " " and line.split()[0].isdigit()]
SUMMARY = next(i for i, line in enumerate(LINES) if "Out of bounds values" in line)


def _judge(tmp_path: Path, text: str) -> tuple[int, dict[str, str]]:
    """``gpu-preflight judge FILE --kind nccl-tests --format json``: exit code and each check's worst status."""
    path = tmp_path / "run.txt"
    path.write_text(text, encoding="utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["judge", str(path), "--kind", "nccl-tests", "--format", "json"])
    statuses: dict[str, str] = {}
    order = ["PASS", "SKIP", "WARN", "FAIL", "ERROR"]
    for finding in json.loads(out.getvalue())["findings"]:
        old = statuses.get(finding["check_id"], "PASS")
        statuses[finding["check_id"]] = max(old, finding["status"], key=order.index)
    return code, statuses


def test_the_uncut_output_is_complete(tmp_path: Path) -> None:
    """The control: without it every test below could pass on a parser that calls everything incomplete."""
    record = parse(COMPLETE)
    assert record.incomplete == [] and record.out_of_bounds == 0 and record.rows_total == len(ROWS) == 6
    code, statuses = _judge(tmp_path, COMPLETE)
    assert "evidence.complete" not in statuses and statuses["nccl_tests.correctness"] == "PASS"
    assert code != 3


def test_no_summary_line_is_incomplete(tmp_path: Path) -> None:
    """Rule 1: a table without its ``Out of bounds values`` line was cut before the run finished."""
    cut = "\n".join(LINES[:SUMMARY]) + "\n"
    record = parse(cut)
    assert any("no 'Out of bounds values' summary line" in p for p in record.incomplete)
    code, statuses = _judge(tmp_path, cut)
    assert statuses["evidence.complete"] == "ERROR" and code != 0


def test_rows_after_the_last_summary_are_incomplete(tmp_path: Path) -> None:
    """Rule 2: a soak log whose last run was cut: rows after the last summary line."""
    second_run_cut = "\n".join(LINES + LINES[:ROWS[2] + 1]) + "\n"
    record = parse(second_run_cut)
    assert any("3 row(s) after the last 'Out of bounds values'" in p for p in record.incomplete)
    code, statuses = _judge(tmp_path, second_run_cut)
    assert statuses["evidence.complete"] == "ERROR" and code != 0


def test_two_complete_runs_are_complete() -> None:
    """The control of rule 2: a soak log of two finished runs is complete, its counts added."""
    record = parse("\n".join(LINES + LINES) + "\n")
    assert record.incomplete == [] and record.rows_total == 12 and record.out_of_bounds == 0


def test_an_unreadable_result_cell_is_incomplete(tmp_path: Path) -> None:
    """Rule 3: a damaged ``#wrong`` cell (here the last row's in-place count, replaced on purpose) must not
    read as "no count"."""
    last = LINES[ROWS[-1]]
    damaged = last[: last.rstrip().rfind(" ") + 1] + "0x?"
    text = "\n".join([*LINES[:ROWS[-1]], damaged, *LINES[ROWS[-1] + 1:]]) + "\n"
    record = parse(text)
    assert any("unreadable in-place wrong value '0x?'" in p for p in record.incomplete)
    code, statuses = _judge(tmp_path, text)
    assert statuses["evidence.complete"] == "ERROR" and code != 0


def test_a_summary_without_its_table_is_judged_on_it_and_incomplete(tmp_path: Path) -> None:
    """Rule 4: a summary alone shows no size and no bandwidth: read as a fragment (issue 27: judged on what it
    shows, its out-of-bounds verdict), listed as incomplete (ERROR on evidence.complete), never a PASS."""
    text = "\n".join(LINES[SUMMARY:]) + "\n"
    record = parse(text)
    assert not record.rows and record.out_of_bounds == 0
    assert record.incomplete[0].startswith("only the summary lines were shown")
    code, statuses = _judge(tmp_path, text)
    assert statuses["evidence.complete"] == "ERROR" and code != 0


def test_a_header_without_rows_is_cut_before_any_result(tmp_path: Path) -> None:
    """Rule 4b: a paste cut right after its column header is an nccl-tests run we read and could not judge
    (ERROR on evidence.complete, 'cut before any result'), not a text we do not know (nccl#583, nccl-tests#107)."""
    text = "\n".join(LINES[: ROWS[0]]) + "\n"
    record = parse(text)
    assert not record.rows and record.incomplete[0].endswith("cut before any result row")
    code, statuses = _judge(tmp_path, text)
    assert statuses["evidence.complete"] == "ERROR" and code != 0


def test_a_last_row_cut_mid_way_is_incomplete(tmp_path: Path) -> None:
    """Rule 5b: a paste that ends inside its last row (fewer cells than the header) was cut there: incomplete,
    the rows before it kept; the same short row with anything after it stays a parse error (rule 5)."""
    last = LINES[ROWS[-1]]
    text = "\n".join([*LINES[:ROWS[-1]], last.rsplit(None, 1)[0]]) + "\n"
    record = parse(text)
    assert record.rows_total == len(ROWS) - 1
    assert any("the last row was cut" in p for p in record.incomplete)
    code, statuses = _judge(tmp_path, text)
    assert statuses["evidence.complete"] == "ERROR" and code != 0
    with pytest.raises(ParseError, match="values where the header names"):
        parse(text + last + "\n")


def test_a_row_with_a_missing_cell_is_a_parse_error() -> None:
    """Rule 5: a row whose cell count differs from the header's (a line cut mid-way) names its line."""
    last = LINES[ROWS[-1]]
    text = "\n".join([*LINES[:ROWS[-1]], last.rsplit(None, 1)[0], *LINES[ROWS[-1] + 1:]]) + "\n"
    with pytest.raises(ParseError, match="values where the header names"):
        parse(text)
