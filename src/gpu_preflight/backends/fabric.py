"""The NCCL network plugin and the fabric environment a job would inherit.

NCCL loads an external network plugin (aws-ofi-nccl for EFA) by ``dlopen``:
``NCCL_NET_PLUGIN=<name>`` selects ``libnccl-net-<name>.so`` (or a path), otherwise it
tries ``libnccl-net.so``; the loader searches ``LD_LIBRARY_PATH`` and the system
directories. Without the plugin NCCL silently falls back to TCP sockets, which is why
"is the library there?" is worth asking before a job. The variables that steer the
plugin and libfabric (``NCCL_NET_PLUGIN``, ``FI_PROVIDER``, ``FI_EFA_*``) are reported
as they are, because a stray ``FI_PROVIDER=tcp`` explains a slow job as well as a
missing library does.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["OfiPlugin", "fabric_environment", "find_ofi_plugin"]

ENV_NAMES = ("NCCL_NET_PLUGIN", "NCCL_NET", "FI_PROVIDER", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "LD_LIBRARY_PATH")
ENV_PREFIXES = ("FI_EFA_", "OFI_NCCL_")
DEFAULT_NAMES = ("libnccl-net.so", "libnccl-net-ofi.so", "libnccl-net-aws-ofi.so")


@dataclass
class OfiPlugin:
    """Where the NCCL net plugin was found (``path``), or every place that was searched."""

    installed: bool
    path: str | None = None
    requested: str | None = None
    searched: list[str] = field(default_factory=list)


def fabric_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables that steer NCCL's network plugin and libfabric, as set for this process."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in sorted(env.items()) if k in ENV_NAMES or k.startswith(ENV_PREFIXES)}


def _candidates(requested: str | None) -> list[str]:
    if not requested:
        return list(DEFAULT_NAMES)
    if requested.endswith(".so") or ".so." in requested:
        return [requested]
    return [f"libnccl-net-{requested}.so", f"libnccl-{requested}.so", requested]


def find_ofi_plugin(dirs: Iterable[str], environ: Mapping[str, str] | None = None) -> OfiPlugin:
    """The plugin NCCL would load: ``NCCL_NET_PLUGIN``'s choice, else the default names.

    Searched in ``LD_LIBRARY_PATH`` first (as the dynamic loader does), then ``dirs``.
    An absolute ``NCCL_NET_PLUGIN`` path is checked as given.
    """
    env = os.environ if environ is None else environ
    requested = env.get("NCCL_NET_PLUGIN") or None
    if requested and requested.lower() == "none":  # plugins switched off on purpose
        return OfiPlugin(False, None, requested, [])
    if requested and os.sep in requested:
        found = Path(requested).is_file()
        return OfiPlugin(found, requested if found else None, requested, [requested])
    search = [d for d in env.get("LD_LIBRARY_PATH", "").split(":") if d] + [d for d in dirs if d]
    search = list(dict.fromkeys(search))
    names = _candidates(requested)
    for directory in search:
        for name in names:
            candidate = Path(directory) / name
            if candidate.is_file():
                return OfiPlugin(True, str(candidate), requested, search)
    return OfiPlugin(False, None, requested, search)
