"""Absolute floors that depend on a node's topology, and the peer-outlier severity rule.

A GPU-model profile states each bandwidth floor for the SKU's reference board (the
NVSwitch baseboard with the SKU's full NVLink complement; a PCIe link at
``gpu.pcie_expected_gen``). One NVML name can cover boards that differ (an HGX H200 and a
one-GPU VM slice of it; SXM4 and PCIe A100s under one profile; a gen5 card in a gen4
host), so the floor a node is judged against is derived here from what its GPUs report:

* node-local all_reduce: a site's ``perf.allreduce_busbw_min_gbps`` (its own figure, say a
  baseline) holds for every topology. Without it, GPUs joined by NVSwitch (NVML's
  connected-link count) get ``perf.allreduce_nvswitch_busbw_min_gbps``, scaled by the active NVLinks per GPU over
  ``perf.allreduce_nvlinks_per_gpu`` when a board has fewer links by design; anything else
  (PCIe only, or NVLink bridges that join only pairs, so a wider group crosses PCIe) gets
  ``perf.allreduce_pcie_busbw_min_gbps``, halved per PCIe generation the links fall short
  of ``gpu.pcie_expected_gen``. An unknown topology gets the PCIe floor: the one every
  healthy board of the SKU clears.
* pinned host transfers: ``perf.host_transfer_min_gbps`` with the same PCIe scaling.

Pure: facts and config in, numbers out. The topology summary they follow
(:func:`~gpu_preflight.records.topology.topology_summary`) is a record.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from ..model import Status
from ..records.topology import topology_summary

__all__ = ["Floor", "allreduce_floor", "host_transfer_floor", "log_allreduce_floor", "network_floor", "node_topology",
           "peer_gap_status"]


class Floor(msgspec.Struct, frozen=True):
    """A floor and the topology it was derived for (shown in findings, so a verdict can be checked)."""

    gbps: float
    basis: str


def node_topology(gpu_facts: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A node's topology summary from its GPU facts: full records, or the summary a node sent at scale."""
    if not isinstance(gpu_facts, Mapping) or not gpu_facts.get("available"):
        return None
    summary = gpu_facts.get("topology")
    if isinstance(summary, Mapping):
        return dict(summary)
    gpus = gpu_facts.get("gpus")
    if isinstance(gpus, list) and gpus and all(isinstance(g, Mapping) for g in gpus):
        return topology_summary(gpus)
    return None


def _pcie_scaled(floor: float, gen: int | None, expected: int | None) -> tuple[float, str]:
    """``floor`` halved per generation the link falls short of the one it is stated for."""
    if gen is None or expected is None:
        return floor, f"PCIe gen{expected}" if expected else "PCIe"
    if gen >= expected:
        return floor, f"PCIe gen{gen}"
    return floor / 2 ** (expected - gen), f"PCIe gen{gen} (floor stated for gen{expected}, halved per generation)"


def allreduce_floor(perf: Any, gpu: Any, topology: Mapping[str, Any] | None) -> Floor | None:
    """The node-local all_reduce floor for a node with this topology (None: no floor set)."""
    if perf.allreduce_busbw_min_gbps is not None:
        return Floor(perf.allreduce_busbw_min_gbps, "perf.allreduce_busbw_min_gbps")
    nvswitch = perf.allreduce_nvswitch_busbw_min_gbps
    pcie = perf.allreduce_pcie_busbw_min_gbps
    topo = topology or {}
    if topo.get("nvswitch") and nvswitch is not None:
        links, full = topo.get("nvlinks_min"), perf.allreduce_nvlinks_per_gpu
        if isinstance(links, int) and full and 0 < links < full:
            return Floor(nvswitch * links / full, f"NVSwitch, {links} of {full} NVLinks per GPU (floor scaled)")
        return Floor(nvswitch, "NVSwitch" + (f", {links} NVLinks per GPU" if isinstance(links, int) and links
                                             else ""))
    if pcie is None:
        return None
    value, basis = _pcie_scaled(pcie, topo.get("pcie_gen_max"), gpu.pcie_expected_gen)
    why = "no NVSwitch" if topo.get("nvswitch") is False else "topology not reported"
    return Floor(value, f"{basis}, {why}")


def host_transfer_floor(perf: Any, gpu: Any, topology: Mapping[str, Any] | None) -> Floor | None:
    """The pinned host-to-device / device-to-host floor for this node's PCIe links."""
    if perf.host_transfer_min_gbps is None:
        return None
    value, basis = _pcie_scaled(perf.host_transfer_min_gbps, (topology or {}).get("pcie_gen_max"),
                                gpu.pcie_expected_gen)
    return Floor(value, basis)


def log_allreduce_floor(perf: Any, gpu_names: Sequence[str]) -> Floor | None:
    """The node-local all_reduce floor for a saved log, which names its GPUs but not their links.

    A site's ``perf.allreduce_busbw_min_gbps`` holds as for a run. GPUs whose NVML name is
    sold only on NVSwitch boards (``perf.allreduce_nvswitch_gpu_names``) are held to the
    NVSwitch floor; any other to the PCIe floor as stated (the log does not say which PCIe
    generation the host has).
    """
    if perf.allreduce_busbw_min_gbps is not None:
        return Floor(perf.allreduce_busbw_min_gbps, "perf.allreduce_busbw_min_gbps")
    patterns = perf.allreduce_nvswitch_gpu_names
    if (gpu_names and perf.allreduce_nvswitch_busbw_min_gbps is not None
            and all(any(_search(p, name) for p in patterns) for name in gpu_names)):
        return Floor(perf.allreduce_nvswitch_busbw_min_gbps, "NVSwitch board (from the GPU names)")
    if perf.allreduce_pcie_busbw_min_gbps is None:
        return None
    return Floor(perf.allreduce_pcie_busbw_min_gbps, "PCIe (the GPU names do not imply an NVSwitch board)")


# busbw a collective reaches when each GPU's share of the NICs (``per_gpu`` GB/s) is what limits it, for ``n``
# ranks on ``k`` nodes of ``g`` GPUs (nccl-tests' busbw factors, doc/PERFORMANCE.md): in a hierarchical
# all_reduce, all_gather or reduce_scatter each GPU's NICs carry (k-1)/(n-1) of its busbw; in an alltoall the
# (n-g)/(n-1) of its data bound for other nodes; a broadcast or reduce pipelines the whole buffer over every NIC
# of the node; a sendrecv pair crosses on one GPU's share.
_NETWORK_BOUNDS: dict[str, Callable[[float, int, int, int], float]] = {
    "all_reduce": lambda per_gpu, n, k, g: per_gpu * (n - 1) / (k - 1),
    "all_gather": lambda per_gpu, n, k, g: per_gpu * (n - 1) / (k - 1),
    "reduce_scatter": lambda per_gpu, n, k, g: per_gpu * (n - 1) / (k - 1),
    "alltoall": lambda per_gpu, n, k, g: per_gpu * (n - 1) / (n - g),
    "broadcast": lambda per_gpu, n, k, g: per_gpu * g,
    "reduce": lambda per_gpu, n, k, g: per_gpu * g,
    "sendrecv": lambda per_gpu, n, k, g: per_gpu,
}


def network_floor(perf: Any, collective: str | None, nranks: int, nodes: int, node_floor: Floor | None) -> Floor | None:
    """The busbw floor of a collective across ``nodes`` nodes: ``perf.network_busbw_min_fraction`` of what the
    NICs allow (``perf.network_nics_per_node`` x ``perf.network_nic_gbps`` shared by the node's GPUs, scaled by
    the collective's busbw factor), never above the node-local floor. A collective not named is held to the
    lowest of the bounds (the most lenient). None: the fabric is not stated.

    A job on fewer GPUs per node than the profile's node (``perf.node_gpus``) is credited only those GPUs'
    share of the NICs: on the profiled boards each GPU has its own rail, and a pod given one GPU is commonly
    given its one NIC (kubernetes-sigs/dranet's 1-GPU/1-NIC workers); crediting it the whole node's NICs would
    fail a healthy partial-node run."""
    nics, rate = perf.network_nics_per_node, perf.network_nic_gbps
    if not nics or not rate or nodes < 2 or nranks < nodes:
        return None
    gpus = nranks / nodes
    node_gpus = perf.node_gpus
    partial = bool(node_gpus) and gpus < node_gpus
    per_gpu = nics * rate / 8 / (node_gpus if partial else gpus)
    bounds = [_NETWORK_BOUNDS[collective]] if collective in _NETWORK_BOUNDS else list(_NETWORK_BOUNDS.values())
    bound = min(b(per_gpu, nranks, nodes, round(gpus)) for b in bounds)
    value = round(bound * perf.network_busbw_min_fraction, 2)
    what = collective or "an unnamed collective (its lowest bound)"
    share = f" (each GPU's 1/{node_gpus} share of them: a partial node)" if partial else ""
    basis = (f"{perf.network_busbw_min_fraction:g} x {bound:.1f} GB/s, what {nics} x {rate:g} Gb/s NICs per node"
             f"{share} allow {what} over {nodes} nodes x {gpus:g} GPUs")
    if node_floor is not None and node_floor.gbps < value:
        return Floor(node_floor.gbps, f"{node_floor.basis}; the network would allow more ({basis})")
    return Floor(value, basis)


def _search(pattern: str, name: str) -> bool:
    """A pattern that is not a valid regular expression matches nothing (the lower, PCIe floor applies)."""
    try:
        return re.search(pattern, name, re.IGNORECASE) is not None
    except re.error:
        return False


def peer_gap_status(value: float, median: float, perf: Any) -> Status:
    """PASS, WARN or FAIL for a measurement against the median of its peers.

    WARN when it is more than ``perf.peer_outlier_fraction`` below the median; FAIL when it
    is ``perf.peer_outlier_fail_fraction`` or more below (at 0.5 the slow member makes every
    collective, or every step paced by the slowest GPU, at least twice as slow).
    """
    if median <= 0:
        return Status.PASS
    if value <= median * (1 - perf.peer_outlier_fail_fraction):
        return Status.FAIL
    if value < median * (1 - perf.peer_outlier_fraction):
        return Status.WARN
    return Status.PASS
