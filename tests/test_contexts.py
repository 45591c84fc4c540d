"""Typed probe and check contexts: the run's inputs are fields, the shared state (diagnostics
phase, once-per-run slots, a monitor's kept objects) is one object per run (issue 15). No
probe reads an untyped options mapping any more."""

from __future__ import annotations

import msgspec
import pytest

from gpu_preflight.config import Config
from gpu_preflight.diagnostics.phase import RunPhase, run_phase
from gpu_preflight.probes.shared import once
from gpu_preflight.registry import CheckContext, ProbeContext, ProbeState, RunInputs


def context() -> ProbeContext:
    return ProbeContext(Config(), RunInputs(replay="node.json", suite="full"), 30.0,
                        ProbeState(kept={"tool_cache": "kept by a monitor"}))


def test_inputs_are_typed_and_fixed_for_the_run() -> None:
    ctx = context()
    assert ctx.inputs.replay == "node.json" and ctx.inputs.kernel_log is None and ctx.inputs.suite == "full"
    assert ctx.state.kept.get("tool_cache") == "kept by a monitor"
    with pytest.raises(AttributeError):
        ctx.inputs.replay = "other.json"  # type: ignore[misc]
    assert not hasattr(ctx, "options")


def test_the_phase_is_a_typed_field_shared_by_every_context_of_the_run() -> None:
    ctx = context()
    longer = msgspec.structs.replace(ctx, timeout_s=600.0)  # the engine's per-probe budget
    phase = run_phase(longer.state)
    assert isinstance(phase, RunPhase) and ctx.state.phase is phase and run_phase(ctx.state) is phase
    assert ctx.state.kept == {"tool_cache": "kept by a monitor"}


def test_once_slots_live_in_the_runs_state() -> None:
    ctx = context()
    calls: list[int] = []

    def compute(value: int) -> int:
        calls.append(value)
        return value

    assert once(ctx.state, "k", lambda: compute(7)) == 7
    assert once(msgspec.structs.replace(ctx, timeout_s=1.0).state, "k", lambda: compute(8)) == 7
    assert calls == [7] and "_once_k" in ctx.state.kept
    assert once(context().state, "k", lambda: 9) == 9  # another run, another slot


def test_a_check_context_has_no_untyped_options() -> None:
    assert CheckContext.__struct_fields__ == ("host", "facts", "config", "check_id")
