"""``dcgmi stats`` rows pasted without their box header (issue 27, third DCGM batch).

People paste the part of ``dcgmi stats -v -j <job>`` that matters, after a ``...<snip>``: a section rule
(``+-----  Performance Stats  ---...``) and its rows, with no ``| GPU ID: <n> |`` box above them (DCGM#305,
tests/fixtures/field/dcgm). That is the tool's output, cut: read as a box of no known GPU, judged on what it
shows (a double-bit ECC count still FAILs), and incomplete since it ends before its Overall Health row. Inputs are
built here in dcgmi/ProcessStats.cpp's layout.
"""

from __future__ import annotations

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text

PERF = ("...<snip>\n"
        "+-----  Performance Stats  ----------+-----------------------------------------+\n"
        "| Energy Consumed (Joules)           | 10747                                   |\n"
        "| SM Clock (MHz)                     | Avg: 1980, Max: 1980, Min: 1980         |\n")
EVENTS = ("+-----  Event Stats  ----------------+-----------------------------------------+\n"
          "| Single Bit ECC Errors              | 0                                       |\n"
          "| Double Bit ECC Errors              | 2                                       |\n")


def verdicts(text: str) -> set[tuple[str, Status, str]]:
    return {(f.check_id, f.status, f.code) for f in judge_text(text, Config(), source="n1")}


def test_a_section_pasted_without_its_box_is_a_cut_stats_box_of_no_known_gpu() -> None:
    assert detect_kind(PERF) == "dcgmi-stats"
    _kind, record = parse_text(PERF, "dcgmi-stats")
    (box,) = record.gpus
    assert box.fragment and box.gpu is None and box.rows["Energy Consumed (Joules)"] == "10747"
    assert record.incomplete and "without their box header" in record.incomplete[0]
    assert ("evidence.complete", Status.ERROR, "incomplete") in verdicts(PERF)
    assert Status.worst(s for _, s, _ in verdicts(PERF)) is Status.ERROR  # never a pass on a count it did not see


def test_the_rows_it_shows_are_still_judged() -> None:
    assert ("dcgm.health", Status.FAIL, "health_failure") in verdicts(PERF + EVENTS)


def test_a_lone_section_rule_is_not_enough() -> None:
    assert detect_kind("+-----  Performance Stats  ----------+------------------+\n") != "dcgmi-stats"
