"""How gpu-preflight acts on a Slurm cluster: the ``[slurm]`` config section.

Draining a node takes it away from every user of the cluster, so each knob here exists
to keep an automatic drain honest: a reason prefix that marks our own drains (and only
those are ever resumed), a circuit breaker on the share of the cluster that may be out
at once, a dry-run default, and limits on how old a result may be before it is not
trusted. ``gpu-preflight config defaults`` prints these with their meaning once the
section is registered in :class:`~gpu_preflight.config.schema.Config`.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from .fields import setting

__all__ = ["SlurmConfig", "slurm_config"]


class SlurmConfig(msgspec.Struct):
    """Drain/resume policy for ``gpu-preflight slurm healthcheck|prolog|epilog|drain-report``."""

    reason_prefix: str = setting(
        "gpu-preflight:", "Every drain reason starts with this. Only nodes whose reason starts with it are ever "
                          "resumed; an operator takes a node over by giving it any other reason.")
    max_drain_fraction: float = setting(
        0.1, "Circuit breaker: never drain a node when that would leave more than this share of the cluster "
             "drained, down or failed (by anyone). Refused drains are reported, not retried.", "ratio", min=0, max=1)
    min_drain_nodes: int = setting(
        1, "The breaker always allows this many nodes out, so a small cluster can still drain a bad node "
           "(10% of 8 nodes rounds down to none).", "nodes", min=0, max=1_000_000)
    dry_run: bool = setting(
        True, "Print the scontrol commands instead of running them; --apply (or false here) makes it act.")
    result_file: str = setting(
        "/var/lib/gpu-preflight/report.json",
        "The last result of this node (a report.json from `run --report-dir`, written by prolog/epilog too); "
        "'{node}' is replaced by the Slurm node name, for results on shared storage.")
    max_result_age_s: float = setting(
        3600.0, "A result older than this is stale: never resumes a node, and is handled by "
                "stale_result_action.", "s", above=0, max=31_536_000)
    stale_result_action: Literal["ignore", "drain"] = setting(
        "ignore", "What a missing, unreadable or stale result does in healthcheck mode: 'ignore' reports it and "
                  "changes nothing; 'drain' drains the node (breaker permitting) until a fresh result passes.")
    drain_on: Literal["fail", "warn"] = setting(
        "fail", "Findings that drain: 'fail' = FAIL and ERROR (could not measure); 'warn' adds WARN.")
    ignore_checks: list[str] = setting(
        [], "Check ids or globs (e.g. 'system.services') whose findings never drain a node; they are still "
            "reported.")
    resume_state: Literal["UNDRAIN", "RESUME"] = setting(
        "UNDRAIN", "State set to resume a node: UNDRAIN clears only the drain flag (a DOWN node stays down "
                   "until it registers); RESUME for Slurm releases without UNDRAIN (before 20.11).")
    scontrol: str = setting("scontrol", "scontrol binary (HealthCheckProgram runs with an empty PATH).")
    command_timeout_s: float = setting(
        10.0, "Time limit for each scontrol call; slurmd kills a HealthCheckProgram after 60 s.", "s",
        above=0, max=3600)
    prolog_timeout_s: float = setting(
        20.0, "Whole budget of the node checks in prolog/epilog; a run past it is an ERROR (fails closed).", "s",
        above=0, max=86_400)

    def problems(self) -> list[str]:
        """Values the types allow but the policy cannot work with (empty when usable)."""
        out = []
        if not self.reason_prefix.strip():
            out.append("slurm.reason_prefix must not be empty: it is how our own drains are recognised")
        if not 0.0 <= self.max_drain_fraction <= 1.0:
            out.append(f"slurm.max_drain_fraction must be within 0..1, got {self.max_drain_fraction:g}")
        if self.min_drain_nodes < 0:
            out.append(f"slurm.min_drain_nodes must be >= 0, got {self.min_drain_nodes}")
        for name in ("max_result_age_s", "command_timeout_s", "prolog_timeout_s"):
            if not getattr(self, name) > 0:
                out.append(f"slurm.{name} must be positive")
        return out


def slurm_config(config: object) -> SlurmConfig:
    """The ``slurm`` section of a resolved config, or the defaults where none is registered."""
    section = getattr(config, "slurm", None)
    return section if isinstance(section, SlurmConfig) else SlurmConfig()
