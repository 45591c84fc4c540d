"""Typed facts gathered by probes: what was read, never what it means.

A reading that could not be taken is an :class:`~gpu_preflight.model.NA` carrying the
reason ("not supported", "GPU is lost"), so a check can tell "0 errors" from "unknown"
and the report can say why a check was skipped.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain, compress
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from .model import NA

if TYPE_CHECKING:
    from .config.xid_window import XidTally

IntR = int | NA
FloatR = float | NA
StrR = str | NA
BoolR = bool | NA


@dataclass
class NvLink:
    link: int
    active: bool
    version: IntR = NA("not read")
    remote_pci: StrR = NA("not read")
    errors: dict[str, IntR] = field(default_factory=dict)  # replay, recovery, crc_flit, crc_data, ecc_data


@dataclass
class GpuProcess:
    pid: int
    used_memory_bytes: IntR


@dataclass
class GpuRecord:
    """Everything NVML said about one GPU (each NVML field read once per run)."""

    index: int
    name: StrR = NA("not read")
    uuid: StrR = NA("not read")
    serial: StrR = NA("not read")
    pci_bus_id: StrR = NA("not read")
    vbios: StrR = NA("not read")
    board_part_number: StrR = NA("not read")
    lost: str | None = None
    call_errors: dict[str, str] = field(default_factory=dict)
    memory_total_bytes: IntR = NA("not read")
    memory_used_bytes: IntR = NA("not read")
    memory_free_bytes: IntR = NA("not read")
    temperature_c: IntR = NA("not read")
    temp_slowdown_c: IntR = NA("not read")
    temp_shutdown_c: IntR = NA("not read")
    temp_gpu_max_c: IntR = NA("not read")
    temp_memory_max_c: IntR = NA("not read")
    memory_temperature_c: IntR = NA("not read")
    power_draw_w: FloatR = NA("not read")
    power_limit_w: FloatR = NA("not read")
    power_default_limit_w: FloatR = NA("not read")
    utilization_gpu_percent: IntR = NA("not read")
    utilization_memory_percent: IntR = NA("not read")
    persistence_mode: BoolR = NA("not read")
    compute_mode: StrR = NA("not read")
    mig_current: BoolR = NA("not read")
    mig_pending: BoolR = NA("not read")
    ecc_current: BoolR = NA("not read")
    ecc_pending: BoolR = NA("not read")
    ecc_volatile_corrected: IntR = NA("not read")
    ecc_volatile_uncorrected: IntR = NA("not read")
    ecc_aggregate_corrected: IntR = NA("not read")
    ecc_aggregate_uncorrected: IntR = NA("not read")
    sram_aggregate_corrected: IntR = NA("not read")
    sram_aggregate_uncorrected: IntR = NA("not read")
    remapped_rows_correctable: IntR = NA("not read")
    remapped_rows_uncorrectable: IntR = NA("not read")
    remap_pending: BoolR = NA("not read")
    remap_failure: BoolR = NA("not read")
    retired_pages_sbe: IntR = NA("not read")
    retired_pages_dbe: IntR = NA("not read")
    retired_pages_pending: BoolR = NA("not read")
    recovery_action: IntR = NA("not read")
    clock_event_reasons: IntR = NA("not read")
    sm_clock_mhz: IntR = NA("not read")
    sm_clock_max_mhz: IntR = NA("not read")
    performance_state: IntR = NA("not read")
    pcie_gen_current: IntR = NA("not read")
    pcie_gen_max: IntR = NA("not read")
    pcie_gen_gpu_max: IntR = NA("not read")
    pcie_width_current: IntR = NA("not read")
    pcie_width_max: IntR = NA("not read")
    pcie_replay_counter: IntR = NA("not read")
    nvlinks: list[NvLink] | NA = NA("not read")
    nvswitch_links: IntR = NA("not read")
    processes: list[GpuProcess] | NA = NA("not read")

    @property
    def label(self) -> str:
        return f"gpu{self.index}"


@dataclass
class GpuFacts:
    """The GPU side of a node: NVML's view, plus NVIDIA GPUs seen on the PCI bus."""

    source: str
    available: bool
    reason: str | None = None
    nvml_error: str | None = None
    driver_version: StrR = NA("not read")
    cuda_driver_version: StrR = NA("not read")
    nvml_version: StrR = NA("not read")
    gpus: list[GpuRecord] = field(default_factory=list)
    pci_gpus: list[str] | NA = NA("not read")

    @property
    def names(self) -> list[str]:
        return [g.name for g in self.gpus if isinstance(g.name, str)]


@dataclass
class DiskUsage:
    path: str
    total_bytes: IntR
    free_bytes: IntR
    mountpoint: StrR = NA("not read")


@dataclass
class SystemFacts:
    """Host resources read through psutil, /proc and /sys."""

    hostname: str
    kernel: StrR = NA("not read")
    memory_total_bytes: IntR = NA("not read")
    memory_available_bytes: IntR = NA("not read")
    cpu_count: IntR = NA("not read")
    cpu_percent: FloatR = NA("not read")
    load_1m: FloatR = NA("not read")
    disks: list[DiskUsage] = field(default_factory=list)
    shm_total_bytes: IntR = NA("not read")
    memlock_soft: IntR = NA("not read")  # -1: unlimited
    memlock_hard: IntR = NA("not read")
    nofile_soft: IntR = NA("not read")
    nofile_hard: IntR = NA("not read")
    numa_nodes: IntR = NA("not read")
    processes: list[str] | NA = NA("not read")
    not_recorded: str | None = None  # why a replayed snapshot holds no host facts: every host check SKIPs


@dataclass
class KernelLogFacts:
    """Xid events read from the kernel log, or why the log could not be read.

    ``tally`` holds per-(Xid, GPU) counts within the window and how many events fell
    outside it (never every event: a 200 MB log must not become 200 MB of facts).
    """

    available: bool
    source: str
    read_at: datetime
    reason: str | None = None
    tally: XidTally | None = None
    failures: list[str] = field(default_factory=list)


@dataclass
class ClusterFacts:
    """What rank 0 gathered from a distributed run: one payload per rank, and who is missing.

    Payloads are the JSON forms of the workload results (collectives, GEMM, memory,
    training, software stack) plus, from each node's local rank 0, its node report.
    """

    world_size: int
    num_nodes: int
    local_world_size: int
    payloads: dict[int, dict[str, Any]]
    missing: dict[int, str]
    node_names: dict[int, str]
    node_facts: dict[int, dict[str, Any]] = field(default_factory=dict)
    node_columns: list[dict[str, Any]] = field(default_factory=list)  # results the node leaders put in columns
    node_index: list[list[Any]] = field(default_factory=list)  # leaders' [rank, node, local_rank, on_gpu] rows
    node_collectives: list[dict[str, Any]] = field(default_factory=list)  # leaders' {"groups", "failures"}

    @functools.cached_property
    def _index(self) -> dict[str, Any]:
        """One walk over every payload for everything the cluster checks look up per rank.

        At 80,000 ranks each walk over the payloads costs a tenth of a second or more (the
        dicts are spread over a gigabyte of heap), so subjects, GPU ranks, group results,
        failures and unpacked results are all collected in the same walk.
        """
        per_node = max(self.local_world_size, 1)
        subjects: dict[int, str] = {}
        gpu: set[int] = set()
        raw: dict[int, dict[str, Any]] = {}
        groups: list[tuple[int, dict[str, Any]]] = []
        errors: list[tuple[int, dict[str, Any]]] = []
        names = self.node_names

        def note(r: int, node: int, local: int, on_gpu: bool) -> None:
            subjects[r] = subject_name(names.get(node, "unknown"), r, local, on_gpu)
            if on_gpu:
                gpu.add(r)

        def collective(r: int, e: dict[str, Any]) -> None:
            if e.get("error"):
                errors.append((r, e))
            ranks = e.get("ranks")
            if ranks and ranks[0] == r:
                groups.append((r, e))

        # What node leaders indexed needs no walk over their payloads: all their rows at once.
        rows = list(chain.from_iterable(self.node_index))
        ranks, nodes, locals_, on = rows[0::4], rows[1::4], rows[2::4], rows[3::4]
        node_name = {n: names.get(n, "unknown") for n in set(nodes)}
        subjects.update(zip(ranks, [subject_name(node_name[n], r, local, g)
                                    for r, n, local, g in zip(ranks, nodes, locals_, on, strict=True)], strict=True))
        gpu.update(compress(ranks, on))
        for part in self.node_collectives:  # sorted by the leaders already
            groups.extend(part.get("groups") or ())
            errors.extend(part.get("failures") or ())
        for r in sorted(self.payloads.keys() - subjects.keys()):  # payloads no leader indexed
            p = self.payloads[r]
            note(r, int(p.get("node_rank", r // per_node)), p.get("local_rank", 0),
                 str(p.get("device", "")).startswith("cuda"))
            if "gemm" in p or "memory" in p or "train" in p:
                raw[r] = p
            for e in p.get("collectives", ()):
                collective(r, e)
        groups.sort(key=itemgetter(0))
        errors.sort(key=itemgetter(0))
        return {"subjects": subjects, "gpu": frozenset(gpu), "raw": raw, "groups": groups, "errors": errors}

    @property
    def subjects(self) -> dict[int, str]:
        """:meth:`rank_subject` of every rank that reported."""
        subjects: dict[int, str] = self._index["subjects"]
        return subjects

    @property
    def gpu_ranks(self) -> frozenset[int]:
        """Ranks that ran on a GPU (CPU workers share cores: they are not compared with each other)."""
        gpu: frozenset[int] = self._index["gpu"]
        return gpu

    @property
    def group_entries(self) -> list[tuple[int, dict[str, Any]]]:
        """Each collective group's results once, as reported by the group's lowest rank (all members agree)."""
        groups: list[tuple[int, dict[str, Any]]] = self._index["groups"]
        return groups

    @property
    def collective_errors(self) -> list[tuple[int, dict[str, Any]]]:
        """Every failed collective as each rank that saw it reported it."""
        errors: list[tuple[int, dict[str, Any]]] = self._index["errors"]
        return errors

    def ranks_view(self, ranks: list[int]) -> tuple[list[str], bool]:
        """The subjects of these ranks, in order, and whether all of them ran on a GPU.

        The result columns of a run share one rank order, so the last answer is kept: the
        four GEMM precisions, memory and training of 80,000 ranks name them once.
        """
        last = self.__dict__.get("_ranks_view")
        if last is not None and (last[0] is ranks or last[0] == ranks):
            return last[1], last[2]
        names = self.subjects
        view = ([names[r] if r in names else self.rank_subject(r) for r in ranks], self.gpu_ranks.issuperset(ranks))
        self.__dict__["_ranks_view"] = (ranks, *view)
        return view

    @functools.cached_property
    def columns(self) -> dict[str, Any]:
        """Every rank's GEMM, memory and training results as columns (``cluster/columns.py``):
        the leaders' packed columns, plus those of payloads that still hold their results."""
        from .cluster.columns import columns_of, unpack

        return unpack([*self.node_columns, columns_of(self._index["raw"])])

    @functools.cached_property
    def leaders(self) -> dict[int, dict[str, Any]]:
        """Per node, the payload of its local rank 0 (the one that carries the node's own results)."""
        per_node = max(self.local_world_size, 1)
        return {n: p for n in range(self.num_nodes) if (p := self.payloads.get(n * per_node)) is not None}

    def rank_subject(self, rank: int, payload: dict[str, Any] | None = None) -> str:
        """``node/gpuN`` for a GPU worker, ``node/rankR`` for a CPU one (or one that never reported)."""
        if payload is None and rank in self.subjects:
            return self.subjects[rank]
        p = payload or self.payloads.get(rank, {})
        node = self.node_names.get(int(p.get("node_rank", rank // max(self.local_world_size, 1))), "unknown")
        return subject_name(node, rank, p.get("local_rank", 0), str(p.get("device", "")).startswith("cuda"))


def subject_name(node: str, rank: int, local_rank: Any, on_gpu: bool) -> str:
    """How the cluster checks name a rank: its GPU on its node, or the rank itself for a CPU worker."""
    return f"{node}/gpu{local_rank}" if on_gpu else f"{node}/rank{rank}"
