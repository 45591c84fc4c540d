"""Rules issue 27's field corpus E taught the dcgmi readers and the DCGM judge (in-repository texts only).

* A ``dcgmi diag`` table ends at its closing border: a table printed after it by another
  command (the Slurm epilog's ``dcgmi stats -j``) is not read as diagnostic rows; a second
  run's table (its own ``Diagnostic | Result`` header) is.
* Test objects quoted out of a ``-j`` document without its ``"DCGM ... Diagnostic"`` root are
  recognised, judged as a fragment, and a quote ending with the ``,`` before the next object is
  marked cut (the run's other tests are not shown).
* A run whose hardware tests (level 2 and up) were all skipped WARNs: only the software checks
  ran, so its passes say nothing of the GPUs.
* DCGM 4.x ``-j`` prints each warning's ``error_severity`` level: a code the error table does not
  know (a newer DCGM's) is routed by that level, not by the generic fallback; a known code keeps
  the table's action; every level names an action word.
* dcgmi's own ``Error: ...`` answer when a run cannot start (an unknown test name, a
  heterogeneous group...) is recognised as a DCGM error record: nothing was measured (ERROR).
"""

from __future__ import annotations

import json
from pathlib import Path

from gpu_preflight.actions import DETAIL_KEY, Action
from gpu_preflight.checks.dcgm_errors import (
    FALLBACK,
    SEVERITY_ACTIONS,
    SEVERITY_LEVELS,
    dcgm_action,
    severity_action,
)
from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Finding, Status
from gpu_preflight.parsers.detect import detect_kind, parse_text

DCGM = Path(__file__).parent / "fixtures" / "field" / "dcgm"
SLURM_JOB = (DCGM / "uberprof-slurm-job-dcgm-2.x-r1-prolog-and-stats-pass.txt").read_text()
JSON_EXCERPT = (DCGM / "dcgm215-4.x-json-r4-diagnostic-test-excerpt-cut.txt").read_text()
ALL_SKIPPED = (DCGM / "slurmonaws-3.3.9-r3-rtxpro6000-two-tasks-all-hw-skipped.txt").read_text()
LEVEL_4 = (DCGM / "gcm-check-dcgmi-docstring-2.x-r4-blacklist-pass.txt").read_text()


def judged(text: str) -> list[Finding]:
    return judge_text(text, Config(), source="node-1")


def statuses(text: str) -> dict[str, set[Status]]:
    out: dict[str, set[Status]] = {}
    for f in judged(text):
        out.setdefault(f.check_id, set()).add(f.status)
    return out


def test_a_table_of_another_command_after_the_closing_border_is_not_read() -> None:
    # the epilog's `dcgmi stats -j` table ("| GPU ID: 0 |", "|-----  Execution Stats  ---") follows the diag table
    assert "| GPU ID: 0" in SLURM_JOB
    record = parse_text(SLURM_JOB)[1]
    assert [t.category for t in record.tests] == ["Deployment"] * 9
    assert not record.incomplete
    assert statuses(SLURM_JOB)["dcgm.diag"] == {Status.PASS}


def test_a_second_runs_table_with_its_own_header_is_still_read() -> None:
    one = LEVEL_4.split("\n", 1)[1]  # without the prompt line
    record = parse_text(one + "\n" + one)[1]
    assert len(record.tests) == 2 * len(parse_text(one)[1].tests)


def test_json_test_objects_without_the_root_are_a_fragment_and_a_trailing_comma_marks_them_cut() -> None:
    assert detect_kind(JSON_EXCERPT) == "dcgmi-diag"
    record = parse_text(JSON_EXCERPT)[1]
    assert record.format == "json-excerpt" and record.fragment == 1
    assert record.tests[0].name == "diagnostic" and record.tests[0].status == "pass"
    assert set(record.tests[0].gpu_status) == {str(i) for i in range(8)}
    assert any("other tests are not shown" in m for m in record.incomplete)
    result = statuses(JSON_EXCERPT)
    assert result["evidence.complete"] == {Status.ERROR} and result["evidence.fragment"] == {Status.SKIP}


def test_a_whole_json_test_object_without_a_trailing_comma_is_a_fragment_not_cut() -> None:
    whole = JSON_EXCERPT.rstrip().rstrip(",")
    record = parse_text(whole)[1]
    assert record.fragment == 1 and not record.incomplete


def test_a_run_whose_hardware_tests_were_all_skipped_warns() -> None:
    findings = [f for f in judged(ALL_SKIPPED) if f.check_id == "dcgm.diag"]
    warned = [f for f in findings if f.status is Status.WARN]
    assert len(warned) == 1 and warned[0].subject == "node-1"
    assert "Targeted Stress" in warned[0].details["skipped_tests"]
    assert DETAIL_KEY not in warned[0].details  # nothing measured: no action on the node, a rerun


def test_a_level_1_run_or_one_with_a_hardware_pass_does_not_warn() -> None:
    level_1 = "\n".join(line for line in LEVEL_4.splitlines()[1:16]) + "\n" + LEVEL_4.splitlines()[-1]
    assert {t.category for t in parse_text(level_1)[1].tests} == {"Deployment"}
    assert statuses(level_1)["dcgm.diag"] == {Status.PASS}
    memory = "| GPU Memory                | "
    one_pass = ALL_SKIPPED.replace(memory + "Skip - All", memory + "Pass - All", 1)
    assert Status.WARN not in statuses(one_pass)["dcgm.diag"]


def _doc(error_id: int, severity: int) -> str:
    warning = {"error_category": 11, "error_id": error_id, "error_severity": severity, "warning": "GPU 0 link fault"}
    result = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Fail", "warnings": [warning]}
    test = {"name": "nvbandwidth", "results": [result], "test_summary": {"status": "Fail"}}
    return json.dumps({"DCGM Diagnostic": {"test_categories": [{"category": "Integration", "tests": [test]}]},
                       "metadata": {"version": "4.9.0"}})


def _action(text: str) -> str | None:
    fails = [f for f in judged(text) if f.check_id == "dcgm.diag" and f.status is Status.FAIL]
    assert fails
    return fails[0].details.get(DETAIL_KEY)


def test_an_unknown_code_is_routed_by_the_severity_dcgm_printed() -> None:
    record = parse_text(_doc(999, 2))[1]
    assert record.tests[0].error_severities == {"999": 2}
    assert _action(_doc(999, 2)) == Action.ISOLATE_NODE.value  # ISOLATE, not the generic fail fallback
    assert _action(_doc(999, 6)) == Action.RESET_GPU.value
    assert _action(_doc(999, 1)) == Action.MONITOR.value
    assert FALLBACK["fail"] is Action.RESET_GPU  # what the unknown code got before


def test_a_known_code_keeps_the_tables_action_whatever_level_was_printed() -> None:
    # 15 NVSWITCH_FATAL_ERROR is ISOLATE in the table; an older release printing MONITOR does not weaken it
    assert _action(_doc(15, 1)) == Action.ISOLATE_NODE.value
    assert dcgm_action("fail", [999], [], {"999": 3}) is FALLBACK["fail"]  # UNKNOWN level says nothing


def test_every_severity_level_names_an_action_word() -> None:
    assert set(SEVERITY_LEVELS.values()) == set(SEVERITY_ACTIONS)
    assert severity_action(42) is None


def test_dcgmis_answer_that_a_run_cannot_start_is_a_dcgm_error() -> None:
    text = (DCGM / "dcgm67-3.x-diag-requested-test-not-found.txt").read_text()
    assert detect_kind(text) == "dcgmi-diag"
    record = parse_text(text)[1]
    assert record.overall == "error" and "was not found among possible test choices" in record.errors[0]
    assert statuses(text) == {"dcgm.diag": {Status.ERROR}}
    other = "Error: Diagnostic can only be performed on a homogeneous group of GPUs."
    assert detect_kind(other) == "dcgmi-diag"
    assert detect_kind("Error: file not found") is None
