"""The node report's network/dcgm/nccl sections, from a real node run with fake tools on PATH."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpu_preflight.engine import run_checks
from gpu_preflight.report.canonical import save_artifacts
from gpu_preflight.report.diagnostic_sections import dcgm_section, diagnostic_sections, nccl_section

from .conftest import REPO
from .diag_tools import replay

SPEC = REPO / "tests" / "fixtures" / "evidence" / "spec-dcgmi-diag-r3-targeted-power-fail.txt"


@pytest.fixture
def bindir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "bin"
    path.mkdir()
    monkeypatch.setenv("PATH", f"{path}:{os.environ['PATH']}")
    return path


def test_sections_of_a_node_run_reference_the_saved_raw_output(bindir: Path, tmp_path: Path, corpus: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gpu_preflight.backends.pci.nvidia_gpus", lambda root="": [])
    replay(bindir, "dcgmi", SPEC, rc=226)
    replay(bindir, "all_reduce_perf", corpus / "nccl-tests/hcdeep-all_reduce-gcp-a3-h100x8-single-node.txt")
    node = run_checks(include=["dcgm.*", "nccl_tests.*", "fabric.*"], report_dir=str(tmp_path / "out"))
    node.artifacts = save_artifacts(node, tmp_path / "out", "node_0")
    sections = diagnostic_sections(node.facts, node.artifacts)
    dcgm = sections["dcgm"]
    assert dcgm["dcgm_available"] is True and list(dcgm["diagnostics"]) == ["basic"]
    basic = dcgm["diagnostics"]["basic"]
    assert basic["success"] is True and basic["overall_status"] == "Fail" and basic["exit_code"] == 226
    assert basic["parsed_output"]["dcgm_version"] == "3.3.9" and basic["parsed_output"]["overall"] == "fail"
    ref = basic["raw_output_artifact"]
    assert ref == {"name": "dcgm_diag_r1", "file": "dcgmi_diag_r1.txt", "path": "artifacts/node_0/dcgmi_diag_r1.txt"}
    assert (tmp_path / "out" / ref["path"]).read_text() == SPEC.read_text()
    assert "Successfully ran diagnostic" not in json.dumps(sections)  # raw output referenced, never inlined
    nccl = sections["nccl"]
    assert nccl["nccl_tests_available"] is True and nccl["nccl_tests"] == {}
    assert "no NVIDIA GPU" in nccl["reason"]
    network = sections["network"]
    assert {"aws_ofi_nccl_plugin", "efa_available", "efa_providers", "efa_provider_count"} <= set(network)


def test_levels_2_and_3_fill_extended_and_local_runs_fill_nccl() -> None:
    facts = {
        "dcgm": {"available": True, "level": 2, "run": {"argv": ["dcgmi", "diag", "-r", "2", "-j"], "rc": 0,
                                                         "artifact": "dcgm_diag_r2", "artifact_file": "d.txt"},
                 "record": {"dcgm_version": "4.4.1", "overall": "pass", "tests": []}},
        "nccl_tests": {"available": True, "gpus": 8, "runs": [{
            "name": "all_reduce_perf", "run": {"argv": ["all_reduce_perf", "-g", "8"], "rc": 0},
            "record": {"test": "all_reduce_perf", "nranks": 8, "avg_busbw_gbps": 145.47, "peak_busbw_gbps": 479.93,
                       "wrong_total": 0, "errors": []}}]},
    }
    dcgm = dcgm_section(facts)
    assert list(dcgm["diagnostics"]) == ["extended"]
    assert dcgm["diagnostics"]["extended"]["overall_status"] == "Pass"
    assert dcgm["diagnostics"]["extended"]["raw_output_artifact"] == {"name": "dcgm_diag_r2", "file": "d.txt",
                                                                      "path": None}
    nccl = nccl_section(facts)
    assert nccl["nccl_tests_available"] is True
    assert nccl["nccl_tests"]["all_reduce_perf"]["success"] is True
    assert nccl["nccl_tests"]["all_reduce_perf"]["peak_busbw_gbps"] == 479.93


def test_absent_tools_give_false_availability_with_reasons() -> None:
    facts = {"dcgm": {"available": False, "level": 1, "reason": "dcgmi not found (looked in PATH)"},
             "nccl_tests": {"available": False, "reason": "no nccl-tests binary found", "runs": []},
             "fabric": {"provider": "efa", "fi_info": None, "plugin": {"installed": False, "path": None}}}
    sections = diagnostic_sections(facts)
    assert sections["dcgm"] == {"dcgm_available": False, "diagnostics": {},
                                "reason": "dcgmi not found (looked in PATH)"}
    assert sections["nccl"]["nccl_tests_available"] is False
    assert sections["network"]["efa_available"] is False and sections["network"]["fi_info"] is None


def test_pingpong_results_become_the_efa_communication_test() -> None:
    pingpong = [{"test_role": "server", "provider": "efa", "success": True, "raw_output": "bytes #sent ...\n",
                 "pair": 0, "peer_node": 1}]
    section = diagnostic_sections({}, pingpong=pingpong)["network"]
    test = section["efa_communication_test"]
    assert (test["success"], test["test_role"], test["raw_output"]) == (True, "server", "bytes #sent ...\n")


def test_a_node_without_any_tool_skips_every_diagnostic_with_a_reason(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    node = run_checks(include=["diagnostics"], kernel_log=str(tmp_path / "absent.log"))
    found = {f.check_id: f for f in node.findings}
    assert set(found) == {"dcgm.diag", "nccl_tests.correctness", "nccl_tests.bandwidth", "fabric.fi_info",
                          "fabric.efa", "ib.ports", "ib.counters", "pcie.lnksta", "pcie.limited_by"}
    assert {f.status.value for f in node.findings} == {"SKIP"}
    assert all(len(f.summary) > 20 for f in node.findings), [f.summary for f in node.findings]
