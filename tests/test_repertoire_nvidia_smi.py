"""nvidia-smi's output forms, derived from what NVIDIA publishes with the tool (docs/repertoire/nvidia-smi.md).

nvidia-smi is closed source: its forms come from its help and man page (the ``-d`` display sections), the XML
DTDs and nvml.h, and real outputs in public repositories. The fixtures (tests/fixtures/repertoire/nvidia-smi,
provenance in its PROVENANCE.md) render those forms; each test states what ``judge`` must make of one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.actions import DETAIL_KEY
from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Finding, Status, verdict

FORMS = Path(__file__).parent / "fixtures" / "repertoire" / "nvidia-smi"
REAL_590 = Path(__file__).parent / "fixtures" / "field" / "nvidia-smi" / "exporter-q-h100-590.48.01-idle.txt"


def judged(name: str) -> list[Finding]:
    return judge_text((FORMS / name).read_text(encoding="utf-8"), Config(), source="n1")


@pytest.mark.parametrize("name", ["q-d-accounting-525-x3.txt", "q-d-utilization-590.txt", "q-d-clock-590.txt"])
def test_a_q_d_section_no_check_judges_is_not_a_pass_on_the_banner_alone(name: str) -> None:
    """``nvidia-smi -q -d ACCOUNTING`` (UTILIZATION, CLOCK...) prints the banner and, under each GPU header,
    only the sections asked for; none is a reading a check judges, so every GPU check skips. The banner's GPU
    count and driver PASSed and the report was SUCCESS: now the GPUs are said not to be judged (ERROR)."""
    findings = judged(name)
    gpu = [f for f in findings if f.check_id == "nvidia_smi.gpu"]
    assert [(f.status, f.code) for f in gpu] == [(Status.ERROR, "nothing_judged")]
    assert verdict(f.status for f in findings) in (Status.ERROR, Status.FAIL)
    assert all(f.status is Status.SKIP for f in findings if f.check_id.startswith("gpu.")
               and f.check_id not in ("gpu.inventory.count", "gpu.inventory.driver"))


def test_a_q_d_section_a_check_judges_is_judged_on_it() -> None:
    """``-q -d TEMPERATURE`` shows the GPU's temperature: judged (gpu.thermal), and the report can PASS."""
    findings = judged("q-d-temperature-590.txt")
    assert {(f.check_id, f.status) for f in findings} >= {("gpu.thermal", Status.PASS), ("nvidia_smi.gpu", Status.PASS)}
    assert verdict(f.status for f in findings) is Status.PASS


def fabric(name: str) -> list[Finding]:
    return [f for f in judged(name) if f.check_id == "nvidia_smi.failure"]


def test_a_full_q_whose_gpu_has_not_joined_its_nvlink_fabric_fails() -> None:
    """A whole 590 ``-q`` of an HGX H100 whose ``Fabric`` State is ``In Progress`` (the fabric manager has not
    registered the GPU: CUDA refuses it, error 802) PASSed on every other reading: now FAIL, node kept out."""
    (f,) = fabric("q-h100-590-fabric-in-progress.txt")
    assert (f.status, f.code, f.subject) == (Status.FAIL, "fabric_not_ready", "n1/00000000:00:09.0")
    assert "In Progress" in f.summary and f.details[DETAIL_KEY] == "isolate_node"


@pytest.mark.parametrize(("name", "code", "status"), [
    ("q-fabric-in-progress-580-excerpt.txt", "fabric_not_ready", Status.FAIL),
    ("q-fabric-completed-insufficient-resources-excerpt.txt", "fabric_probe_failed", Status.FAIL),
    ("q-fabric-health-unhealthy-excerpt.txt", "fabric_unhealthy", Status.FAIL),
    ("q-fabric-health-limited-capacity-excerpt.txt", "fabric_degraded", Status.WARN),
])
def test_a_pasted_fabric_block_is_judged_on_its_state_status_and_health(name: str, code: str, status: Status) -> None:
    """The ``Fabric`` block pasted alone (``nvidia-smi -q | grep -A4 Fabric``) was not recognised (exit 3): a GPU
    that never joined, or whose probe completed with an error (Status is checked once State is Completed, as
    nvml.h says), or an unhealthy fabric, is a FAIL; limited capacity a WARN. A fragment: nothing else inferred."""
    findings = judged(name)
    assert [(f.code, f.status) for f in findings if f.check_id == "nvidia_smi.failure"] == [(code, status)]
    assert verdict(f.status for f in findings) is status
    assert any(f.check_id == "evidence.fragment" for f in findings)


def test_a_joined_healthy_fabric_adds_nothing_to_a_full_report() -> None:
    """State Completed, Status Success (the real 590 report): no fabric finding, the report PASSes as before."""
    findings = judge_text(REAL_590.read_text(encoding="utf-8"), Config(), source="n1")
    assert not [f for f in findings if f.check_id == "nvidia_smi.failure"]
    assert verdict(f.status for f in findings) is Status.PASS


def test_query_gpu_fabric_columns_are_judged_like_the_q_block() -> None:
    """``--query-gpu=fabric.state,fabric.status`` (fabric manager checks query it alone) was not recognised; beside
    other columns it was ignored, so a GPU whose probe ended ``Insufficient Resources`` PASSed."""
    (f,) = fabric("csv-fabric-state-status-x8-one-in-progress.txt")
    assert (f.status, f.code) == (Status.FAIL, "fabric_not_ready")
    (f,) = fabric("csv-index-bus-name-memory-fabric-insufficient-resources.txt")
    assert (f.status, f.code, f.subject) == (Status.FAIL, "fabric_probe_failed", "n1/00000000:2A:00.0")


def test_query_gpu_of_a_healthy_fabric_alone_judges_no_gpu() -> None:
    """Completed/Success on every GPU, and no column a check reads: not a PASS on the row count alone."""
    findings = judged("csv-fabric-state-status-x2-completed.txt")
    gpu = [(f.status, f.code) for f in findings if f.check_id == "nvidia_smi.gpu"]
    assert gpu == [(Status.ERROR, "nothing_judged")]
    assert not fabric("csv-fabric-state-status-x2-completed.txt")


@pytest.mark.parametrize(("name", "code", "subject"), [
    ("csv-query-gpu-x2-gpu-is-lost.txt", "gpu_lost", "n1"),
    ("csv-query-gpu-x2-gpu-requires-reset.txt", "gpu_requires_reset", "n1/00000000:0F:00.0"),
])
def test_a_query_gpu_row_of_nvml_errors_is_the_failure_it_names(name: str, code: str, subject: str) -> None:
    """--query-gpu prints NVML's error in each cell it could not read: ``[GPU is lost]``, ``[GPU requires reset]``.
    Read as "no reading", the row's GPU SKIPped every check and the other GPU PASSed the report."""
    findings = judged(name)
    assert [(f.code, f.status, f.subject) for f in findings if f.check_id == "nvidia_smi.failure"] == [
        (code, Status.FAIL, subject)]
    assert verdict(f.status for f in findings) is Status.FAIL


def test_the_r3xx_temperature_gpu_row_is_the_gpu_temperature() -> None:
    """Drivers 304-325 print ``Temperature / Gpu : 52 C`` where later ones print ``GPU Current Temp``: it was not
    read, so ``-q -d TEMPERATURE`` of those drivers judged no GPU; now gpu.thermal judges each."""
    findings = judged("q-d-temperature-325-gpu.txt")
    assert [(f.subject, f.status, f.observed) for f in findings if f.check_id == "gpu.thermal"] == [
        ("n1/gpu0", Status.PASS, 52), ("n1/gpu1", Status.PASS, 47)]


@pytest.mark.parametrize(("word", "action", "operator"), [
    ("Reset", "GPU_RESET", "reset_gpu"), ("Reboot", "NODE_REBOOT", "reboot_node"),
    ("GPU Reset", "GPU_RESET", "reset_gpu"), ("Drain and Reset", "DRAIN_AND_RESET", "reset_gpu"),
])
def test_the_recovery_action_words_nvidia_smi_prints_are_the_action(word: str, action: str, operator: str) -> None:
    """570-590 reports print ``GPU Recovery Action : Reset`` / ``: Reboot``, not NVML's names: they were an
    "unknown recovery action" (SKIP) and a GPU the driver wants reset PASSed the whole report."""
    text = (FORMS / "q-h100-590-recovery-action-reset.txt").read_text(encoding="utf-8")
    text = text.replace("GPU Recovery Action                                : Reset",
                        f"GPU Recovery Action                                : {word}")
    findings = judge_text(text, Config(), source="n1")
    (f,) = [f for f in findings if f.check_id == "gpu.recovery_action"]
    assert (f.status, f.observed, f.details[DETAIL_KEY]) == (Status.FAIL, action, operator)


@pytest.mark.parametrize(("label", "code", "status"), [
    ("SRAM Threshold Exceeded                    ", "sram_threshold_exceeded", Status.FAIL),
    ("Unrepairable Memory                            ", "unrepairable_memory", Status.FAIL),
    ("Channel Repair Pending                         ", "repair_pending", Status.WARN),
    ("TPC Repair Pending                             ", "repair_pending", Status.WARN),
])
def test_the_ecc_errors_memory_flags_are_judged(label: str, code: str, status: Status) -> None:
    """The real 590 H100 ``-q`` (field corpus) with one ``ECC Errors`` flag set to ``Yes`` (nvml.h's
    bThresholdExceeded, bUnrepairableMemory, bChannelRepairPending/bTpcRepairPending): each was ignored and the
    report PASSed; SRAM past its threshold and unrepairable memory now FAIL (isolate), a pending repair WARNs."""
    real = REAL_590.read_text(encoding="utf-8")
    assert f"{label}: No" in real
    findings = judge_text(real.replace(f"{label}: No", f"{label}: Yes"), Config(), source="n1")
    assert [(f.code, f.status) for f in findings if f.check_id == "nvidia_smi.failure"] == [(code, status)]
    assert verdict(f.status for f in findings) is status


def test_grepped_recovery_action_lines_are_one_gpu_each() -> None:
    """``nvidia-smi -q | grep "GPU Recovery Action"`` (the check scripts run) prints one indented line per GPU: it
    was "no GPU section" (ERROR). Each line is now a GPU of the fragment: a ``Reset`` FAILs that GPU, all ``None``
    PASS on the actions shown (no GPU count is inferred)."""
    findings = judged("q-grep-recovery-action-x4-one-reset.txt")
    assert [(f.subject, f.status) for f in findings if f.check_id == "gpu.recovery_action"] == [
        ("n1/gpu0", Status.PASS), ("n1/gpu1", Status.FAIL), ("n1/gpu2", Status.PASS), ("n1/gpu3", Status.PASS)]
    findings = judged("q-grep-recovery-action-x2-none.txt")
    assert verdict(f.status for f in findings) is Status.PASS
    assert any(f.check_id == "evidence.fragment" for f in findings)
    assert not any(f.check_id == "gpu.inventory.count" for f in findings)
