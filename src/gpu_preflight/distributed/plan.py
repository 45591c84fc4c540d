"""What each rank runs, and the process groups every rank lays out the same way.

Pure functions of the config, the suite, the device kind and the topology: no store, no
torch. Every rank derives the same plan and the same group order on its own, so nothing
about the plan has to travel between ranks (rank 0 publishes only the step list, for the
progress view).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..backends.launcher.topology import Topology
from ..config import Config
from ..workloads.scaling import collective_sweep

__all__ = ["Group", "Plan", "layout", "make_plan", "node_ranks", "report_parameters", "steps_for"]


class Plan(msgspec.Struct):
    """What this rank runs, derived from the suite, the device and the config."""

    sizes: list[int]
    iters: int
    warmup: int
    gemm_dtypes: list[str]
    gemm_n: int
    gemm_iters: int
    gemm_seconds: float | None
    memory: bool
    train_steps: int
    train_batch: int = 512  # samples per training step on each rank (workload.train_batch_size)
    ops: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "sendrecv")
    tier: str = "node"  # the job-size table's row that chose sizes and iters (workloads.scaling)
    link_bytes: int | None = None  # node-to-node exchanges and localisation rounds (None: the largest size)

    def pair_bytes(self) -> int:
        """The message of a point-to-point link test: the configured largest, whatever the job's size
        (a pair of nodes reaches its bandwidth regime at the same size in a job of 2 nodes or 10,000)."""
        return self.link_bytes or self.sizes[-1]
    gpu_window: bool = False  # the ranks wait for DCGM's stress levels before touching CUDA (distributed.gpu_window)


def make_plan(config: Config, suite: str, cuda: bool, topo: Topology | None = None) -> Plan:
    """The plan of a job shaped like ``topo``: collective sizes and iterations by the job-size
    table (:mod:`gpu_preflight.workloads.scaling`; without ``topo``, the configured values)."""
    w = config.workload
    if cuda:
        dtypes, n = list(w.gemm_dtypes_gpu), w.gemm_n_gpu
        seconds: float | None = w.gemm_seconds_full if suite == "full" else w.gemm_seconds_quick
        steps = w.train_steps
    else:
        dtypes, n, seconds = ["fp32"], w.gemm_n_cpu, None
        steps = min(w.train_steps, 25)  # CPU ranks share cores: keep the smoke short
    sweep = collective_sweep(w, suite, cuda, topo.world_size if topo else None, topo.num_nodes if topo else 1)
    link = collective_sweep(w, suite, cuda, None).sizes[-1]
    return Plan(sweep.sizes, sweep.iters, 1, dtypes, n, 3 if not cuda else 5, seconds, cuda, steps, w.train_batch_size,
                tier=sweep.tier, link_bytes=link)


def report_parameters(plan: Plan, topo: Topology, suite: str) -> dict[str, Any]:
    """What the report says about the collectives' parameters (``cluster_info.test_parameters``)."""
    return {"suite": suite, "device": "gpu" if plan.memory else "cpu", "world_size": topo.world_size,
            "num_nodes": topo.num_nodes, "tier": plan.tier, "collective_sizes_bytes": list(plan.sizes),
            "collective_iters": plan.iters, "collective_warmup": plan.warmup}


class Group(msgspec.Struct):
    """A process group the plan creates: its name, its scope (node, cross-node, world), its ranks and, once made, its
    handle."""

    name: str
    scope: str  # "distributed" (all ranks), "intra_node", "inter_node"
    ranks: list[int]
    handle: Any = None


def layout(topo: Topology) -> list[Group]:
    """Groups every rank creates in the same order: world, each node, one rank per node."""
    world = list(range(topo.world_size))
    groups = [Group("all", "distributed", world)]
    per_node = max(topo.local_world_size, 1)
    if topo.num_nodes > 1 and per_node > 1:  # with one rank per node, these groups would repeat "all"
        groups += [Group(f"node{n}", "intra_node", world[n * per_node:(n + 1) * per_node])
                   for n in range(topo.num_nodes)]
        groups.append(Group("inter0", "inter_node", [n * per_node for n in range(topo.num_nodes)]))
    return groups


def node_ranks(topo: Topology, node: int) -> range:
    """The ranks of one node (ranks are laid out node by node)."""
    per_node = max(topo.local_world_size, 1)
    return range(node * per_node, min((node + 1) * per_node, topo.world_size))


def steps_for(plan: Plan, topo: Topology) -> list[str]:
    """This rank's steps in order, as written to ``progress/<rank>``: the length of a progress bar."""
    steps = ["arrive", *(["dcgm"] if plan.gpu_window else []), "stack", "gemm",
             *(["memory"] if plan.memory else []), "train"]
    for g in layout(topo):
        if topo.rank in g.ranks and len(g.ranks) >= 2:
            steps += [f"{op}@{g.name}" for op in plan.ops]
    if topo.num_nodes > 1:
        steps += ["links", "pingpong"] if topo.local_rank == 0 else ["links"]
    if topo.world_size > 1:
        steps.append("ddp")
    if topo.local_rank == 0:
        steps.append("node_checks")
    return [*steps, "done"]
