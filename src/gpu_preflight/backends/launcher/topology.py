"""Who am I in the job: rank, local rank, node, and the job's shape, from the launcher's env.

Pure functions over an environment mapping (and SageMaker's resource config), so every
launcher is testable without running it. Order matters: torchrun inside ``srun`` or a
SageMaker job sets both, and torchrun's per-process variables are the ones that
describe *this* process.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

import hostlist
import msgspec
from msgspec.structs import asdict, replace

from .identity import choose_name

SAGEMAKER_RESOURCE_CONFIG = Path("/opt/ml/input/config/resourceconfig.json")
DEFAULT_PORT = 29500


class TopologyError(ValueError):
    """The launcher's variables are inconsistent or incomplete."""


class Launcher(StrEnum):
    """What started this process, told once from its environment (:func:`detect`) and compared
    as this value everywhere. A ``StrEnum``: its value is the word reports and payloads carry
    (``cluster_topology.launcher``) and messages print, unchanged by the type.

    A new launcher is a member here, its branch in :func:`_detect`, and any property below
    that holds for it.
    """

    TORCHRUN = "torchrun"  # torchrun's elastic agent (TORCHELASTIC_RUN_ID or its four variables)
    SELF = "self"  # gpu-preflight's own workers on one node (:mod:`.launch`)
    OPENMPI = "openmpi"  # mpirun (OMPI_COMM_WORLD_*)
    PMIX = "pmix"  # a PMIx launcher other than srun (PMIX_RANK)
    SLURM = "slurm"  # srun (SLURM_PROCID, SLURM_NTASKS)
    KUBEFLOW = "kubeflow"  # a Kubeflow PyTorchJob: RANK/WORLD_SIZE in a pod (PET_*, KUBERNETES_SERVICE_HOST)
    ENV = "env"  # RANK/WORLD_SIZE set by hand or by another tool
    SAGEMAKER = "sagemaker"  # a SageMaker job without a distribution launcher: one process per host
    NONE = "none"  # started by hand: not distributed

    @property
    def hosts_in_node_order(self) -> bool:
        """Its host list is in node-rank order (Slurm, SageMaker), so node rank ``n`` is ``hosts[n]``;
        torchrun's c10d rendezvous numbers nodes in join order, which only it records."""
        return self in (Launcher.SLURM, Launcher.SAGEMAKER)


class Topology(msgspec.Struct, frozen=True):
    """This process's place in the job."""

    launcher: Launcher
    world_size: int
    rank: int
    local_rank: int
    local_world_size: int
    node_rank: int
    num_nodes: int
    hostname: str
    hosts: tuple[str, ...] = ()
    master_addr: str | None = None
    master_port: int | None = None
    extra: dict[str, Any] = {}
    own_name: str | None = None

    @property
    def is_distributed(self) -> bool:
        return self.launcher is not Launcher.NONE

    @property
    def self_launched(self) -> bool:
        """One of gpu-preflight's own workers (:mod:`.launch`): its supervisor shows the progress,
        relays its lines and prints the verdict."""
        return self.launcher is Launcher.SELF

    @property
    def node_name(self) -> str:
        """The name of this node as the scheduler knows it (falls back to the hostname).

        A name the scheduler gives this very process wins; the host list is indexed by
        node rank only where the launcher numbers nodes in list order (Slurm, SageMaker) —
        torchrun's c10d rendezvous numbers nodes in join order.
        """
        if self.own_name:
            return self.own_name
        if self.launcher.hosts_in_node_order and self.hosts and 0 <= self.node_rank < len(self.hosts):
            return self.hosts[self.node_rank]
        return self.hostname

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["hosts"] = list(self.hosts)
        return data


MAX_JOB_NODES = 1 << 20  # SLURM_TASKS_PER_NODE "4(x1000000000)" must not become a billion-entry list
_SHOWN = 80


def shown(name: str, raw: object) -> str:
    """``VAR=value`` as an error names it: control characters escaped, a long value cut."""
    text = str(raw)
    text = text if text.isprintable() else repr(text)
    return f"{name}={text[:_SHOWN] + '...' if len(text) > _SHOWN else text}"


def _int(env: Mapping[str, str], *names: str, default: int | None = None, low: int = 0,
         high: int | None = None) -> int:
    """The first of ``names`` that is set, as a whole number in ``[low, high]``.

    Every count, rank and id a launcher sets is a non-negative number (node counts and
    ports start at 1): a negative, zero or absurd value is refused here, naming it, instead
    of dividing by it or indexing with it later.
    """
    for name in names:
        raw = env.get(name)
        if raw not in (None, ""):
            try:
                value = int(str(raw).strip())
            except ValueError:
                raise TopologyError(f"{shown(name, raw)} (not an integer)") from None
            if value < low or (high is not None and value > high):
                bound = f"from {low} to {high}" if high is not None else f"at least {low}"
                raise TopologyError(f"{shown(name, raw)} (must be {bound})")
            return value
    if default is None:
        raise TopologyError(f"none of {', '.join(names)} is set")
    return default


def expand_hostlist(text: str, name: str = "SLURM_JOB_NODELIST") -> list[str]:
    """Slurm hostlist expansion (``gpu-[001-003,010],login1``) via python-hostlist."""
    try:
        return list(hostlist.expand_hostlist(text))
    except hostlist.BadHostlist as exc:
        raise TopologyError(f"{shown(name, text)} (bad Slurm hostlist: {exc})") from None


def slurm_tasks_per_node(text: str) -> list[int]:
    """``SLURM_TASKS_PER_NODE`` (``"4(x2),2"``) → ``[4, 4, 2]``; more than ``MAX_JOB_NODES`` nodes is refused."""
    groups: list[tuple[int, int]] = []
    for part in filter(None, text.split(",")):
        m = re.fullmatch(r"(\d{1,12})(?:\(x(\d{1,12})\))?", part.strip())
        if not m:
            raise TopologyError(f"{shown('SLURM_TASKS_PER_NODE', text)} (bad SLURM_TASKS_PER_NODE)")
        groups.append((int(m.group(1)), int(m.group(2) or 1)))
    if sum(repeat for _, repeat in groups) > MAX_JOB_NODES:
        raise TopologyError(f"{shown('SLURM_TASKS_PER_NODE', text)} (more than {MAX_JOB_NODES} nodes)")
    return [count for count, repeat in groups for _ in range(repeat)]


def sagemaker_hosts(env: Mapping[str, str], resource_config: Path = SAGEMAKER_RESOURCE_CONFIG) -> tuple[list[str], str]:
    """SageMaker's host list and this host: ``SM_HOSTS``/``SM_CURRENT_HOST`` or resourceconfig.json."""
    hosts_raw, current = env.get("SM_HOSTS"), env.get("SM_CURRENT_HOST")
    if hosts_raw and current:
        try:
            hosts = json.loads(hosts_raw)
        except (ValueError, RecursionError):
            hosts = None
        if not isinstance(hosts, list) or not all(isinstance(h, str) and h for h in hosts):
            raise TopologyError(f"{shown('SM_HOSTS', hosts_raw)} (not a JSON list of host names)")
        return hosts, current
    try:
        config = json.loads(resource_config.read_text())
        return [str(h) for h in config["hosts"]], str(config["current_host"])
    except (OSError, KeyError, ValueError, TypeError):
        return [], ""


def detect(env: Mapping[str, str], *, hostname: str | None = None,
           resource_config: Path = SAGEMAKER_RESOURCE_CONFIG) -> Topology:
    """The topology this process runs in; launcher :attr:`Launcher.NONE` when started by hand.

    The node's name is chosen as :mod:`.identity` says (``GPU_PREFLIGHT_NODE_NAME``, then the
    scheduler's name for it, then the host name): containers often have meaningless host
    names, and the scheduler's node name is what a drain or an exclude list needs.
    """
    host = hostname or env.get("GPU_PREFLIGHT_NODE_NAME") or socket.gethostname()
    topo = _detect(env, host, resource_config)
    own, source = choose_name(env, host, sagemaker_hosts(env, resource_config)[1])
    return replace(topo, own_name=own) if source != "hostname" else topo


def _detect(env: Mapping[str, str], host: str, resource_config: Path) -> Topology:
    sm_hosts, sm_current = sagemaker_hosts(env, resource_config)
    slurm_hosts = expand_hostlist(env["SLURM_JOB_NODELIST"]) if env.get("SLURM_JOB_NODELIST") else (
        expand_hostlist(env["SLURM_NODELIST"], "SLURM_NODELIST") if env.get("SLURM_NODELIST") else [])
    hosts = sm_hosts or slurm_hosts
    port = _int(env, "MASTER_PORT", default=DEFAULT_PORT, low=1, high=65535)

    if env.get("TORCHELASTIC_RUN_ID") or all(k in env for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK")):
        local_world = _int(env, "LOCAL_WORLD_SIZE", default=1)
        world = _int(env, "WORLD_SIZE")
        launcher = Launcher.SELF if env.get("GPU_PREFLIGHT_LAUNCHER") == Launcher.SELF.value else Launcher.TORCHRUN
        return _checked(Topology(
            launcher, world, _int(env, "RANK"), _int(env, "LOCAL_RANK"), local_world,
            _int(env, "GROUP_RANK", "NODE_RANK", default=0), _int(env, "GROUP_WORLD_SIZE", default=0)
            or max(1, world // max(local_world, 1)), host, tuple(hosts), env.get("MASTER_ADDR"), port,
            {"run_id": env.get("TORCHELASTIC_RUN_ID")}))
    if "OMPI_COMM_WORLD_RANK" in env:
        world, local_world = _int(env, "OMPI_COMM_WORLD_SIZE"), _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", default=1)
        return _checked(Topology(
            Launcher.OPENMPI, world, _int(env, "OMPI_COMM_WORLD_RANK"),
            _int(env, "OMPI_COMM_WORLD_LOCAL_RANK", default=0), local_world,
            _int(env, "OMPI_COMM_WORLD_NODE_RANK", default=0), max(1, world // max(local_world, 1)), host,
            tuple(hosts), env.get("MASTER_ADDR") or (hosts[0] if hosts else None), port))
    if "PMIX_RANK" in env and "SLURM_PROCID" not in env:
        world = _int(env, "PMIX_SIZE", "WORLD_SIZE")
        local_world = _int(env, "PMIX_LOCAL_SIZE", default=1)
        return _checked(Topology(
            Launcher.PMIX, world, _int(env, "PMIX_RANK"), _int(env, "PMIX_LOCAL_RANK", default=0), local_world,
            _int(env, "PMIX_NODE_RANK", default=0), max(1, world // max(local_world, 1)), host, tuple(hosts),
            env.get("MASTER_ADDR") or (hosts[0] if hosts else None), port))
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        nodes = _int(env, "SLURM_JOB_NUM_NODES", "SLURM_NNODES", default=len(slurm_hosts) or 1, low=1,
                     high=MAX_JOB_NODES)
        per_node = slurm_tasks_per_node(env.get("SLURM_TASKS_PER_NODE", "")) if env.get("SLURM_TASKS_PER_NODE") else []
        node_rank = _int(env, "SLURM_NODEID", default=0)
        local_world = per_node[node_rank] if node_rank < len(per_node) else _int(
            env, "SLURM_NTASKS_PER_NODE", default=max(1, _int(env, "SLURM_NTASKS") // nodes))
        return _checked(Topology(
            Launcher.SLURM, _int(env, "SLURM_NTASKS"), _int(env, "SLURM_PROCID"), _int(env, "SLURM_LOCALID", default=0),
            local_world, node_rank, nodes, host, tuple(slurm_hosts), env.get("MASTER_ADDR")
            or (slurm_hosts[0] if slurm_hosts else None),
            _int(env, "MASTER_PORT", default=DEFAULT_PORT + _int(env, "SLURM_JOB_ID", default=0) % 1000, low=1,
                 high=65535),
            {"job_id": env.get("SLURM_JOB_ID")}))
    if "RANK" in env and "WORLD_SIZE" in env:  # Kubeflow PyTorchJob (one process per pod) or a plain env launch
        world, rank = _int(env, "WORLD_SIZE"), _int(env, "RANK")
        kubeflow = any(k.startswith("PET_") for k in env) or "KUBERNETES_SERVICE_HOST" in env
        return _checked(Topology(
            Launcher.KUBEFLOW if kubeflow else Launcher.ENV, world, rank, _int(env, "LOCAL_RANK", default=0),
            _int(env, "LOCAL_WORLD_SIZE", default=1), _int(env, "NODE_RANK", default=rank),
            _int(env, "NNODES", "PET_NNODES", default=world), host, tuple(hosts), env.get("MASTER_ADDR"), port))
    if sm_hosts:  # a SageMaker job without a distribution launcher: one process per host
        if sm_current not in sm_hosts:
            raise TopologyError(f"{shown('SM_CURRENT_HOST', sm_current)} (not in SM_HOSTS {sm_hosts[:8]})")
        node = sm_hosts.index(sm_current)
        return _checked(Topology(Launcher.SAGEMAKER, len(sm_hosts), node, 0, 1, node, len(sm_hosts), host,
                                 tuple(sm_hosts), env.get("MASTER_ADDR") or sm_hosts[0], port,
                                 {"current_host": sm_current}))
    return Topology(Launcher.NONE, 1, 0, 0, 1, 0, 1, host, tuple(hosts), None, None)


def _checked(topo: Topology) -> Topology:
    if topo.world_size < 1:
        raise TopologyError(f"world size {topo.world_size} < 1 ({topo.launcher})")
    if topo.num_nodes < 1 or topo.local_world_size < 1:
        raise TopologyError(f"{topo.num_nodes} nodes of {topo.local_world_size} processes each ({topo.launcher})")
    if not 0 <= topo.rank < topo.world_size:
        raise TopologyError(f"rank {topo.rank} outside world size {topo.world_size} ({topo.launcher})")
    if not 0 <= topo.local_rank < max(topo.local_world_size, 1):
        raise TopologyError(f"local rank {topo.local_rank} outside local world size {topo.local_world_size}")
    if not 0 <= topo.node_rank < max(topo.num_nodes, 1):
        raise TopologyError(f"node rank {topo.node_rank} outside {topo.num_nodes} nodes ({topo.launcher})")
    return topo


def launcher_node_names(topo: Topology) -> dict[int, str]:
    """Node rank → name as the launcher lists the job's nodes, for ranks that never said who
    they are. Slurm and SageMaker list hosts in node-rank order; torchrun numbers nodes in join
    order, which only its rendezvous records (:mod:`.rendezvous_view`); others name no nodes.
    """
    if topo.launcher.hosts_in_node_order and topo.hosts:
        return dict(enumerate(topo.hosts))
    return {}
