"""The only code that runs ``scontrol``: argv lists, a time limit per call, errors that say why.

Queries run in dry-run mode too (a plan needs the cluster's state); only ``update``
commands are withheld, and they are printed in a form that can be pasted into a shell.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence

from .slurm_nodes import SlurmNode, parse_nodes

__all__ = ["Scontrol", "ScontrolError"]


class ScontrolError(RuntimeError):
    """scontrol could not be run, did not answer in time, or refused the request."""


class Scontrol:
    """A thin client over the scontrol binary.

    ``SLURM_TIME_FORMAT=standard`` pins reason times to ``%Y-%m-%dT%H:%M:%S`` whatever
    the site's environment sets, so the time of our own drain can be compared with the
    time of a re-check.
    """

    def __init__(self, binary: str = "scontrol", timeout_s: float = 10.0,
                 environ: Mapping[str, str] | None = None) -> None:
        self.binary = binary
        self.timeout_s = timeout_s
        self.env = dict(os.environ if environ is None else environ, SLURM_TIME_FORMAT="standard")

    def _run(self, args: Sequence[str]) -> str:
        argv = [self.binary, *args]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout_s, env=self.env,
                                  check=False)
        except FileNotFoundError as exc:
            raise ScontrolError(f"{self.binary} not found: install slurm-client or set slurm.scontrol "
                                f"(HealthCheckProgram runs with an empty PATH)") from exc
        except subprocess.TimeoutExpired as exc:
            raise ScontrolError(f"`{shlex.join(argv)}` did not answer within {self.timeout_s:g} s "
                                f"(is slurmctld up and reachable?)") from exc
        except OSError as exc:
            raise ScontrolError(f"cannot run {self.binary}: {exc}") from exc
        if done.returncode != 0:
            said = (done.stderr.strip() or done.stdout.strip() or "no message").splitlines()[-1]
            raise ScontrolError(f"`{shlex.join(argv)}` failed (exit {done.returncode}): {said}")
        return done.stdout

    def nodes(self) -> list[SlurmNode]:
        """Every node slurmctld knows, partitioned or not."""
        return parse_nodes(self._run(["show", "node"]))

    def node(self, name: str) -> SlurmNode:
        found = [n for n in parse_nodes(self._run(["show", "node", name])) if n.name == name]
        if not found:
            raise ScontrolError(f"slurmctld has no node named {name!r}")
        return found[0]

    def command(self, args: Sequence[str]) -> str:
        """The full command line for ``args``, quoted for a shell (what dry run prints)."""
        return shlex.join([self.binary, *args])

    def update(self, args: Sequence[str]) -> None:
        """Run ``scontrol update ...``; raises :class:`ScontrolError` when refused."""
        self._run(args)
