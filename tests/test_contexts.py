"""Typed probe and check contexts: the run's inputs are fields, the shared state (diagnostics
phase, once-per-run slots, a monitor's kept objects) is one object per run, and ``ctx.options``
is a mapping view over both for the probes that read it (issue 15)."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from gpu_preflight.config import Config
from gpu_preflight.diagnostics.phase import RunPhase, run_phase
from gpu_preflight.probes.shared import once
from gpu_preflight.registry import PHASE_KEY, CheckContext, ProbeContext, ProbeState, RunInputs


def context() -> ProbeContext:
    return ProbeContext(Config(), RunInputs(replay="node.json", suite="full"), 30.0,
                        ProbeState(kept={"tool_cache": "kept by a monitor"}))


def test_inputs_are_typed_and_read_through_the_view() -> None:
    ctx = context()
    assert ctx.inputs.replay == "node.json" and ctx.inputs.kernel_log is None
    assert ctx.options.get("replay") == "node.json" and ctx.options.get("suite") == "full"
    assert ctx.options.get("report_dir") is None and ctx.options.get("tool_cache") == "kept by a monitor"
    with pytest.raises(TypeError, match="run input 'replay' is fixed"):
        ctx.options["replay"] = "other.json"


def test_the_phase_is_a_typed_field_shared_by_every_context_of_the_run() -> None:
    ctx = context()
    longer = replace(ctx, timeout_s=600.0)  # the engine's per-probe budget
    phase = run_phase(longer.options)
    assert isinstance(phase, RunPhase) and ctx.state.phase is phase and run_phase(ctx.options) is phase
    assert PHASE_KEY not in ctx.state.kept and ctx.options[PHASE_KEY] is phase


def test_once_slots_live_in_the_runs_state() -> None:
    ctx = context()
    calls: list[int] = []

    def compute(value: int) -> int:
        calls.append(value)
        return value

    assert once(ctx.options, "k", lambda: compute(7)) == 7
    assert once(replace(ctx, timeout_s=1.0).options, "k", lambda: compute(8)) == 7
    assert calls == [7] and "_once_k" in ctx.state.kept
    assert once(context().options, "k", lambda: 9) == 9  # another run, another slot


def test_from_options_reads_the_mapping_form() -> None:
    ctx = ProbeContext.from_options(Config(), {"kernel_log": "k.log", "suite": "full", "x": 1}, 5.0)
    assert ctx.inputs == RunInputs(kernel_log="k.log", suite="full") and ctx.state.kept == {"x": 1}
    assert sorted(ctx.options) == ["kernel_log", "replay", "report_dir", "suite", "x"]


def test_a_check_context_has_no_untyped_options() -> None:
    assert [f.name for f in fields(CheckContext)] == ["host", "facts", "config", "check_id"]
