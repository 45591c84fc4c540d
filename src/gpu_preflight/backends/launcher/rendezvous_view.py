"""torchrun's own record of which host holds which node rank: its c10d rendezvous state.

A worker that crashes before it says hello leaves no name behind, and torchrun numbers nodes
in join order, so its node rank alone does not say which machine failed. The agents did
register: the c10d rendezvous backend keeps ``torch.rendezvous.<run_id>`` in the store at
``--rdzv-endpoint`` — torch's pickled ``_RendezvousState``, whose ``participants`` map each
agent (``--local-addr`` or its FQDN) to its node rank. Workers are not told the endpoint, so
it is read from the agent's settings: ``PET_RDZV_*`` variables or the agent's command line.
Best effort: anything unexpected gives no names, never an error.
"""

from __future__ import annotations

import base64
import io
import os
import pickle
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

DEFAULT_RDZV_PORT = 29400


def agent_settings(environ: Mapping[str, str], agent_argv: Sequence[str]) -> dict[str, str]:
    """``backend``, ``endpoint`` and ``id`` of the rendezvous, from ``PET_RDZV_*`` or torchrun's argv."""
    found = {k: environ[f"PET_RDZV_{k.upper()}"] for k in ("backend", "endpoint", "id")
             if environ.get(f"PET_RDZV_{k.upper()}")}
    args = list(agent_argv)
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        key = name.lstrip("-").replace("-", "_")
        if key in ("rdzv_backend", "rdzv_endpoint", "rdzv_id"):
            if not eq and i + 1 < len(args):
                value = args[i + 1]
            found.setdefault(key[len("rdzv_"):], value)
    return found


def parse_endpoint(text: str) -> tuple[str, int]:
    """``host:port``, ``[v6]:port`` or ``host`` (torchrun's default port)."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, int(rest.lstrip(":") or DEFAULT_RDZV_PORT)
    host, _, port = text.rpartition(":") if text.count(":") == 1 else (text, "", "")
    return host, int(port or DEFAULT_RDZV_PORT)


_ALLOWED = {("torch.distributed.elastic.rendezvous.dynamic_rendezvous", "_RendezvousState"),
            ("torch.distributed.elastic.rendezvous.dynamic_rendezvous", "_NodeDesc"),
            ("datetime", "datetime"), ("datetime", "timedelta"), ("datetime", "timezone"),
            ("builtins", "set"), ("builtins", "frozenset")}


class _StateUnpickler(pickle.Unpickler):
    """Only the classes a rendezvous state is made of: the store is the job's, but a stray
    writer must not get code run by a health check."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not part of a rendezvous state")
        return super().find_class(module, name)


def participants(state_bits: bytes) -> dict[int, str]:
    """Node rank → agent address, from the store's (base64) rendezvous state."""
    state = _StateUnpickler(io.BytesIO(base64.b64decode(state_bits))).load()
    return {int(rank): str(node.addr) for node, rank in state.participants.items()}


def node_addresses(environ: Mapping[str, str] | None = None, timeout_s: float = 5.0) -> dict[int, str]:
    """Node rank → host as torchrun's rendezvous knows it; empty when it cannot be read."""
    env = os.environ if environ is None else environ
    try:
        argv = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        argv = []
    settings = agent_settings(env, argv)
    run_id = env.get("TORCHELASTIC_RUN_ID") or settings.get("id")
    if settings.get("backend", "c10d") != "c10d" or not settings.get("endpoint") or not run_id:
        return {}
    try:
        # optional: torch comes with the [torch] extra, not with a node-only install
        import torch.distributed as dist

        host, port = parse_endpoint(settings["endpoint"])
        store = dist.TCPStore(host, port, is_master=False, timeout=timedelta(seconds=timeout_s))  # type: ignore[attr-defined]
        key = f"torch.rendezvous.{run_id}"
        if not store.check([key]):
            return {}
        return participants(bytes(store.get(key)))
    except Exception:
        return {}
