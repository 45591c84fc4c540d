"""Node snapshots for the command line: read one back for ``--replay``, take one of this host.

The probes own the format (:mod:`gpu_preflight.probes.gpu` validates every value a check
reads, :mod:`gpu_preflight.probes.system` captures the host); probes are plugins that only
the engine's layer imports, so the commands that validate a replay file before anything
starts, or write a snapshot, reach them through here.
"""

from __future__ import annotations

from typing import Any

from .probes.gpu import ReplayError, load_dump
from .probes.system import snapshot_host as take

__all__ = ["ReplayError", "load_dump", "snapshot_host"]


def snapshot_host(config: Any, report_dir: str | None = None) -> dict[str, Any]:
    """This host's facts and kernel-log Xid lines, in the form a replay reads back (imported only when taken)."""
    return take(config, report_dir)
