"""dcgmi diag: the text tables of the corpus and the spec, and both JSON layouts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_preflight.parsers.dcgmi import parse
from gpu_preflight.parsers.dcgmi.json_report import parse_json
from gpu_preflight.parsers.dcgmi.table import parse_table
from gpu_preflight.parsers.errors import ParseError

from .evidence_facts import check_facts, parsed

FIXTURES = Path(__file__).parent / "fixtures" / "evidence"
SPEC_WARNING = ("GPU 1 Max power of 224.1 did not reach desired power minimum target_power_min_ratio of 224.2 "
                "for GPU 1 Verify that the clock speeds and GPU utilization are high.")
DEPLOYMENT = ["Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks", "Persistence Mode",
              "Environment Variables", "Page Retirement/Row Remap", "Graphics Processes", "Inforom"]


def test_awsome_3_3_3_pass(corpus: Path) -> None:
    data = parsed(corpus, "dcgm/awsome-dcgmi-diag-r2-3.3.3-p4de-a100-pass.txt")
    check_facts(data, {"format": "text", "dcgm_version": "3.3.3", "driver_version": "535.104.12",
                       "overall": "pass", "errors": []})
    assert data["gpu_device_ids"] == ["20b2"] * 8
    assert [(t["category"], t["name"], t["status"]) for t in data["tests"]] == [
        *(("Deployment", n, "pass") for n in DEPLOYMENT), ("Integration", "PCIe", "pass"),
        ("Hardware", "GPU Memory", "pass")]


def test_issue254_4_4_1_pcie_fail_with_wrapped_warning(corpus: Path) -> None:
    data = parsed(corpus, "dcgm/dcgm-issue254-dcgmi-diag-r2-4.4.1-v100-pcie-fail-excerpt.txt")
    check_facts(data, {"dcgm_version": "4.4.1", "driver_version": "580.65.06", "overall": "fail",
                       "tests.0.category": "Integration", "tests.0.name": "pcie", "tests.0.status": "fail"})
    assert data["gpu_device_ids"] == ["1db1"] * 4
    assert data["tests"][0]["messages"] == [
        "There was an internal error during the test: 'A child process (2378806) exited with non-zero status 1' "
        "Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics."]


@pytest.mark.parametrize(("name", "entities", "plugin_dir"), [
    ("dcgm-issue254-dcgmi-diag-r3-4.4.1-cuda12-plugins-missing.txt", "0,1,2,3", "cuda12"),
    ("hcdeep-dcgmi-diag-r3-4.4.0-plugin-load-error.txt", "*,cpu:*", "cuda13"),
])
def test_tool_errors_are_an_error_record(corpus: Path, name: str, entities: str, plugin_dir: str) -> None:
    data = parsed(corpus, f"dcgm/{name}")
    check_facts(data, {"overall": "error", "return_code": -30, "tests": []})
    assert f"entities {entities}." in data["errors"][0]
    assert f"/plugins/{plugin_dir}/" in data["errors"][1]


def test_legacy_blacklist_table_without_closing_border(corpus: Path) -> None:
    data = parsed(corpus, "dcgm/deepops-dcgmi-diag-r1-legacy-blacklist-pass.txt")
    names = [t["name"] for t in data["tests"]]
    assert names[0] == "Blacklist" and "Page Retirement" in names and len(names) == 9
    assert data["overall"] == "pass" and data["dcgm_version"] is None


def test_stas00_orphan_error_row_names_gpu_3(corpus: Path) -> None:
    data = parsed(corpus, "dcgm/stas00-dcgmi-diag-deployment-row-remap-error-excerpt.txt")
    test = data["tests"][0]
    assert (test["category"], test["status"], test["gpus"]) == ("Deployment", "fail", [3])
    assert test["messages"] == ["GPU 3 has uncorrectable memory errors and row remappings are pending"]


def test_spec_targeted_power_failure_on_gpu_1() -> None:
    record = parse((FIXTURES / "spec-dcgmi-diag-r3-targeted-power-fail.txt").read_text())
    assert (record.dcgm_version, record.driver_version, record.overall) == ("3.3.9", "570.195.03", "fail")
    power = next(t for t in record.tests if t.name == "Targeted Power")
    assert (power.category, power.status, power.gpus) == ("Stress", "fail", [1])
    assert power.gpu_status == {"0": "pass", "2": "pass", "3": "pass", "1": "fail"}
    assert power.messages == [SPEC_WARNING]
    assert power.info[0] == "GPU 0 GPU 0 max power: 299.5 W average power usage: 299.0 W"
    assert next(t for t in record.tests if t.name == "EUD Test").status == "skip"
    assert [t.name for t in record.tests if t.status == "fail"] == ["Targeted Power"]


def test_json_3x_layout() -> None:
    record = parse((FIXTURES / "dcgmi-diag-3.x-fail.json").read_text())
    assert (record.format, record.dcgm_version, record.driver_version) == ("json-3", "3.3.9", "570.195.03")
    assert record.gpu_device_ids == ["2330", "2330"]
    memory = next(t for t in record.tests if t.name == "GPU Memory")
    assert (memory.status, memory.gpus, memory.error_ids) == ("fail", [1], [83])
    assert memory.messages[0] == "GPU 1 had uncorrectable memory errors and row remapping failed."
    power = next(t for t in record.tests if t.name == "Targeted Power")
    assert (power.status, power.gpu_status) == ("pass", {"0": "pass", "1": "skip"})
    assert len(record.tests) == 4 and record.overall == "fail"  # the null hole is skipped


def test_json_4x_layout() -> None:
    record = parse((FIXTURES / "dcgmi-diag-4.x-fail.json").read_text())
    assert (record.format, record.dcgm_version, record.driver_version) == ("json-4", "4.4.1", "580.65.06")
    assert record.gpu_device_ids == ["2330", "2330"]
    pcie = next(t for t in record.tests if t.name == "pcie")
    assert (pcie.category, pcie.status, pcie.gpus, pcie.error_ids) == ("Integration", "fail", [1], [28])
    assert pcie.info == ["GPU to Host bandwidth: 24.8 GB/s"]
    assert next(t for t in record.tests if t.name == "memory").status == "skip"


def test_json_runtime_error_without_tests() -> None:
    doc = {"DCGM GPU Diagnostic": {"version": "3.3.9", "runtime_error": "Couldn't find the ubergemm executable",
                                   "error_code": 5}}
    record = parse_json(json.dumps(doc))
    assert (record.overall, record.errors, record.return_code) == ("error", ["Couldn't find the ubergemm executable"],
                                                                   5)


def test_table_per_gpu_sub_rows_of_4x() -> None:
    text = "\n".join([
        "+---------------------------+------------------------------------------------+",
        "| Diagnostic                | Result                                         |",
        "+===========================+================================================+",
        "+-----  Hardware  ----------+------------------------------------------------+",
        "| memory                    | Fail                                           |",
        "|                           | GPU0: Pass                                     |",
        "|                           | GPU1: Fail                                     |",
        "| Warning: GPU1             | GPU 1 DBE errors detected                      |",
        "+---------------------------+------------------------------------------------+",
    ])
    test = parse_table(text).tests[0]
    assert (test.status, test.gpus, test.gpu_status) == ("fail", [1], {"0": "pass", "1": "fail"})
    assert test.messages == ["GPU 1 DBE errors detected"]


@pytest.mark.parametrize(("text", "message"), [
    ("nothing to see\n", "no dcgmi diag result table"),
    ("| a |\n", "without a label and a result cell"),
    ('{"DCGM GPU Diagnostic": {"test_categories": 5}}', "expected a list"),
    ('{"DCGM GPU Diagnostic": {"test_categories": [{"tests": [{"results": []}]}]}}', "without a name"),
    ('{"other": 1}', "no 'DCGM Diagnostic'"),
    ('{"DCGM Diagnostic": {"test_categories": [', "malformed JSON"),
    ('{"DCGM Diagnostic": 5}', "is a int, expected an object"),
    ('{"DCGM Diagnostic": {}}', "neither tests nor a runtime error"),
])
def test_malformed_dcgm_is_a_parse_error(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse(text)
