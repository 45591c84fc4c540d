"""Operator actions (issue 27): one value per finding and per node that a scheduler hook routes on.

* boundary tables per mapping: each check at, just past and just short of the threshold that
  names an action (the edge gives the action, the side that passes names none);
* DCGM: the action from DCGM's own codes (JSON ``error_id``) and from a table's message texts,
  older wordings included, with the fallback by test result;
* the rule that applies the tables (``registry.stamp_actions``) and the one that takes a
  node's strongest (``actions.node_action``);
* end to end: a node with a pending row remap, a hot GPU and a failed DCGM test gets one action
  in report.json, in the Slurm drain reason and in the Kubernetes label;
* docs/checks.md's table lists exactly the registered tables.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

import gpu_preflight
from gpu_preflight.actions import DETAIL_KEY, Action, action_of, node_action, strongest
from gpu_preflight.checks.dcgm_errors import DCGM_ERRORS, OVERRIDES, SEVERITY_ACTIONS, code_action, dcgm_action
from gpu_preflight.checks.evidence import judge_record
from gpu_preflight.config import Config
from gpu_preflight.config.slurm_schema import SlurmConfig
from gpu_preflight.findings.canonical import build_report
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.integrations.k8s import ACTION_LABEL, kubectl_commands, plan
from gpu_preflight.integrations.slurm import drain_reason
from gpu_preflight.integrations.slurm_result import judge, node_results, parse_timestamp
from gpu_preflight.model import NA, CheckResult, Finding, Status
from gpu_preflight.parsers.dcgmi import parse as parse_dcgmi
from gpu_preflight.probes.gpu import facts_from_dump
from gpu_preflight.records import GpuFacts, SystemFacts
from gpu_preflight.registry import CheckContext, get_check, operator_actions, stamp_actions

from .test_gpu_checks import links

PASS, WARN, FAIL, ERROR, SKIP = Status.PASS, Status.WARN, Status.FAIL, Status.ERROR, Status.SKIP
EVIDENCE = Path(__file__).parent / "fixtures" / "evidence"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "checks.md"


@pytest.fixture
def facts(h200_dump: dict[str, Any]) -> GpuFacts:
    return facts_from_dump(h200_dump, source="replay:test")


def judged(check_id: str, facts: GpuFacts, config: Config | None = None, **gpu0: Any) -> list[Finding]:
    """The registered check (as the engine calls it) on the facts with GPU 0 changed."""
    gpus = [replace(facts.gpus[0], **gpu0), *facts.gpus[1:]]
    ctx = CheckContext(host="n1", config=config or Config(),
                       facts={"gpu": replace(facts, gpus=gpus), "system": SystemFacts(hostname="n1")})
    return [f for f in get_check(check_id).fn(ctx) if f.subject in ("n1", "n1/gpu0")]


def outcomes(findings: list[Finding]) -> list[tuple[Status, str, str | None]]:
    return [(f.status, f.code, f.details.get(DETAIL_KEY)) for f in findings]


# --------------------------------------------------------------------------- boundary tables

THERMAL: dict[str, Any] = {"temp_slowdown_c": 90, "temp_gpu_max_c": NA("not shown"),
                           "memory_temperature_c": NA("not shown")}


@pytest.mark.parametrize(("temp", "expected"), [
    (91, (FAIL, "temp_slowdown", "check_mechanicals")),
    (90, (FAIL, "temp_slowdown", "check_mechanicals")),  # at the slowdown threshold
    (89, (WARN, "temp_high", "monitor")),
    (85, (WARN, "temp_high", "monitor")),  # slowdown - temp_margin_c
    (84, (PASS, "ok", None)),  # just short: no action, no key
])
def test_thermal_actions_at_the_boundaries(facts: GpuFacts, temp: int, expected: tuple[Any, ...]) -> None:
    assert outcomes(judged("gpu.thermal", facts, temperature_c=temp, **THERMAL)) == [expected]


@pytest.mark.parametrize(("pending", "failure", "rows", "expected"), [
    (True, False, 0, [(WARN, "remap_pending", "reset_gpu")]),
    (False, True, 0, [(FAIL, "remap_failure", "isolate_node")]),
    (True, True, 0, [(FAIL, "remap_failure", "isolate_node"), (WARN, "remap_pending", "reset_gpu")]),
    (False, False, 513, [(WARN, "remapped_rows_high", "monitor")]),
    (False, False, 512, [(PASS, "ok", None)]),  # at the limit: still a pass
])
def test_row_remap_actions(facts: GpuFacts, pending: bool, failure: bool, rows: int,
                           expected: list[tuple[Any, ...]]) -> None:
    got = judged("gpu.memory.remap", facts, remap_pending=pending, remap_failure=failure,
                 remapped_rows_uncorrectable=rows)
    assert outcomes(got) == expected


ECC_CLEAN = {"ecc_current": True, "ecc_volatile_uncorrected": 0, "ecc_volatile_corrected": 0,
             "ecc_aggregate_uncorrected": 0, "ecc_aggregate_corrected": 0, "sram_aggregate_uncorrected": 0,
             "sram_aggregate_corrected": 0}


@pytest.mark.parametrize(("changes", "expected"), [
    ({"ecc_volatile_uncorrected": 1, "ecc_aggregate_uncorrected": 1},
     [(FAIL, "ecc_volatile_uncorrectable", "reset_gpu"), (WARN, "ecc_aggregate_uncorrectable", "monitor")]),
    ({"ecc_aggregate_uncorrected": 1}, [(WARN, "ecc_aggregate_uncorrectable", "monitor")]),
    ({"sram_aggregate_uncorrected": 1}, [(WARN, "sram_uncorrectable", "reset_gpu")]),
    ({}, [(PASS, "ok", None)]),
])
def test_ecc_actions(facts: GpuFacts, changes: dict[str, int], expected: list[tuple[Any, ...]]) -> None:
    config = Config(gpu=replace(Config().gpu, sram_uncorrected_warn=0))
    assert outcomes(judged("gpu.ecc.errors", facts, config, **{**ECC_CLEAN, **changes})) == expected


@pytest.mark.parametrize(("mask", "expected"), [
    (0x40, [(FAIL, "hw_thermal_slowdown", "check_mechanicals")]),
    (0x80, [(FAIL, "hw_power_brake_slowdown", "check_mechanicals")]),
    (0x20, [(WARN, "sw_thermal_slowdown", "monitor")]),
    (0x4, [(PASS, "ok", None)]),  # SW power cap: normal under load
])
def test_clock_actions(facts: GpuFacts, mask: int, expected: list[tuple[Any, ...]]) -> None:
    assert outcomes(judged("gpu.clocks", facts, clock_event_reasons=mask)) == expected


@pytest.mark.parametrize(("width", "expected"), [
    (8, [(FAIL, "link_downtrained", "check_mechanicals")]),
    (15, [(FAIL, "link_downtrained", "check_mechanicals")]),  # one lane short
    (16, [(PASS, "ok", None)]),
])
def test_pcie_actions(facts: GpuFacts, width: int, expected: list[tuple[Any, ...]]) -> None:
    got = judged("gpu.pcie", facts, pcie_width_current=width, pcie_width_max=16, clock_event_reasons=0)
    assert outcomes(got) == expected


@pytest.mark.parametrize(("nvlinks", "expected"), [
    (links(18, down=(3,)), [(FAIL, "nvlink_down", "reset_gpu")]),
    (links(18, crc_flit=101), [(WARN, "nvlink_crc_errors", "monitor")]),
    (links(18, crc_flit=100), [(PASS, "ok", None)]),  # at the limit
])
def test_nvlink_actions(facts: GpuFacts, nvlinks: Any, expected: list[tuple[Any, ...]]) -> None:
    assert outcomes(judged("gpu.nvlink", facts, nvlinks=nvlinks)) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (0, (PASS, "ok", None)), (1, (FAIL, "gpu_reset", "reset_gpu")), (2, (FAIL, "node_reboot", "reboot_node")),
    (3, (WARN, "drain_p2p", "reset_gpu")), (4, (FAIL, "drain_and_reset", "reset_gpu")),
    (7, (FAIL, "system_reboot", "reboot_node")), (99, (WARN, "unknown(99)", None)),
])
def test_recovery_action_in_our_words(facts: GpuFacts, value: int, expected: tuple[Any, ...]) -> None:
    assert outcomes(judged("gpu.recovery_action", facts, recovery_action=value)) == [expected]


def test_lost_gpu_reboots_and_a_setting_names_no_action(facts: GpuFacts) -> None:
    lost = judged("gpu.nvml", facts, lost="GPU is lost")
    assert outcomes(lost) == [(FAIL, "gpu_lost", "reboot_node")]
    off = judged("gpu.inventory.persistence", facts, persistence_mode=False)
    assert outcomes(off) == [(WARN, "persistence_off", None)]  # a setting to change: no routing action


# --------------------------------------------------------------------------- DCGM


@pytest.mark.parametrize(("status", "ids", "messages", "expected"), [
    ("fail", [85], [], Action.RESET_GPU),  # PENDING_ROW_REMAP: RESET
    ("fail", [3], [], Action.ISOLATE_NODE),  # PCI_REPLAY_RATE: ISOLATE
    ("warn", [5], [], Action.MONITOR),  # VOLATILE_SBE_DETECTED: MONITOR
    ("fail", [29], [], Action.NONE),  # PERSISTENCE_MODE: CONFIG, a setting
    ("fail", [46], [], Action.CHECK_MECHANICALS),  # PCIE_WIDTH: override (a downtrained link)
    ("fail", [132], [], Action.ISOLATE_NODE),  # UNCORRECTABLE_ROW_REMAP_LIMIT: "Run a field diagnostic"
    ("fail", [5, 3], [], Action.ISOLATE_NODE),  # the strongest of a test's codes
    ("fail", [0], [], Action.RESET_GPU),  # OK / UNKNOWN severity says nothing: the result decides
    ("warn", [999], [], Action.MONITOR),  # a code newer than the table
    # table texts, no codes: the current and the older wordings
    ("fail", [], ["GPU 3 had memory errors and row remappings are pending"], Action.RESET_GPU),
    ("fail", [], ["GPU 3 has uncorrectable memory errors and row remappings are pending"], Action.RESET_GPU),
    ("warn", [], ["Detected clock throttling due to thermal violation in GPU 0."], Action.MONITOR),
    ("fail", [], ["GPU 1 had PCIe replays, see dmesg for more information"], Action.ISOLATE_NODE),
    ("fail", [], ["Persistence mode for GPU 0 is currently disabled. The DCGM diagnostic requires peristence "
                  "mode to be enabled."], Action.NONE),
    # re-wrapped by the table (a space lost or doubled at a cell edge) still matches
    ("fail", [], ["Max power of 224.1 did not reach  desired power minimum targeted_power_min of 250.0 for "
                  "GPU 1. Verify that the clock speeds and GPU utilization are high."], Action.RESET_GPU),
    ("fail", [], ["something DCGM never printed"], Action.RESET_GPU),
    ("warn", [], ["something DCGM never printed"], Action.MONITOR),
])
def test_dcgm_action(status: str, ids: list[int], messages: list[str], expected: Action) -> None:
    assert dcgm_action(status, ids, messages) is expected


def test_dcgm_table_is_whole_and_every_severity_has_a_rule() -> None:
    assert sorted(DCGM_ERRORS) == list(range(133))  # DCGM_FR_OK .. DCGM_FR_UNCORRECTABLE_ROW_REMAP_LIMIT
    assert {sev for _, sev, _ in DCGM_ERRORS.values()} <= set(SEVERITY_ACTIONS)
    assert set(OVERRIDES) <= set(DCGM_ERRORS)
    assert code_action(85) is Action.RESET_GPU and code_action(4) is Action.ISOLATE_NODE
    assert code_action(10) is Action.MONITOR and code_action(23) is Action.NONE


@pytest.mark.parametrize(("name", "test", "action"), [
    ("dcgmi-diag-3.x-fail.json", "GPU Memory", "reset_gpu"),  # error_id 83: DBE_PENDING_PAGE_RETIREMENTS
    ("dcgmi-diag-4.x-fail.json", "pcie", None),  # error_id 28: BAD_CUDA_ENV, a CONFIG code
    ("spec-dcgmi-diag-r3-targeted-power-fail.txt", "Targeted Power", "reset_gpu"),  # table text: TARGET_POWER
])
def test_dcgm_findings_carry_dcgms_action(name: str, test: str, action: str | None) -> None:
    record = parse_dcgmi((EVIDENCE / name).read_text())
    failed = [f for f in judge_record("dcgmi-diag", record, Config(), source="n1")
              if f.status is FAIL and f.details.get("test") == test]
    assert failed and {f.details.get(DETAIL_KEY) for f in failed} == {action}


# --------------------------------------------------------------------------- the rules


def test_stamp_applies_only_to_warn_fail_error_and_never_overrides() -> None:
    shared: dict[str, Any] = {"link": "x16"}  # one details dict under two findings with different codes
    found = stamp_actions([
        Finding("gpu.pcie", WARN, "n1/gpu0", "replays_high", "", details=shared),
        Finding("gpu.pcie", WARN, "n1/gpu0", "link_narrow_at_idle", "", details=shared),
        Finding("gpu.pcie", PASS, "n1/gpu0", "link_downtrained", ""),  # a PASS never names an action
        Finding("gpu.pcie", FAIL, "n1/gpu0", "unknown_code", ""),
        Finding("gpu.pcie", FAIL, "n1/gpu0", "link_downtrained", "", details={DETAIL_KEY: "isolate_node"}),
        Finding("localize.suspect", FAIL, "node3", "slow", ""),  # a declared id's table
        Finding("localize.suspect", FAIL, "node3", "undecided", ""),
        Finding("localize.suspect", WARN, "node3<->node5", "link_slow", ""),  # the path, not a node
    ])
    assert [f.details.get(DETAIL_KEY) for f in found] == [
        "check_mechanicals", "monitor", None, None, "isolate_node", "isolate_node", None, "monitor"]
    assert shared == {"link": "x16"}  # not changed in place
    assert DETAIL_KEY not in found[2].details and DETAIL_KEY not in found[3].details


def test_node_action_is_the_strongest_and_ignores_unknown_values() -> None:
    details: list[dict[str, Any] | None] = [{DETAIL_KEY: "monitor"}, {DETAIL_KEY: "reset_gpu"},
                                            {DETAIL_KEY: "replace_everything"}, {}, None]
    assert node_action(details) is Action.RESET_GPU
    assert node_action([]) is Action.NONE and action_of({DETAIL_KEY: 3}) is None
    assert [a.value for a in sorted(Action, key=lambda a: a.rank)] == [a.value for a in Action]
    assert strongest([Action.ISOLATE_NODE, Action.REBOOT_NODE, None]) is Action.ISOLATE_NODE


def test_every_table_names_actions_of_known_checks() -> None:
    tables = operator_actions()
    assert {"gpu.thermal", "gpu.memory.remap", "gpu.nvml", "localize.suspect", "nvidia_smi.failure"} <= set(tables)
    for table in tables.values():
        assert all(isinstance(a, Action) and a is not Action.NONE for a in table.values())


# --------------------------------------------------------------------------- end to end


def test_one_action_per_node_in_report_drain_reason_and_label(tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    """The GPU with a pending row remap (reset_gpu) and in hardware thermal slowdown (check_mechanicals),
    and a DCGM run whose memory test failed (DCGM 3.x JSON, error 83: reset_gpu): the node's one action
    is the strongest, reset_gpu, everywhere a hook reads it."""
    h200_dump["devices"][0]["nvmlDeviceGetRemappedRows"] = {"ok": [0, 0, 1, 0]}
    h200_dump["devices"][0]["nvmlDeviceGetCurrentClocksEventReasons"] = {"ok": 0x40}
    dump = tmp_path / "nvml_dump.json"
    dump.write_text(json.dumps(h200_dump))
    node = gpu_preflight.run_checks(replay=str(dump), include=["gpu.*"])
    dcgm = judge_record("dcgmi-diag", parse_dcgmi((EVIDENCE / "dcgmi-diag-3.x-fail.json").read_text()), Config(),
                        source=node.hostname)
    node.results.append(CheckResult("dcgm.diag", "DCGM diagnostic", dcgm, 0.0))
    by_code = {(f.check_id, f.code): f.details.get(DETAIL_KEY) for f in node.findings if f.status is not PASS}
    assert by_code[("gpu.memory.remap", "remap_pending")] == "reset_gpu"
    assert by_code[("gpu.clocks", "hw_thermal_slowdown")] == "check_mechanicals"
    assert by_code[("dcgm.diag", "gpu_memory")] == "reset_gpu"

    report = json.loads(json.dumps(build_report([node])))  # as report.json holds it
    assert report["nodes"]["node_0"]["summary"]["operator_action"] == "reset_gpu"
    assert "operator_action" not in report["cluster_summary"]  # a node's value, not the cluster's

    nodes, _ = node_results(ClusterReport.of(report))
    verdict = judge(nodes[0].findings, SlurmConfig(), parse_timestamp(report["timestamp"]))
    reason = drain_reason(verdict, "gpu-preflight:")
    assert re.match(r"gpu-preflight: action=reset_gpu \S", reason), reason
    assert re.search(r"action=(\w+)", reason).group(1) == "reset_gpu"  # type: ignore[union-attr]

    labels = plan(ClusterReport.of(report)).actions[0].labels
    assert labels[ACTION_LABEL] == "reset_gpu"
    assert f"{ACTION_LABEL}=reset_gpu" in kubectl_commands(plan(ClusterReport.of(report)))[0]


def test_a_node_with_no_action_keeps_its_old_outputs(tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    dump = tmp_path / "nvml_dump.json"
    dump.write_text(json.dumps(h200_dump))
    report = json.loads(json.dumps(build_report([gpu_preflight.run_checks(replay=str(dump), include=["gpu.*"])])))
    assert "operator_action" not in report["nodes"]["node_0"]["summary"]
    assert not [f for f in report["findings"] if DETAIL_KEY in f["details"]]
    assert plan(ClusterReport.of(report)).actions[0].labels[ACTION_LABEL] == "none"


# --------------------------------------------------------------------------- docs


def _docs_rows() -> set[tuple[str, str, str]]:
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## Operator actions", 1)[1].split("\n## ", 1)[0]
    return {(m[0], code, m[2]) for m in re.findall(r"^\| `([^`]+)` \| ([^|]+) \| `(\w+)` \|", section, re.M)
            for code in re.findall(r"`([^`]+)`", m[1])}


def test_docs_table_lists_every_registered_action() -> None:
    want = {(check_id, code, action.value) for check_id, table in operator_actions().items()
            for code, action in table.items()}
    assert _docs_rows() == want


def test_a_cluster_checks_finding_judged_on_its_own_names_its_action(tmp_path: Path) -> None:
    """A saved fi_pingpong file judged alone: fabric.pingpong's table registers with a cluster
    module, which a fresh ``judge`` process had not imported, so its FAIL named no action. In a
    subprocess: in this one an earlier test may already have imported every check module."""
    saved = tmp_path / "pingpong.txt"
    saved.write_text("bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n"
                     "fi_getinfo(): common/shared.c:1204, ret=-61 (No data available) error\n")
    out = subprocess.run([sys.executable, "-m", "gpu_preflight", "judge", "--kind", "fi-pingpong", "--format", "json",
                          str(saved)], capture_output=True, text=True, timeout=120, check=False)
    found = [f for f in json.loads(out.stdout)["findings"] if f["check_id"] == "fabric.pingpong"]
    assert [(f["status"], f["details"].get(DETAIL_KEY)) for f in found] == [("FAIL", "monitor")], out.stderr
