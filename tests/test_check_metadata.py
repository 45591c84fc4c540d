"""Every id a report can carry: its report groups and score component, pinned.

The groups (``cluster_summary.test_results``) and components (``scores``) used to come from
glob tables in report/; they are now derived from what each check declares. This table is
what the glob tables gave on the day they were replaced: a check that changes group or
component changes this table on purpose, and a new id that declares nothing fails here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import pytest

from gpu_preflight import registry
from gpu_preflight.findings.canonical import TEST_GROUPS, finding_groups
from gpu_preflight.model import Finding
from gpu_preflight.registry import CheckContext
from gpu_preflight.report.scores import COMPONENT_RULES, component_of

# id -> (groups, component[, {dcgm level: groups at that level}])
PINNED: dict[str, tuple[Any, ...]] = {
    'cluster.completeness': (('nccl_communication',), 'service_reliability'),
    'cluster.consistency': ((), 'software_stack'),
    'cluster.node_report': ((), 'service_reliability'),
    'compute.gemm': (('compute',), 'hardware_health'),
    'dcgm.health': ((), 'hardware_health'),
    'dcgm.diag': (('dcgm_diagnostics',), 'hardware_health',
                  {1: ('dcgm_diagnostics', 'dcgm_basic'), 2: ('dcgm_diagnostics', 'dcgm_extended'),
                   3: ('dcgm_diagnostics', 'dcgm_extended')}),
    'evidence.complete': ((), 'service_reliability'),
    'evidence.judge': ((), 'service_reliability'),
    'evidence.parse': ((), 'service_reliability'),
    'fabric.efa': (('efa_network',), 'network_infrastructure'),
    'fabric.fi_info': (('efa_network',), 'network_infrastructure'),
    'fabric.pingpong': (('efa_network',), 'network_infrastructure'),
    'gpu.busy': (('gpu_health',), 'resource_management'),
    'gpu.clocks': (('gpu_health',), 'hardware_health'),
    'gpu.ecc.errors': (('gpu_health',), 'hardware_health'),
    'gpu.ecc.mode': (('gpu_health',), 'hardware_health'),
    'gpu.inventory.compute_mode': (('gpu_detection',), 'software_stack'),
    'gpu.inventory.count': (('gpu_detection',), 'hardware_health'),
    'gpu.inventory.driver': (('gpu_detection',), 'software_stack'),
    'gpu.inventory.identity': (('gpu_detection',), 'hardware_health'),
    'gpu.inventory.mig': (('gpu_detection',), 'software_stack'),
    'gpu.inventory.persistence': (('gpu_detection',), 'software_stack'),
    'gpu.memory.remap': (('gpu_health',), 'hardware_health'),
    'gpu.memory.retired_pages': (('gpu_health',), 'hardware_health'),
    'gpu.nvlink': (('gpu_links',), 'hardware_health'),
    'gpu.nvml': (('gpu_detection',), 'hardware_health'),
    'gpu.pcie': (('gpu_links',), 'hardware_health'),
    'gpu.power': (('gpu_health',), 'hardware_health'),
    'gpu.recovery_action': (('gpu_health',), 'hardware_health'),
    'gpu.thermal': (('gpu_health',), 'hardware_health'),
    'gpu.xid': (('gpu_health',), 'hardware_health'),
    'history.regression': ((), 'performance_consistency'),
    'history.repeat_offender': ((), 'hardware_health'),
    'ib.counters': (('efa_network',), 'network_infrastructure'),
    'ib.perftest': (('efa_network',), 'network_infrastructure'),
    'ib.ports': (('efa_network',), 'network_infrastructure'),
    'kernel.link_flap': (('efa_network',), 'network_infrastructure'),
    'kernel.nic': (('efa_network',), 'network_infrastructure'),
    'kernel.segfault': ((), 'software_stack'),
    'load.clocks': (('gpu_health',), 'hardware_health'),
    'load.ecc': (('gpu_health',), 'hardware_health'),
    'load.efficiency': (('gpu_health',), 'hardware_health'),
    'load.peers': (('gpu_health',), 'hardware_health'),
    'load.power': (('gpu_health',), 'hardware_health'),
    'load.thermal': (('gpu_health',), 'hardware_health'),
    'load.xid': (('gpu_health',), 'hardware_health'),
    'localize.suspect': ((), 'network_infrastructure'),
    'memory.bandwidth': (('compute',), 'hardware_health'),
    'nccl.collectives': (('nccl_communication',), 'network_infrastructure'),
    'nccl.correctness': (('nccl_communication',), 'network_infrastructure'),
    'nccl_log.triage': ((), 'network_infrastructure'),
    'nccl_tests.bandwidth': (('nccl_communication',), 'network_infrastructure'),
    'nccl_tests.correctness': (('nccl_communication',), 'network_infrastructure'),
    'network.node_links': ((), 'network_infrastructure'),
    'nvidia_smi.gpu': ((), 'hardware_health'),
    'nvidia_smi.topo': ((), 'hardware_health'),
    'pcie.aer': ((), 'hardware_health'),
    'pcie.limited_by': ((), 'hardware_health'),
    'pcie.lnksta': ((), 'hardware_health'),
    'run.coverage': ((), 'service_reliability'),
    'stack.cuda': (('training',), 'software_stack'),
    'system.cpu': (('system_resources',), 'resource_management'),
    'system.disk': (('system_resources',), 'resource_management'),
    'system.kernel': (('system_resources',), 'software_stack'),
    'system.limits': (('system_resources',), 'resource_management'),
    'system.memory': (('system_resources',), 'resource_management'),
    'system.numa': (('system_resources',), 'hardware_health'),
    'system.services': (('system_resources',), 'service_reliability'),
    'system.shm': (('system_resources',), 'resource_management'),
    'train.smoke': (('training',), 'service_reliability'),
    'workloads': ((), 'service_reliability'),
}


@pytest.mark.parametrize("check_id", sorted(PINNED))
def test_groups_and_component_are_what_they_were(check_id: str) -> None:
    groups, component, *levels = PINNED[check_id]
    assert finding_groups(check_id) == groups
    assert component_of(check_id) == component
    for level, at_level in (levels[0] if levels else {}).items():
        assert finding_groups(check_id, {"level": level}) == at_level


def test_every_known_id_declares_its_groups_and_component() -> None:
    undeclared = [s.id for s in registry.described() if s.groups is None or s.component is None]
    assert not undeclared, f"declare group= and component= for: {undeclared}"
    assert set(PINNED) <= {s.id for s in registry.described()}


def test_group_order_is_the_report_order() -> None:
    assert list(TEST_GROUPS) == ["gpu_detection", "gpu_health", "gpu_links", "system_resources", "nccl_communication",
                                 "efa_network", "dcgm_diagnostics", "dcgm_basic", "dcgm_extended", "compute",
                                 "training"]


def test_a_check_that_declares_nothing_counts_nowhere_and_fails_the_guard() -> None:
    with registry.CHECKS.scoped():
        @registry.check("zz.new_check", needs=())
        def new_check(ctx: CheckContext) -> list[Finding]:
            """A check somebody forgot to place."""
            return []

        assert finding_groups("zz.new_check") == ()
        assert component_of("zz.new_check") == "service_reliability"
        with pytest.raises(AssertionError, match=r"zz\.new_check"):
            test_every_known_id_declares_its_groups_and_component()

        @registry.check("zz.placed", needs=(), group="gpu_health", component="hardware_health")
        def placed(ctx: CheckContext) -> list[Finding]:
            """A check that says where it counts."""
            return []

        assert "zz.placed" in TEST_GROUPS["gpu_health"]
        assert ("zz.placed", "hardware_health") in list(COMPONENT_RULES)
    assert "zz.placed" not in TEST_GROUPS["gpu_health"]


@pytest.mark.parametrize("kwargs, message", [
    ({"group": "gpu_heath", "component": "hardware_health"}, "unknown report group 'gpu_heath'"),
    ({"group": "dcgm_basic@rx", "component": "hardware_health"}, "unknown report group 'dcgm_basic@rx'"),
    ({"group": (), "component": "hardware"}, "unknown score component 'hardware'"),
])
def test_a_misspelt_group_or_component_is_an_error_at_import(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        registry.declare("zz.typo", "Typo", "A typo.", **kwargs)


def test_grouping_a_node_report_imports_no_cluster_check() -> None:
    code = ("import sys; from gpu_preflight import registry; registry.discover('node')\n"
            "from gpu_preflight.findings.canonical import finding_groups, group_statuses\n"
            "from gpu_preflight.report.scores import component_of\n"
            "assert finding_groups('gpu.thermal') == ('gpu_health',), finding_groups('gpu.thermal')\n"
            "assert component_of('system.cpu') == 'resource_management'\n"
            "group_statuses([('evidence.parse', 'ERROR', None)])\n"
            "print(sorted(m for m in sys.modules if m.startswith('gpu_preflight.checks.cluster')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"
