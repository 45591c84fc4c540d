"""``dcgmi health -c`` and ``dcgmi discovery -l`` (``parsers/dcgmi/health.py``): detected, read, judged.

Written in the layouts DCGM prints (dcgmi/Health.cpp's GenerateOutputFromResponse through DcgmiOutputTree
or DcgmiOutputJson; dcgmi/DeviceMonitor.cpp's discovery box). Before this reader both were exit 3: a health
report saying ``Failure`` on a GPU's NVLink system was "not a text we parse", and a healthy one could not
be told from nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_preflight.checks.evidence import judge_record
from gpu_preflight.config import Config
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text

EVIDENCE = Path(__file__).parent / "fixtures" / "evidence"
RULE = "+---------------------------+----------------------------------------------------------+\n"


def health_table(overall: str, rows: str = "") -> str:
    return (f"{RULE}| Health Monitor Report{' ' * 63}|\n{RULE.replace('-', '=')}"
            f"| Overall Health            | {overall:<57}|\n{rows}{RULE}")


def judged(text: str, kind: str) -> list:
    got, record = parse_text(text)
    assert got == kind
    return judge_record(kind, record, Config())


def worst(findings: list, check: str) -> Status:
    return Status.worst(f.status for f in findings if f.check_id == check)


@pytest.mark.parametrize("overall, status", [("Healthy", Status.PASS), ("Warning", Status.WARN),
                                             ("Failure", Status.FAIL), ("Internal error", Status.ERROR)])
def test_overall_health_is_the_verdict(overall: str, status: Status) -> None:
    text = health_table(overall)
    assert detect_kind(text) == "dcgmi-health"
    assert worst(judged(text, "dcgmi-health"), "dcgm.health") is status


def test_an_incident_is_named_with_its_wrapped_message() -> None:
    findings = judged((EVIDENCE / "dcgmi-health-c-gpu1-pcie-warning.txt").read_text(), "dcgmi-health")
    [incident] = [f for f in findings if f.subject.endswith("/gpu1")]
    assert incident.status is Status.WARN and "PCIe system" in incident.summary
    assert "8 PCIe replays per minute for GPU 1 : 13 Reconnect PCIe card." in incident.summary
    assert incident.details.get("operator_action") == "monitor"


def test_json_failure_with_nvlink_incident_fails_and_isolates() -> None:
    doc = {"body": {"Overall Health": {"value": "Failure"},
                    "GPU": {"children": {"0": {"value": "Failure", "children": {"Errors": {"children": {
                        "NVLINK system": {"value": "Failure",
                                          "overflow": ["GPU 0's NvLink link 0 is currently down"]}}}}}}}},
           "header": ["Health Monitor Report"]}
    findings = judged(json.dumps(doc, indent=8), "dcgmi-health")
    assert worst(findings, "dcgm.health") is Status.FAIL
    [incident] = [f for f in findings if f.details.get("system") == "NVLINK system"]
    assert incident.status is Status.FAIL and "link 0 is currently down" in incident.summary
    assert incident.details.get("operator_action") == "isolate_node"


def test_healthy_json_passes() -> None:
    text = json.dumps({"body": {"Overall Health": {"value": "Healthy"}}, "header": ["Health Monitor Report"]})
    assert worst(judged(text, "dcgmi-health"), "dcgm.health") is Status.PASS


def test_discovery_lists_the_gpus_for_the_inventory_checks() -> None:
    text = (EVIDENCE / "dcgmi-discovery-l-2xh100.txt").read_text()
    assert detect_kind(text) == "dcgmi-discovery"
    kind, record = parse_text(text)
    assert [(g.index, g.name) for g in record.gpus] == [(0, "NVIDIA H100 80GB HBM3"), (1, "NVIDIA H100 80GB HBM3")]
    assert not record.elided
    findings = judge_record(kind, record, Config())
    assert worst(findings, "gpu.inventory.count") is Status.PASS
    assert any("dcgmi discovery -l" in f.summary for f in findings if f.check_id == "nvidia_smi.gpu")


def test_discovery_with_boxes_cut_out_is_elided() -> None:
    text = (EVIDENCE / "dcgmi-discovery-l-2xh100.txt").read_text().replace("2 GPUs found.", "8 GPUs found.")
    _, record = parse_text(text)
    assert record.elided and len(record.gpus) == 2


@pytest.mark.parametrize("answer", ["Error: Health watches not enabled. Please enable watches.",
                                    "Error: Unable to check health watches. Return: The Group is not found"])
def test_dcgmi_health_refusing_to_check_is_an_error_not_unrecognised(answer: str) -> None:
    """Health::CheckWatches' own answers when it cannot check: nothing about the GPUs was measured."""
    text = f"$ dcgmi health --check -g 1\n{answer}\n"
    assert detect_kind(text) == "dcgmi-health"
    findings = judged(text, "dcgmi-health")
    assert [f.status for f in findings if f.check_id == "dcgm.health"] == [Status.ERROR]
