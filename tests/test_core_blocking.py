"""The scores' core components and the job-blocking codes, derived from the declarations.

``report.scores.CORE`` (which ids prove a core component was measured) and ``BLOCKING``
(the (id, code) pairs that block a GPU job) were hand-written tables in report/; they are
now built from ``@check(core=True, blocking_codes=...)`` and ``declare(...)``. The tables
below are what the hand-written ones said on the day they were replaced: a declaration
that changes them changes this test on purpose.
"""

from __future__ import annotations

import pytest

from gpu_preflight import registry
from gpu_preflight.model import Finding, id_matches
from gpu_preflight.registry import CHECKS, CheckContext, check
from gpu_preflight.report.scores import BLOCKING, CORE

PINNED_CORE = {
    "hardware_health": (("gpu.ecc.*", "gpu.memory.*", "gpu.thermal", "gpu.clocks", "gpu.power", "gpu.pcie",
                         "gpu.nvlink", "gpu.recovery_action", "nvidia_smi.*", "dcgm.*", "load.*"),
                        "no GPU was read"),
    "network_infrastructure": (("network.node_links", "fabric.pingpong", "localize.*"),
                               "no link between two nodes was measured"),
}
PINNED_BLOCKING = {("gpu.inventory.count", "no_gpus")}
NOT_CORE = {"nvidia_smi.answer"}  # declared since, on purpose outside the patterns: an answer's stated settings
# (software_stack, SKIP only) prove no GPU was read


def _known() -> list[str]:
    return [s.id for s in registry.described()]


@pytest.mark.parametrize("component", sorted(PINNED_CORE))
def test_core_ids_are_those_the_hand_written_table_matched(component: str) -> None:
    patterns, missing = PINNED_CORE[component]
    expected = sorted(i for i in _known() if any(id_matches(i, p) for p in patterns) and i not in NOT_CORE)
    ids, why = CORE[component]
    assert (sorted(ids), why) == (expected, missing)


def test_only_the_pinned_components_are_core() -> None:
    assert list(CORE) == list(PINNED_CORE) and "software_stack" not in CORE


def test_blocking_codes_are_the_pinned_pairs() -> None:
    registry.discover(None)
    assert set(BLOCKING) == PINNED_BLOCKING
    assert ("gpu.inventory.count", "no_gpus") in BLOCKING and ("gpu.inventory.count", "mismatch") not in BLOCKING


def test_every_core_id_declares_its_component() -> None:
    for spec in registry.described():
        if spec.core:
            assert spec.component in CORE, spec.id


def test_a_new_core_check_and_blocking_code_join_the_tables() -> None:
    def judge(ctx: CheckContext) -> list[Finding]:
        return []

    with CHECKS.scoped():
        check("gpu.test_core_probe", needs=("gpu",), group="gpu_health", component="hardware_health", core=True,
              blocking_codes=("dead",))(judge)
        assert "gpu.test_core_probe" in CORE["hardware_health"][0]
        assert ("gpu.test_core_probe", "dead") in BLOCKING
    assert "gpu.test_core_probe" not in CORE["hardware_health"][0]
    assert ("gpu.test_core_probe", "dead") not in BLOCKING


def test_core_without_a_component_is_refused() -> None:
    with CHECKS.scoped(), pytest.raises(ValueError, match="core=True needs"):
        check("gpu.test_core_nowhere", needs=("gpu",), group=(), core=True)(lambda ctx: [])
