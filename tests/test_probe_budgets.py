"""A probe's time budget is part of its declaration (``@probe(name, budget=fn)``).

The engine grants ``max(run limit, budget)``; a budget that raises, or a probe without
one, leaves the run's limit in force. The budgets of the diagnostic probes follow their
tools' settings, so a site that raises ``dcgm_timeout_r2_s`` gets a longer probe too.
"""

from __future__ import annotations

import msgspec
import pytest

from gpu_preflight import registry
from gpu_preflight.config import Config, build_config
from gpu_preflight.config.diagnostics import diagnostics_config
from gpu_preflight.diagnostics.budgets import MARGIN_S
from gpu_preflight.engine import _run_probes
from gpu_preflight.registry import PROBES, ProbeContext, RunInputs, probe, probe_budget


def _ctx(config: Config | None = None, suite: str = "quick") -> ProbeContext:
    return ProbeContext(config or Config(), RunInputs(suite=suite), 30.0)


def test_the_diagnostic_probes_declare_their_budgets() -> None:
    registry.discover("node")
    declared = sorted(name for name, spec in PROBES.items() if spec.budget is not None)
    assert declared == ["dcgm", "infiniband", "nccl_tests", "storage"]


def test_budgets_follow_the_tools_settings() -> None:
    cfg, _ = build_config(overrides=["diagnostics.dcgm_timeout_r1_s=100", "diagnostics.dcgm_timeout_r2_s=700",
                                     "diagnostics.nccl_tests_timeout_s=50"])
    assert probe_budget("dcgm", _ctx(cfg)) == 100 + MARGIN_S
    assert probe_budget("dcgm", _ctx(cfg, "full")) == 100 + 700 + MARGIN_S
    tests = len(diagnostics_config(cfg).nccl_tests)
    assert probe_budget("nccl_tests", _ctx(cfg)) == tests * 50 + MARGIN_S
    assert probe_budget("infiniband", _ctx(cfg, "full")) == max(810, tests * 50 + MARGIN_S) + MARGIN_S


def test_a_probe_without_a_budget_or_an_unknown_probe_gets_none() -> None:
    assert probe_budget("gpu", _ctx()) == 0.0
    assert probe_budget("no_such_probe", _ctx()) == 0.0


def test_a_failing_or_negative_budget_never_raises() -> None:
    def broken(ctx: ProbeContext) -> float:
        raise RuntimeError("budget bug")

    with PROBES.scoped():
        probe("budget_broken", budget=broken)(lambda ctx: 1)
        probe("budget_negative", budget=lambda ctx: -5.0)(lambda ctx: 1)
        assert probe_budget("budget_broken", _ctx()) == 0.0
        assert probe_budget("budget_negative", _ctx()) == 0.0
    assert "budget_broken" not in PROBES


@pytest.mark.parametrize(("budget", "granted"), [(None, 0.2), (5.0, 5.0), (0.05, 0.2)])
def test_the_engine_grants_the_larger_of_run_limit_and_budget(budget: float | None, granted: float) -> None:
    def seen(ctx: ProbeContext) -> float:
        return ctx.timeout_s

    with PROBES.scoped():
        probe("budget_seen", budget=None if budget is None else (lambda ctx: budget))(seen)
        facts, errors = _run_probes(["budget_seen"], msgspec.structs.replace(_ctx(), timeout_s=0.2), 0.2)
    assert errors == {} and facts["budget_seen"] == granted


def test_the_storage_budget_is_each_directory_in_turn() -> None:
    cfg, _ = build_config(overrides=['system.io_paths=["/a", "/b", "/c"]', "system.io_timeout_s=20"])
    assert probe_budget("storage", _ctx(cfg, "full")) == 3 * 20 + MARGIN_S
