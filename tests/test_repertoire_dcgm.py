"""dcgmi diag forms derived from DCGM's own source (issue 27): tests/fixtures/repertoire/dcgm/PROVENANCE.md.

Each fixture is rendered from dcgmi's format strings at NVIDIA/DCGM v4.6.0; docs/repertoire/dcgm.md lists every
form and the test that covers it.
"""

from __future__ import annotations

from pathlib import Path

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.dcgmi import parse
from gpu_preflight.parsers.dcgmi import sniff as sniff_diag

FIXTURES = Path(__file__).parent / "fixtures" / "repertoire" / "dcgm"


def _text(name: str) -> str:
    return (FIXTURES / name).read_text()


def _verdicts(name: str) -> list[tuple[str, Status]]:
    return [(f.check_id, f.status) for f in judge_text(_text(name), Config(), source="n1")
            if f.status != Status.PASS]


def test_4x_cpu_entity_rows_are_read_and_a_passing_cpu_eud_run_passes() -> None:
    """4.x prints each entity's result as '<group><id>: <result>': 'CPU0: Pass' was an unreadable result (ERROR)."""
    record = parse(_text("diag-4.x-table-cpu-eud-pass.txt"))
    assert record.incomplete == []
    assert [(t.name, t.status, t.gpu_status) for t in record.tests] == [
        ("software", "pass", {"0": "pass"}), ("cpu_eud", "pass", {})]
    assert _verdicts("diag-4.x-table-cpu-eud-pass.txt") == []


def test_4x_failed_cpu_entity_fails_its_test_without_naming_a_gpu() -> None:
    record = parse(_text("diag-4.x-table-cpu-eud-fail.txt"))
    cpu = record.tests[1]
    assert (cpu.name, cpu.status, cpu.gpus, cpu.gpu_status) == ("cpu_eud", "fail", [], {})
    assert cpu.messages == ["CPU EUD test failed with exit code 1 on CPU 1."]
    assert record.incomplete == []
    assert _verdicts("diag-4.x-table-cpu-eud-fail.txt") == [("dcgm.diag", Status.FAIL)]


def test_4x_warned_entity_printed_fail_under_a_warn_test_is_a_warning() -> None:
    """Under a 'Warn' test row the entity that warned prints 'Fail' (no entity of a WARN test failed)."""
    record = parse(_text("diag-4.x-table-warn-entity-printed-fail.txt"))
    power = record.tests[1]
    assert (power.name, power.status, power.gpus, power.gpu_status) == (
        "targeted_power", "warn", [1], {"0": "pass", "1": "warn"})
    assert _verdicts("diag-4.x-table-warn-entity-printed-fail.txt") == [("dcgm.diag", Status.WARN)]


def test_json_iterations_aborted_is_an_error_not_a_cut_document() -> None:
    record = parse(_text("diag-4.x-json-iterations-aborted.json"))
    assert record.format == "json-4-iterations"
    assert record.incomplete == []
    assert [(t.name, t.status) for t in record.tests] == [("memory", "pass"), ("memory", "pass")]
    assert record.errors == ["the iterative runs stopped (Overall Result Fail): "
                             "Host engine connection invalid/disconnected"]
    assert _verdicts("diag-4.x-json-iterations-aborted.json") == [("dcgm.diag", Status.ERROR)]


def test_json_iterations_that_all_ran_are_judged_on_every_run() -> None:
    """'Overall Result: Pass' says every run ran; the second run's double-bit error still fails."""
    record = parse(_text("diag-4.x-json-iterations-ran-test-failed.json"))
    assert (record.errors, record.incomplete, record.overall) == ([], [], "fail")
    assert record.tests[1].gpus == [0]
    assert _verdicts("diag-4.x-json-iterations-ran-test-failed.json") == [("dcgm.diag", Status.FAIL)]


def test_text_iterations_all_passed() -> None:
    record = parse(_text("diag-text-iterations-passed-all.txt"))
    assert (len(record.tests), record.errors, record.incomplete) == (2, [], [])
    assert _verdicts("diag-text-iterations-passed-all.txt") == []


def test_text_iterations_aborted_after_a_passing_run_is_an_error() -> None:
    """The passing first table was judged PASS; the loop's abort line says the other runs never happened."""
    text = _text("diag-text-iterations-aborted-after-a-pass.txt")
    record = parse(text)
    assert record.errors == ["Aborting the iterative runs of the diagnostic due to failure: "
                             "Host engine connection invalid/disconnected"]
    assert _verdicts("diag-text-iterations-aborted-after-a-pass.txt") == [("dcgm.diag", Status.ERROR)]


def test_the_abort_line_alone_is_dcgmi_diag() -> None:
    text = ("\nRunning iteration 2 of 3...\n"
            "Aborting the iterative runs of the diagnostic due to failure: Generic unspecified error\n")
    assert sniff_diag(text) >= 90
    assert [(f.check_id, f.status) for f in judge_text(text, Config(), source="n1")] == [("dcgm.diag", Status.ERROR)]


def test_health_nvswitch_incident_under_the_internal_error_system_is_read() -> None:
    """DCGM names the NvSwitch watches' system 'Internal error'; the incident (which switch, which link) was dropped."""
    for name in ("health-c-switch-nvswitch-fatal-internal-error-system.txt",
                 "health-c-j-switch-nvswitch-fatal-internal-error-system.json"):
        findings = judge_text(_text(name), Config(), source="n1")
        assert [(f.check_id, f.status, f.summary) for f in findings if f.subject.endswith("switch0")] == [
            ("dcgm.health", Status.FAIL,
             "Switch 0 Internal error: Failure: Detected fatal errors on NvSwitch 0 link 12")]


def test_health_watches_report_is_no_health() -> None:
    """`dcgmi health -f` lists which watches are on: read, and no health (ERROR), as 'set successfully' is."""
    findings = judge_text(_text("health-f-watches-report.txt"), Config(), source="n1")
    assert [(f.check_id, f.status) for f in findings] == [("dcgm.health", Status.ERROR)]


def test_dmon_4_6_link_rows_are_the_links_not_their_gpu() -> None:
    """'GPU 0 LINK 3' was read as GPU 0 with the link id as its first value; 'SW 0 LINK 12' was dropped."""
    from gpu_preflight.parsers.dcgmi.dmon import parse as parse_dmon

    record = parse_dmon(_text("dmon-4.6-link-rows-named-by-owner.txt"))
    assert [(s.entity, s.index, s.values) for s in record.samples[:4]] == [
        ("GPU", 0, {"TMPTR": 31.0, "SWNVLNKST": None}), ("GPU", 1, {"TMPTR": 33.0, "SWNVLNKST": None}),
        ("GPU 0 LINK", 3, {"TMPTR": None, "SWNVLNKST": None}), ("SW 0 LINK", 12, {"TMPTR": None, "SWNVLNKST": 1.0})]


def test_diag_telemetry_listener_failure_is_a_run_that_could_not_happen() -> None:
    """dcgmi diag's 'Err: Can't listen ...' (its own listener failed, the run stops) was unrecognised."""
    findings = judge_text(_text("diag-err-telemetry-listener.txt"), Config(), source="n1")
    assert [(f.check_id, f.status) for f in findings] == [("dcgm.diag", Status.ERROR)]


def test_text_iterations_cut_inside_the_loop_is_incomplete() -> None:
    """Run 1 of 3 passed and the paste stops: the two other runs are not shown (it was PASS)."""
    record = parse(_text("diag-text-iterations-cut-after-run-1-of-3.txt"))
    assert record.incomplete == ["the output stops in run 1 of the 3 iterations asked for, before dcgmi's closing "
                                 "line ('Passed all ...' or 'Aborting ...')"]
    assert _verdicts("diag-text-iterations-cut-after-run-1-of-3.txt") == [("evidence.complete", Status.ERROR)]


def test_exporter_4x_slog_fatal_exit_is_an_error() -> None:
    """4.x logs through log/slog: a fatal exit is an ERROR line the exporter always exits after (was unrecognised)."""
    for name in ("exporter-4.x-slog-text-collector-cannot-be-initialized.txt",
                 "exporter-4.x-slog-json-fields-module-init-failed.txt"):
        findings = judge_text(_text(name), Config(), source="n1")
        assert [(f.check_id, f.status) for f in findings] == [("dcgm.diag", Status.ERROR)], name
        assert "dcgm-exporter stopped: " in findings[0].summary


def test_exporter_4x_error_it_survives_is_not_a_fatal_exit() -> None:
    assert sniff_diag(_text("exporter-4.x-slog-text-error-not-fatal.txt")) == 0
