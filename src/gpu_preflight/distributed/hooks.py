"""Rank hooks: code that a run calls as each rank enters a stage and before each collective
output is verified.

An extension point, documented in docs/distributed.md: ``GPU_PREFLIGHT_RANK_HOOKS`` names
hooks (comma-separated), each a name registered in :data:`HOOKS` or a ``package.module:attr``
that every rank imports as it starts; a library caller passes a :class:`Hooks` to
:func:`~gpu_preflight.distributed.rank.run_rank` directly. The variable is read where
ranks start because launchers (torchrun, srun, our own supervisor) start them as new
processes: an object cannot be handed over, a name in the environment can.

A hook is any object with one or both of ``stage(rank, name)`` and ``output(op, rank,
tensor)``. The test suite plays crashed, hung and corrupting GPUs through it
(``tests/fault_hooks.py``); a site can trace stages into its own tooling. A hook that cannot
be loaded stops the rank with a one-line reason, rather than running without it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec

from ..registries import Registry

__all__ = ["HOOKS", "HOOKS_ENV", "Hooks", "hooks_from_env"]

HOOKS_ENV = "GPU_PREFLIGHT_RANK_HOOKS"
HOOKS: Registry[object] = Registry("rank hook")


class Hooks(msgspec.Struct, frozen=True):
    """The stage and output callbacks of the loaded hooks, called in the order they were named."""

    stages: tuple[Callable[[int, str], None], ...] = ()
    outputs: tuple[Callable[[str, int, Any], None], ...] = ()

    @classmethod
    def of(cls, hooks: Iterable[object]) -> Hooks:
        """The callbacks of these hook objects (each may have ``stage``, ``output`` or both)."""
        items = list(hooks)
        stages = [getattr(h, "stage", None) for h in items]
        outputs = [getattr(h, "output", None) for h in items]
        return cls(tuple(c for c in stages if callable(c)), tuple(c for c in outputs if callable(c)))

    def stage(self, rank: int, name: str) -> None:
        for call in self.stages:
            call(rank, name)

    def output(self, op: str, rank: int, out: Any) -> None:
        for call in self.outputs:
            call(op, rank, out)

    @property
    def inspect(self) -> Callable[[str, int, Any], None] | None:
        """The output callback for a collective sweep, or None when no hook looks at outputs."""
        return self.output if self.outputs else None


def load(names: Iterable[str]) -> Hooks:
    """The hooks under these names (registered names or ``module:attr``)."""
    found = []
    for name in names:
        if ":" in name and name not in HOOKS:
            HOOKS.lazy(name, name)
        try:
            found.append(HOOKS.get(name))
        except Exception as exc:
            raise ValueError(f"rank hook {name!r} ({HOOKS_ENV}) cannot be loaded: {type(exc).__name__}: {exc}") \
                from exc
    return Hooks.of(found)


def hooks_from_env(environ: Mapping[str, str]) -> Hooks:
    """The hooks ``GPU_PREFLIGHT_RANK_HOOKS`` names (none when it is unset or empty)."""
    return load(n.strip() for n in environ.get(HOOKS_ENV, "").split(",") if n.strip())
