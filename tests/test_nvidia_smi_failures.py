"""nvidia-smi's own failure texts and pasted ``-q`` fragments, judged on what they show.

The failure lines are real (quoted in public threads, kept with provenance in
``tests/fixtures/field/nvidia-smi/SOURCES.toml``); before this, each of them was "not a text
we parse" (exit 3) and a pasted ``Remapped Rows`` block with ``Pending : Yes`` PASSed on
"1 GPU(s) found".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status, verdict
from gpu_preflight.parsers.detect import detect_kind, parse_text

FIELD = Path(__file__).parent / "fixtures" / "field" / "nvidia-smi"
H200_TABLE = Path(__file__).parent / "fixtures" / "evidence" / "h200-580.159.04" / "nvidia-smi_.txt"
REMAP_PENDING = (FIELD / "remapped-rows-pending-gpud-80.txt").read_text()


def judged(text: str) -> tuple[Status, dict[str, set[Status]]]:
    findings = judge_text(text, Config(), source="node-1")
    by_check: dict[str, set[Status]] = {}
    for f in findings:
        by_check.setdefault(f.check_id, set()).add(f.status)
    return verdict(f.status for f in findings), by_check


@pytest.mark.parametrize(("name", "code", "status"), [
    ("handle-unknown-error-xxd3vin-19.txt", "gpu_unreachable", Status.FAIL),
    ("handle-unknown-error-dcgm-exporter-604.txt", "gpu_unreachable", Status.FAIL),
    ("gpu-is-lost-owod-81.txt", "gpu_lost", Status.FAIL),
    ("no-devices-singuconda-6.txt", "no_devices", Status.FAIL),
    ("driver-unreachable-wrapped-nvdocker-988.txt", "driver_unreachable", Status.FAIL),
])
def test_failure_text_alone_is_detected_and_judged(name: str, code: str, status: Status) -> None:
    text = (FIELD / name).read_text()
    assert detect_kind(text) == "nvidia-smi-error"
    findings = judge_text(text, Config(), source="node-1")
    failure = [f for f in findings if f.check_id == "nvidia_smi.failure"]
    assert [(f.code, f.status) for f in failure] == [(code, status)]
    assert verdict(f.status for f in findings) is status
    assert not [f for f in findings if f.check_id == "nvidia_smi.gpu"]  # no "lists no GPU" beside it


def test_failure_names_the_gpu_it_could_not_reach() -> None:
    findings = judge_text((FIELD / "handle-unknown-error-ogkm-387.txt").read_text(), Config(), source="n")
    assert [f.subject for f in findings if f.check_id == "nvidia_smi.failure"] == ["n/0000:0B:00.0"]


def test_inforom_warning_above_a_table_is_read_with_the_table() -> None:
    """nvidia-smi prints the warning before its table (exit 14): the table is still judged, the warning too."""
    table = H200_TABLE.read_text()
    text = "WARNING: infoROM is corrupted at gpu 0000:B3:00.0\n" + table
    assert detect_kind(text) == "nvidia-smi-table"
    _kind, record = parse_text(text)
    assert [(f.code, f.gpu) for f in record.failures] == [("inforom_corrupted", "0000:B3:00.0")]
    status, checks = judged(text)
    assert checks["nvidia_smi.failure"] == {Status.WARN} and Status.PASS in checks["nvidia_smi.gpu"]
    assert status is Status.WARN
    assert parse_text(table)[1].failures == []


def test_remapped_rows_fragment_is_judged_on_its_readings() -> None:
    """The pasted block of issue 27: Uncorrectable 4, Pending Yes, no GPU header, no failure flag."""
    kind, record = parse_text(REMAP_PENDING)
    assert kind == "nvidia-smi-q" and record.fragment == 3
    status, checks = judged(REMAP_PENDING)
    assert checks["gpu.memory.remap"] == {Status.WARN} and status is Status.WARN
    assert checks["evidence.fragment"] == {Status.SKIP}
    assert "nvidia_smi.gpu" not in checks and "gpu.inventory.count" not in checks  # no count it does not state


def test_a_fragment_that_shows_no_problem_but_not_every_flag_is_not_success() -> None:
    text = REMAP_PENDING.replace(": 4", ": 0").replace(": Yes", ": No")
    status, checks = judged(text)
    assert checks["gpu.memory.remap"] == {Status.SKIP}  # the failure flag was not pasted: not a pass
    assert status is Status.ERROR  # nothing judged is no evidence of health


def test_a_fragment_with_both_flags_passes_on_what_it_states() -> None:
    text = REMAP_PENDING.replace(": 4", ": 0").replace(": Yes", ": No") + \
        "        Remapping Failure Occurred        : No\n"
    status, checks = judged(text)
    assert checks["gpu.memory.remap"] == {Status.PASS} and status is Status.PASS


def test_a_whole_report_is_not_a_fragment() -> None:
    text = (Path(__file__).parent / "fixtures" / "evidence" / "h200-580.159.04" / "nvidia-smi_q.txt").read_text()
    kind, record = parse_text(text)
    assert kind == "nvidia-smi-q" and record.fragment is None and record.failures == []
    assert "evidence.fragment" not in judged(text)[1]
