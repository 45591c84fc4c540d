"""Rank hooks: loaded by name from the environment, called on stages and collective outputs; the
product itself carries no fault injection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.distributed.hooks import HOOKS, HOOKS_ENV, Hooks, hooks_from_env

from .fault_hooks import HOOKS_REF, FaultHooks
from .torch_extra import torch_or_skip

SRC = Path(__file__).resolve().parents[1] / "src"


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def stage(self, rank: int, name: str) -> None:
        self.seen.append(("stage", rank, name))


def test_none_named_none_loaded() -> None:
    assert hooks_from_env({}) == Hooks()
    assert Hooks().inspect is None  # collectives skip the call entirely


def test_module_attr_and_registered_names_load_in_order() -> None:
    rec = Recorder()
    with HOOKS.scoped():
        HOOKS.register("recorder", rec)
        hooks = hooks_from_env({HOOKS_ENV: f" recorder , {HOOKS_REF}"})
        hooks.stage(3, "gemm")
    assert rec.seen == [("stage", 3, "gemm")]
    assert len(hooks.stages) == 2 and len(hooks.outputs) == 1 and hooks.inspect is not None


@pytest.mark.parametrize("name", ["tests.no_such_module:hooks", "tests.fault_hooks:nothing", "recordr"])
def test_a_hook_that_cannot_load_is_one_clear_line(name: str) -> None:
    with pytest.raises(ValueError) as info:
        hooks_from_env({HOOKS_ENV: name})
    message = str(info.value)
    assert message.startswith(f"rank hook {name!r} ({HOOKS_ENV}) cannot be loaded: ") and "\n" not in message


def test_the_fault_hook_corrupts_only_its_rank_and_op() -> None:
    torch = torch_or_skip()
    hook = FaultHooks({"GP_TEST_CORRUPT": "all_reduce:1"})
    out = torch.ones(4)
    Hooks.of([hook]).output("all_gather", 1, out)
    Hooks.of([hook]).output("all_reduce", 0, out)
    assert out.tolist() == [1.0] * 4
    Hooks.of([hook]).output("all_reduce", 1, out)
    assert out.tolist() == [2.0, 1.0, 1.0, 1.0]


def test_fault_spec_targets() -> None:
    hook = FaultHooks({"GP_TEST_FAULT": "stop:*:arrive"})
    assert (hook.action, hook.target, hook.at) == ("stop", "*", "arrive")
    hook.stage(0, "gemm")  # another stage: nothing happens


def test_no_fault_injection_in_the_product() -> None:
    words = ("TEST_FAULT", "TEST_CORRUPT", "GP_TEST_", "SIGSTOP")
    hits = [f"{p.relative_to(SRC)}: {w}" for p in SRC.rglob("*.py") for w in words if w in p.read_text()]
    assert not hits, hits
