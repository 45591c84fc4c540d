"""The node report's network/dcgm/nccl sections, from a real node run with fake tools on PATH."""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec
import pytest

from gpu_preflight.engine import run_checks
from gpu_preflight.findings.canonical import node_section, save_artifacts
from gpu_preflight.findings.diagnostic_sections import (
    communication_test,
    dcgm_section,
    diagnostic_sections,
    fill_artifact_paths,
    nccl_section,
)
from gpu_preflight.findings.model import DcgmSection, NodeSections

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
    unsaved = diagnostic_sections(node.facts, node.artifacts).to_dict()  # the blocks as written
    assert unsaved["dcgm"]["diagnostics"]["basic"]["raw_output_artifact"]["path"] is None
    assert unsaved["dcgm"]["diagnostics"]["basic"]["raw_output"] == ""  # no raw outputs given: nothing inline
    built = node_section(node)  # the node's section as built before its raw outputs were saved
    node.artifacts = save_artifacts(node, tmp_path / "out", "node_0")
    filled = fill_artifact_paths(NodeSections({"node_0": built}), node.artifacts)  # what write does then
    saved = filled["node_0"].to_dict()
    assert saved["dcgm"]["diagnostics"]["basic"]["raw_output_artifact"]["path"] == "artifacts/node_0/dcgmi_diag_r1.txt"
    before = built.to_dict()  # a new value: the built section still has no path, and differs only by the paths
    assert before["dcgm"]["diagnostics"]["basic"]["raw_output_artifact"]["path"] is None
    for name, run in saved["nccl"]["nccl_tests"].items():
        ref = before["nccl"]["nccl_tests"][name]["raw_output_artifact"]
        ref["path"] = run["raw_output_artifact"]["path"]
        assert ref["path"] == f"artifacts/node_0/{ref['file']}"
    before["dcgm"]["diagnostics"]["basic"]["raw_output_artifact"]["path"] = "artifacts/node_0/dcgmi_diag_r1.txt"
    if before["network"]["fi_info"] and before["network"]["fi_info"]["raw_output_artifact"]:
        before["network"]["fi_info"]["raw_output_artifact"] = saved["network"]["fi_info"]["raw_output_artifact"]
    assert json.dumps(saved) == json.dumps(before)
    assert fill_artifact_paths(NodeSections({"node_0": filled["node_0"]}), node.artifacts) == {}  # nothing left
    sections = diagnostic_sections(node.facts, node.artifacts).to_dict()
    dcgm = sections["dcgm"]
    assert dcgm["dcgm_available"] is True and list(dcgm["diagnostics"]) == ["basic"]
    basic = dcgm["diagnostics"]["basic"]
    assert basic["success"] is True and basic["overall_status"] == "Fail" and basic["exit_code"] == 226
    assert basic["parsed_output"]["dcgm_version"] == "3.3.9" and basic["parsed_output"]["overall"] == "fail"
    ref = basic["raw_output_artifact"]
    assert ref == {"name": "dcgm_diag_r1", "file": "dcgmi_diag_r1.txt", "path": "artifacts/node_0/dcgmi_diag_r1.txt"}
    assert (tmp_path / "out" / ref["path"]).read_text() == SPEC.read_text()
    assert "Successfully ran diagnostic" not in json.dumps(sections)  # referenced; inlined only from raw outputs
    inline = diagnostic_sections(node.facts, node.artifacts, raw=node.raw_artifacts).dcgm.diagnostics.basic
    assert inline is not None
    assert inline.raw_output == inline.stdout == SPEC.read_text() and inline.raw_output_truncated is False
    hidden = diagnostic_sections(node.facts, node.artifacts, raw=node.raw_artifacts, inline=False)
    hidden_basic = hidden.dcgm.diagnostics.basic
    assert hidden_basic is not None and hidden_basic.raw_output == ""  # large clusters: the artifact has it
    nccl = sections["nccl"]
    assert nccl["nccl_tests_available"] is True and nccl["nccl_tests"] == {} and nccl["communication_tests"] == {}
    assert "no NVIDIA GPU" in nccl["reason"]
    network = sections["network"]
    assert {"aws_ofi_nccl_plugin", "efa_available", "efa_providers", "efa_provider_count"} <= set(network)


def test_levels_2_and_3_fill_extended_and_local_runs_fill_nccl() -> None:
    facts = {
        "dcgm": {"available": True, "level": 2, "run": {"argv": ["dcgmi", "diag", "-r", "2", "-j"], "rc": 0,
                                                         "artifact": "dcgm_diag_r2", "artifact_file": "d.txt"},
                 "record": {"format": "json", "dcgm_version": "4.4.1", "overall": "pass", "tests": [],
                            "gpu_device_ids": ["2330"]}},
        "nccl_tests": {"available": True, "gpus": 8, "runs": [{
            "name": "all_reduce_perf", "run": {"argv": ["all_reduce_perf", "-g", "8"], "rc": 0},
            "record": {"test": "all_reduce_perf", "nranks": 8, "avg_busbw_gbps": 145.47, "peak_busbw_gbps": 479.93,
                       "wrong_total": 0, "errors": []}}]},
    }
    dcgm = dcgm_section(facts).to_dict()
    assert list(dcgm["diagnostics"]) == ["extended"]
    assert dcgm["diagnostics"]["extended"]["parsed_output"]["gpu_device_id_list"] == ["2330"]
    assert dcgm["diagnostics"]["extended"]["overall_status"] == "Pass"
    assert dcgm["diagnostics"]["extended"]["raw_output_artifact"] == {"name": "dcgm_diag_r2", "file": "d.txt",
                                                                      "path": None}
    nccl = nccl_section(facts).to_dict()
    assert nccl["nccl_tests_available"] is True
    assert nccl["nccl_tests"]["all_reduce_perf"]["success"] is True
    assert nccl["nccl_tests"]["all_reduce_perf"]["peak_busbw_gbps"] == 479.93


def test_absent_tools_give_false_availability_with_reasons() -> None:
    facts = {"dcgm": {"available": False, "level": 1, "reason": "dcgmi not found (looked in PATH)"},
             "nccl_tests": {"available": False, "reason": "no nccl-tests binary found", "runs": []},
             "fabric": {"provider": "efa", "fi_info": None, "plugin": {"installed": False, "path": None}}}
    sections = diagnostic_sections(facts).to_dict()
    assert sections["dcgm"] == {"dcgm_available": False, "diagnostics": {},
                                "reason": "dcgmi not found (looked in PATH)"}
    assert sections["nccl"]["nccl_tests_available"] is False
    assert sections["network"]["efa_available"] is False and sections["network"]["fi_info"] is None


def test_pingpong_results_become_the_efa_communication_test() -> None:
    pingpong = [{"test_role": "server", "provider": "efa", "success": True, "raw_output": "bytes #sent ...\n",
                 "pair": 0, "peer_node": 1}]
    test = diagnostic_sections({}, pingpong=pingpong).network.efa_communication_test
    assert test is not None
    assert (test.success, test.test_role, test.raw_output) == (True, "server", "bytes #sent ...\n")
    assert communication_test(pingpong, 4).rank == 4


def test_pingpong_pairs_are_typed_and_written_as_recorded() -> None:
    """A run's record (a server's null peer and error kept as nulls) and a side that never ran (its
    server published no address: the keys of a run left out) read typed and write back the same
    JSON text; a record that is not one is refused with its place."""
    server = {"test_role": "server", "peer": None, "provider": "efa", "endpoint": "rdm", "port": 47592,
              "argv": ["fi_pingpong", "-p", "efa"], "rc": 0, "timed_out": False, "missing": False,
              "provider_missing": False, "attempts": 1, "duration_s": 1.234, "success": True, "error": None,
              "raw_output": "bytes #sent ...\n", "pair": 0, "peer_node": 1}
    unrun = {"test_role": "client", "provider": "efa", "rc": None, "timed_out": True, "success": False,
             "error": "node 3 published no address within 60 s", "raw_output": "", "pair": 1, "peer_node": 3}
    test = communication_test([server, unrun], 8)
    assert test.success is False and test.pairs[0].peer is None and test.pairs[1].port is msgspec.UNSET
    assert json.dumps(test.to_dict()["pairs"]) == json.dumps([server, unrun])
    with pytest.raises(msgspec.ValidationError, match=r"\[1\].pair"):
        communication_test([server, {**unrun, "pair": "1"}])


def test_a_full_run_keeps_both_levels_and_says_why_one_did_not_run() -> None:
    run = {"argv": ["dcgmi", "diag", "-r", "1", "-j"], "rc": 0, "artifact": "dcgm_diag_r1"}
    basic = {"available": True, "level": 1, "run": run, "record": {"format": "json", "overall": "pass", "tests": [
        {"category": "Deployment", "name": "Denylist", "status": "pass", "gpu_status": {}},
        {"category": "Stress", "name": "Targeted Power", "status": "fail",
         "gpu_status": {"0": "pass", "1": "fail", "2": "pass"}},
        {"category": "Hardware", "name": "GPU Memory", "status": "pass", "gpu_status": {"0": "pass", "1": "pass"}}]}}
    both = dcgm_section({"dcgm": {"available": True, "level": 2, "run": {**run, "artifact": "dcgm_diag_r2"},
                                  "record": {"format": "json", "overall": "pass", "tests": []},
                                  "basic": basic}}).to_dict()
    assert list(both["diagnostics"]) == ["basic", "extended"] and "reason" not in both
    assert both["diagnostics"]["basic"]["parsed_output"]["test_results"] == {
        "deployment": {"Denylist": "Pass"}, "stress": {"Targeted Power": "Pass - GPUs: 0, 2; Fail - GPU: 1"},
        "hardware": {"GPU Memory": "Pass - All"}}
    refused = dcgm_section({"dcgm": {"available": True, "level": 2, "reason": "level 2 stresses the GPUs",
                                     "basic": basic}}).to_dict()
    assert list(refused["diagnostics"]) == ["basic"] and refused["reason"] == "level 2 stresses the GPUs"
    # parsed_output is typed (the parser's record and the SageMaker keys) and reads back as it was written
    typed = DcgmSection.from_dict(both).diagnostics.basic
    assert typed is not None and typed.parsed_output is not None
    parsed = typed.parsed_output
    assert parsed.tests[1].gpu_status == {"0": "pass", "1": "fail", "2": "pass"} and parsed.overall_status == "Mixed"
    assert json.dumps(DcgmSection.from_dict(both).to_dict()) == json.dumps(both)
    both["diagnostics"]["basic"]["parsed_output"]["tests"][0]["status"] = 1
    with pytest.raises(msgspec.ValidationError, match=r"parsed_output.tests\[0\].status"):
        DcgmSection.from_dict(both)


def test_a_node_without_any_tool_skips_every_diagnostic_with_a_reason(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    node = run_checks(include=["diagnostics"], kernel_log=str(tmp_path / "absent.log"))
    found = {f.check_id: f for f in node.findings}
    assert set(found) == {"dcgm.diag", "nccl_tests.correctness", "nccl_tests.bandwidth", "fabric.fi_info",
                          "fabric.efa", "ib.ports", "ib.counters", "pcie.lnksta", "pcie.limited_by"}
    assert {f.status.value for f in node.findings} == {"SKIP"}
    assert all(len(f.summary) > 20 for f in node.findings), [f.summary for f in node.findings]
