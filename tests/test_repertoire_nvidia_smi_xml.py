"""``nvidia-smi -q -x``'s element repertoire across DTD versions (docs/repertoire/nvidia-smi-xml.md).

Every health-bearing element of the XML is the value ``-q`` prints under a label, and is judged by the same rule:
the paired test edits one value in both forms of our own H200 capture and asserts the same findings. The fixtures
(tests/fixtures/repertoire/nvidia-smi-xml, provenance in its PROVENANCE.md) render the v13 forms the ``-q`` pages
and NVML name; each test states what ``judge`` must make of one.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Finding, Status, verdict
from gpu_preflight.parsers.errors import ParseError
from gpu_preflight.parsers.nvidia_smi import xml_log

FORMS = Path(__file__).parent / "fixtures" / "repertoire" / "nvidia-smi-xml"
H200 = Path(__file__).parent / "fixtures" / "evidence" / "h200-580.159.04"


def judged(text: str) -> list[Finding]:
    return judge_text(text, Config(), source="n1")


def form(name: str) -> list[Finding]:
    return judged((FORMS / name).read_text(encoding="utf-8"))


def flagged(findings: list[Finding]) -> set[tuple[str, Status, str, str]]:
    return {(f.check_id, f.status, f.code, f.subject) for f in findings if f.status is not Status.PASS}


def _edit(text: str, pattern: str, value: str) -> str:
    """``text`` with the value of the line (or element) ``pattern`` finds set to ``value``: exactly one."""
    new, n = re.subn(pattern, lambda m: m.group(1) + value + m.group(2), text, count=1)
    assert n == 1, pattern
    return new


def _q(label: str) -> str:
    """The line of ``label``; ``Section/Label``: the first ``Label`` line under ``Section``."""
    section, _, last = label.rpartition("/")
    above = rf"\n *{section}\n(?:[^\n]*\n)*?" if section else r"\n"
    return rf"({above} *{last} +: )[^\n]*(\n)"


def _x(tag: str) -> str:
    return rf"(<{tag}>)[^<]*(</{tag}>)"


# (what, [(-q label, -x tag, value)], (check, status, code) the XML must show)
PAIRS = [
    ("fabric not joined", [("State", "state", "In Progress")], ("nvidia_smi.failure", Status.FAIL, "fabric_not_ready")),
    ("fabric probe error", [("State", "state", "Completed"), ("Status", "status", "Insufficient Resources")],
     ("nvidia_smi.failure", Status.FAIL, "fabric_probe_failed")),
    ("fabric unhealthy", [("State", "state", "Completed"), ("Status", "status", "Success"),
                          ("Summary", "summary", "Unhealthy")],
     ("nvidia_smi.failure", Status.FAIL, "fabric_unhealthy")),
    ("fabric degraded", [("State", "state", "Completed"), ("Status", "status", "Success"),
                         ("Bandwidth", "bandwidth", "Degraded")],
     ("nvidia_smi.failure", Status.WARN, "fabric_degraded")),
    ("SRAM threshold", [("SRAM Threshold Exceeded", "sram_threshold_exceeded", "Yes")],
     ("nvidia_smi.failure", Status.FAIL, "sram_threshold_exceeded")),
    ("unrepairable", [("Unrepairable Memory", "unrepairable_memory", "Yes")],
     ("nvidia_smi.failure", Status.FAIL, "unrepairable_memory")),
    ("TPC repair", [("TPC Repair Pending", "tpc_repair_pending", "Yes")],
     ("nvidia_smi.failure", Status.WARN, "repair_pending")),
    ("GPU requires reset", [("Persistence Mode", "persistence_mode", "GPU requires reset")],
     ("nvidia_smi.failure", Status.FAIL, "gpu_requires_reset")),
    ("garbled flag", [("Remapping Failure Occurred", "remapped_row_failure", "Y\u00e5s")],
     ("evidence.complete", Status.ERROR, "incomplete")),
    ("recovery action", [("GPU Recovery Action", "gpu_recovery_action", "Reset")],
     ("gpu.recovery_action", Status.FAIL, "gpu_reset")),
    ("remap pending", [("Remapped Rows/Pending", "remapped_row_pending", "Yes")],
     ("gpu.memory.remap", Status.WARN, "remap_pending")),
    ("DRAM uncorrectable unread", [("DRAM Uncorrectable", "dram_uncorrectable", "[Unknown Error]")], None),
]


@pytest.mark.parametrize(("what", "edits", "expected"), PAIRS, ids=[p[0] for p in PAIRS])
def test_an_xml_value_is_judged_as_the_same_value_in_q_text(
        what: str, edits: list[tuple[str, str, str]], expected: tuple[str, Status, str] | None) -> None:
    """The real 580.159.04 H200 ``-q`` and ``-q -x``, one value changed in both: the same findings. Before, the XML's
    ``<fabric>``, the ``<ecc_errors>`` flags, ``GPU requires reset`` in place of a value and a garbled flag were not
    read (the fabric, memory and reset forms PASSed a broken GPU)."""
    q = (H200 / "nvidia-smi_q.txt").read_text(encoding="utf-8")
    x = (H200 / "nvidia-smi_q_x.txt").read_text(encoding="utf-8")
    for label, tag, value in edits:
        q, x = _edit(q, _q(label), value), _edit(x, _x(tag), value)
    from_q, from_x = judged(q), judged(x)
    assert flagged(from_x) == flagged(from_q), what
    if expected is None:
        assert verdict(f.status for f in from_x) is Status.PASS
    else:
        assert expected in {(f.check_id, f.status, f.code) for f in from_x}


def test_clock_reasons_not_available_are_no_reading_in_either_form() -> None:
    """``Clocks Throttle Reasons : N/A`` (a vGPU, WSL; ``<clocks_throttle_reasons>N/A</...>`` in the XML) was read as
    "no reason active" and gpu.clocks PASSed on a value nvidia-smi did not show; now it is not judged (SKIP)."""
    q = (H200 / "nvidia-smi_q.txt").read_text(encoding="utf-8")
    q = re.sub(r"\n    Clocks Event Reasons\n(?:        [^\n]*\n)+", "\n    Clocks Throttle Reasons : N/A\n", q)
    for findings in (judged(q), form("v11-clocks-throttle-reasons-na.xml")):
        (clocks,) = [f for f in findings if f.check_id == "gpu.clocks"]
        assert clocks.status is Status.SKIP
        assert verdict(f.status for f in findings) is Status.PASS


def test_the_healthy_v13_form_passes() -> None:
    findings = form("v13-h100-590-healthy.xml")
    assert verdict(f.status for f in findings) is Status.PASS
    assert not [f for f in findings if f.check_id == "nvidia_smi.failure"]


@pytest.mark.parametrize(("name", "code", "status"), [
    ("v13-h100-590-fabric-in-progress.xml", "fabric_not_ready", Status.FAIL),
    ("v13-h100-590-fabric-insufficient-resources.xml", "fabric_probe_failed", Status.FAIL),
    ("v13-h100-590-fabric-unhealthy.xml", "fabric_unhealthy", Status.FAIL),
    ("v13-h100-590-fabric-limited-capacity.xml", "fabric_degraded", Status.WARN),
    ("v13-h100-590-sram-threshold-exceeded.xml", "sram_threshold_exceeded", Status.FAIL),
    ("v13-h100-590-unrepairable-memory.xml", "unrepairable_memory", Status.FAIL),
    ("v13-h100-590-channel-repair-pending.xml", "repair_pending", Status.WARN),
])
def test_the_fabric_and_memory_flag_elements_are_judged(name: str, code: str, status: Status) -> None:
    """``<fabric>`` (state, status, 555+ ``<health>``) and the ``<ecc_errors>`` flags: every other reading of these
    GPUs is healthy, and they PASSed; now the failure ``-q`` shows is named on the GPU's bus id."""
    findings = form(name)
    (f,) = [f for f in findings if f.check_id == "nvidia_smi.failure"]
    assert (f.status, f.code, f.subject) == (status, code, "n1/00000000:19:00.0")
    assert verdict(x.status for x in findings) is status


def test_nvidia_smi_s_failure_sentences_around_and_inside_the_xml_are_read() -> None:
    """``Unable to determine the device handle for GPU...`` printed above the document (stderr pasted with it) and
    ``GPU requires reset`` in place of a value: the sentences ``-q`` and the table are judged on. Both PASSed."""
    lost = form("v13-h100-590-handle-line-above.xml")
    assert ("nvidia_smi.failure", Status.FAIL, "gpu_unreachable", "n1/0000:3B:00.0") in flagged(lost)
    reset = form("v13-h100-590-gpu-requires-reset.xml")
    assert {(f.code, f.status) for f in reset if f.check_id == "nvidia_smi.failure"} == {
        ("gpu_requires_reset", Status.FAIL)}


def test_a_garbled_value_is_named_not_read_as_no_data() -> None:
    """``<remapped_row_pending>Yås</...>``: neither a reading nor "not available"; was read as no reading and the
    report PASSed. Now ERROR naming it, as ``Pending : Yås`` in ``-q``."""
    findings = form("v13-h100-590-remap-pending-garbled.xml")
    (f,) = [f for f in findings if f.check_id == "evidence.complete"]
    assert f.status is Status.ERROR and "remapped_rows/remapped_row_pending" in f.summary
    assert verdict(x.status for x in findings) is Status.ERROR


def test_a_document_cut_before_its_end_is_read_up_to_the_cut() -> None:
    """A document that stops before ``</nvidia_smi_log>`` was a parse error (nothing judged). Now what was closed
    before the cut is judged and the output is incomplete: a failure shown stays FAIL, else ERROR; the element cut
    inside its value (``<gpu_temp>3``) has no value, not a half number."""
    failed = form("v13-h100-590-cut-after-remap-failure.xml")
    assert ("gpu.memory.remap", Status.FAIL) in {(f.check_id, f.status) for f in failed}
    assert ("evidence.complete", Status.ERROR) in {(f.check_id, f.status) for f in failed}
    assert verdict(f.status for f in failed) is Status.FAIL
    healthy = form("v13-h100-590-cut-mid-temperature.xml")
    assert verdict(f.status for f in healthy) is Status.ERROR
    (thermal,) = [f for f in healthy if f.check_id == "gpu.thermal"]
    assert thermal.status is Status.SKIP
    record = xml_log.parse((FORMS / "v13-h100-590-cut-mid-temperature.xml").read_text(encoding="utf-8"))
    assert record.gpus[0].temperature_c is None and record.gpus[0].remapped_rows_failure is False
    assert any("document cut inside <gpu id='00000000:19:00.0'>" in i for i in record.incomplete)


def test_a_document_garbled_before_its_end_is_still_refused() -> None:
    with pytest.raises(ParseError, match="malformed XML"):
        xml_log.parse("<nvidia_smi_log><gpu id='1'><gpu_temp>31 C</fan_speed></gpu></nvidia_smi_log>")
