"""Who this node is, measured on the node and sent with its data.

Rank 0 names every node, finding, link, localisation suspect, exclude list, Slurm drain and
Kubernetes label from what the node said about itself, never from the node's position in a
host list: torchrun's c10d rendezvous numbers nodes in the order the agents join (by address
and process id), not in the order of ``SLURM_JOB_NODELIST`` or ``SM_HOSTS``, so "node *i* is
the *i*-th host" blames a healthy host for another's broken link. A host list from the
launcher is used only to find who is *missing*, by name.

One name per node, the first of these that is set (:data:`PRECEDENCE`):

1. ``GPU_PREFLIGHT_NODE_NAME`` — the operator's explicit word (our Kubernetes manifests set it
   to the pod's ``spec.nodeName`` through the downward API);
2. ``SLURMD_NODENAME`` — Slurm's node name, what ``scontrol update ... state=drain`` and
   ``sbatch --exclude`` take (it can differ from the host name: ``gpu-st-p5-3`` on
   ``ip-10-1-2-3``);
3. ``SM_CURRENT_HOST`` (or SageMaker's resourceconfig.json) — ``algo-N``;
4. ``NODE_NAME`` under Kubernetes — the node a pod runs on, where a manifest exposes it;
5. the OS host name.

The others are kept beside it (``node_info.identity``). Where the sources disagree in a way
that could misname the node — the chosen name is not in the job's own host list — the node
says so (:attr:`NodeIdentity.conflicts`) and the cluster report turns it into a finding.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

__all__ = ["PRECEDENCE", "NodeIdentity", "choose_name", "local_address", "measure"]

PRECEDENCE = ("GPU_PREFLIGHT_NODE_NAME", "SLURMD_NODENAME", "SM_CURRENT_HOST", "NODE_NAME", "hostname")


class NodeIdentity(msgspec.Struct, frozen=True):
    """What a node says about itself: the chosen ``name`` and where it came from, and every
    other name the node goes by (``None`` where it has none)."""

    name: str
    source: str
    hostname: str
    fqdn: str | None = None
    address: str | None = None
    node_rank: int | None = None
    slurm_node: str | None = None
    sagemaker_host: str | None = None
    k8s_node: str | None = None
    k8s_pod: str | None = None
    conflicts: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The identity as sent and reported: unset names are left out."""
        out: dict[str, Any] = {"name": self.name, "source": self.source, "hostname": self.hostname}
        for key in ("fqdn", "address", "node_rank", "slurm_node", "sagemaker_host", "k8s_node", "k8s_pod"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.conflicts:
            out["conflicts"] = list(self.conflicts)
        return out


def choose_name(env: Mapping[str, str], hostname: str, sagemaker_host: str | None = None) -> tuple[str, str]:
    """``(name, source)`` by :data:`PRECEDENCE` (``sagemaker_host``: from resourceconfig.json
    where ``SM_CURRENT_HOST`` is unset)."""
    for var in PRECEDENCE[:-1]:
        value = (env.get(var) or "").strip()
        if var == "SM_CURRENT_HOST" and not value:
            value = sagemaker_host or ""
        if var == "NODE_NAME" and "KUBERNETES_SERVICE_HOST" not in env:
            continue  # a generic name: only a pod's manifest gives it this meaning
        if value:
            return value, var
    return hostname, "hostname"


def measure(env: Mapping[str, str], *, hostname: str, node_rank: int | None, job_hosts: Sequence[str] = (),
            sagemaker_host: str | None = None, master_addr: str | None = None, master_port: int | None = None,
            fqdn: Callable[[], str | None] | None = None) -> NodeIdentity:
    """This node's identity. ``job_hosts``: the job's host list as the launcher gives it, only
    to say whether the chosen name is in it; ``fqdn``: how to read the fully qualified name
    (it may ask DNS, so the caller bounds it; ``None`` skips it)."""
    name, source = choose_name(env, hostname, sagemaker_host)
    conflicts = []
    if job_hosts and name not in job_hosts:
        shown = ", ".join(list(job_hosts)[:8]) + (", ..." if len(job_hosts) > 8 else "")
        listed = next((v for v in ("SM_HOSTS", "SLURM_JOB_NODELIST", "SLURM_NODELIST") if env.get(v)),
                      "SageMaker's resourceconfig.json")
        conflicts.append(f"this node's name {name!r} (from {source}) is not in the job's host list "
                         f"{listed} ({shown})")
    slurm = (env.get("SLURMD_NODENAME") or "").strip() or None
    if slurm and name != slurm:
        conflicts.append(f"GPU_PREFLIGHT_NODE_NAME={name!r} overrides Slurm's name {slurm!r} for this node: "
                         "drains and exclude lists will use the override")
    k8s = "KUBERNETES_SERVICE_HOST" in env
    return NodeIdentity(
        name, source, hostname, fqdn() if fqdn is not None else None,
        local_address(master_addr, master_port), node_rank, slurm,
        (env.get("SM_CURRENT_HOST") or "").strip() or sagemaker_host or None,
        ((env.get("NODE_NAME") or "").strip() or None) if k8s else None,
        ((env.get("HOSTNAME") or "").strip() or hostname) if k8s else None, tuple(conflicts))


def local_address(master_addr: str | None, master_port: int | None) -> str | None:
    """The address this node reaches the job's store from: the source address the kernel picks
    for the master (a UDP socket's ``connect`` sends nothing), so multi-homed hosts give the
    interface the job uses, not the first one listed. ``None`` without a master or a route."""
    if not master_addr:
        return None
    try:
        family, _, _, _, addr = socket.getaddrinfo(master_addr, master_port or 0, type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect(addr)
            return str(s.getsockname()[0])
    except (OSError, UnicodeError, IndexError):
        return None
