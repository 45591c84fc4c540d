"""nvidia-smi's output forms, derived from what NVIDIA publishes with the tool (docs/repertoire/nvidia-smi.md).

nvidia-smi is closed source: its forms come from its help and man page (the ``-d`` display sections), the XML
DTDs and nvml.h, and real outputs in public repositories. The fixtures (tests/fixtures/repertoire/nvidia-smi,
provenance in its PROVENANCE.md) render those forms; each test states what ``judge`` must make of one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Finding, Status, verdict

FORMS = Path(__file__).parent / "fixtures" / "repertoire" / "nvidia-smi"


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
