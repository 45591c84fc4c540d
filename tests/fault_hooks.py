"""Faults played through the rank hooks (``GPU_PREFLIGHT_RANK_HOOKS``): the tests' crashed,
hung and corrupting GPUs, kept out of the product.

A test names this module's :data:`hooks` in the ranks' environment and says which fault in
:data:`FAULT` or :data:`CORRUPT` (:func:`fault_env` sets all three):

- ``FAULT="kill:RANK:STAGE"`` or ``"stop:RANK:STAGE"``: that rank dies (exit 137) or
  SIGSTOPs itself as it enters the stage. RANK ``*`` is whichever rank reads it (set on one
  host only: torchrun numbers hosts in join order); stage ``arrive`` is before the rank
  registers, i.e. before the process group forms.
- ``CORRUPT="OP:RANK"``: one element of that rank's output of OP is off by one before it is
  verified.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

FAULT = "GP_TEST_FAULT"
CORRUPT = "GP_TEST_CORRUPT"
HOOKS_REF = "tests.fault_hooks:hooks"
REPO = Path(__file__).resolve().parents[1]


def fault_env(*, fault: str | None = None, corrupt: str | None = None) -> dict[str, str]:
    """The environment that makes a run's ranks play this fault (this checkout importable)."""
    env = {"GPU_PREFLIGHT_RANK_HOOKS": HOOKS_REF,
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    if fault:
        env[FAULT] = fault
    if corrupt:
        env[CORRUPT] = corrupt
    return env


class FaultHooks:
    """Reads the fault once, as the rank starts."""

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        action, _, rest = env.get(FAULT, "").partition(":")
        target, _, at = rest.partition(":")
        self.action, self.target, self.at = action, target, at
        self.corrupt = env.get(CORRUPT, "")

    def stage(self, rank: int, name: str) -> None:
        if not self.action or self.target not in (str(rank), "*") or name != self.at:
            return
        if self.action == "kill":
            os._exit(137)
        if self.action == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)

    def output(self, op: str, rank: int, out: Any) -> None:
        if self.corrupt == f"{op}:{rank}" and out.numel():
            out.view(-1)[0] += 1.0


hooks = FaultHooks()
