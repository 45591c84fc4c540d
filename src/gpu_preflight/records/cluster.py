"""What rank 0 gathered from a distributed run (:class:`ClusterView`), and how the cluster checks name a rank."""

from __future__ import annotations

import functools
from itertools import chain, compress
from operator import itemgetter
from typing import Any

import msgspec

from .columns import ResultColumns, columns_of, unpack


class RankIndex(msgspec.Struct, frozen=True):
    """What the cluster checks look up per rank, found in one walk over every payload.

    At 80,000 ranks each walk over the payloads costs a tenth of a second or more (the
    dicts are spread over a gigabyte of heap), so everything is collected in the same walk;
    what the node leaders indexed already needs no walk at all.
    """

    subjects: dict[int, str]  # :meth:`ClusterView.rank_subject` of every rank that reported
    gpu_ranks: frozenset[int]  # ranks that ran on a GPU
    unpacked: dict[int, dict[str, Any]]  # payloads that still hold their GEMM, memory or training results
    group_entries: list[tuple[int, dict[str, Any]]]  # each collective group's results, from its lowest rank
    collective_errors: list[tuple[int, dict[str, Any]]]  # every failed collective, as each rank saw it


class RankNames(msgspec.Struct, frozen=True):
    """The subjects of a column's ranks, in the column's order, and whether all ran on a GPU."""

    ranks: list[int]
    subjects: list[str]
    all_gpu: bool


class ClusterView(msgspec.Struct, dict=True):
    """What rank 0 gathered from a distributed run, and the typed indexes the cluster checks read.

    The gathered part: one payload per rank (the JSON forms of the workload results —
    collectives, GEMM, memory, training, software stack — plus, from each node's local
    rank 0, its node report), who is missing, and what the node leaders packed (result
    columns, their ranks' index rows, their groups' collective results). The indexes
    (:attr:`index`, :attr:`columns`, :attr:`leaders`) are computed on first use, once.
    """

    world_size: int
    num_nodes: int
    local_world_size: int
    payloads: dict[int, dict[str, Any]]
    missing: dict[int, str]
    node_names: dict[int, str]
    node_facts: dict[int, dict[str, Any]] = {}
    node_columns: list[dict[str, Any]] = []  # results the node leaders put in columns
    node_index: list[list[Any]] = []  # leaders' [rank, node, local_rank, on_gpu] rows
    node_collectives: list[dict[str, Any]] = []  # leaders' {"groups", "failures"}
    missing_hosts: list[str] = []  # the launcher's hosts no node claimed as its name
    clock_skew: dict[int, tuple[float, float]] = {}  # rank -> its clock minus rank 0's

    @functools.cached_property
    def index(self) -> RankIndex:
        """Subjects, GPU ranks, collective groups and failures, and unpacked results, in one walk."""
        per_node = max(self.local_world_size, 1)
        subjects: dict[int, str] = {}
        gpu: set[int] = set()
        raw: dict[int, dict[str, Any]] = {}
        groups: list[tuple[int, dict[str, Any]]] = []
        errors: list[tuple[int, dict[str, Any]]] = []
        names = self.node_names
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
            on_gpu = str(p.get("device", "")).startswith("cuda")
            node = int(p.get("node_rank", r // per_node))
            subjects[r] = subject_name(names.get(node, "unknown"), r, p.get("local_rank", 0), on_gpu)
            if on_gpu:
                gpu.add(r)
            if "gemm" in p or "memory" in p or "train" in p:
                raw[r] = p
            for e in p.get("collectives", ()):
                if e.get("error"):
                    errors.append((r, e))
                members = e.get("ranks")
                if members and members[0] == r:
                    groups.append((r, e))
        groups.sort(key=itemgetter(0))
        errors.sort(key=itemgetter(0))
        return RankIndex(subjects, frozenset(gpu), raw, groups, errors)

    @property
    def subjects(self) -> dict[int, str]:
        """:meth:`rank_subject` of every rank that reported."""
        return self.index.subjects

    @property
    def gpu_ranks(self) -> frozenset[int]:
        """Ranks that ran on a GPU (CPU workers share cores: they are not compared with each other)."""
        return self.index.gpu_ranks

    @property
    def group_entries(self) -> list[tuple[int, dict[str, Any]]]:
        """Each collective group's results once, as reported by the group's lowest rank (all members agree)."""
        return self.index.group_entries

    @property
    def collective_errors(self) -> list[tuple[int, dict[str, Any]]]:
        """Every failed collective as each rank that saw it reported it."""
        return self.index.collective_errors

    def rank_names(self, ranks: list[int]) -> RankNames:
        """The subjects of these ranks, in order, and whether all of them ran on a GPU.

        The result columns of a run share one rank order, so the last answer is kept: the
        four GEMM precisions, memory and training of 80,000 ranks name them once.
        """
        last: RankNames | None = self.__dict__.get("_names")  # the last answer, kept beside the fields
        if last is not None and (last.ranks is ranks or last.ranks == ranks):
            return last
        names = self.subjects
        last = RankNames(ranks, [names[r] if r in names else self.rank_subject(r) for r in ranks],
                         self.gpu_ranks.issuperset(ranks))
        self.__dict__["_names"] = last
        return last

    @functools.cached_property
    def columns(self) -> ResultColumns:
        """Every rank's GEMM (per precision), memory and training results as typed columns
        (:mod:`.columns`): the leaders' packed rows, plus those of payloads that still hold their results."""
        return unpack([*self.node_columns, columns_of(self.index.unpacked)])

    @functools.cached_property
    def leaders(self) -> dict[int, dict[str, Any]]:
        """Per node, the payload of its local rank 0 (the one that carries the node's own results)."""
        per_node = max(self.local_world_size, 1)
        return {n: p for n in range(self.num_nodes) if (p := self.payloads.get(n * per_node)) is not None}

    @staticmethod
    def claimed_name(payload: dict[str, Any]) -> str | None:
        """The name a rank's node gave itself (its identity, which node leaders send), else the
        rank's own node name or host name."""
        identity = payload.get("identity")
        named = identity.get("name") if isinstance(identity, dict) else None
        return str(named or payload.get("node_name") or payload.get("hostname") or "") or None

    def rank_subject(self, rank: int, payload: dict[str, Any] | None = None) -> str:
        """``node/gpuN`` for a GPU worker, ``node/rankR`` for a CPU one (or one that never reported)."""
        if payload is None and rank in self.subjects:
            return self.subjects[rank]
        p = payload or self.payloads.get(rank, {})
        node = self.node_names.get(int(p.get("node_rank", rank // max(self.local_world_size, 1))), "unknown")
        return subject_name(node, rank, p.get("local_rank", 0), str(p.get("device", "")).startswith("cuda"))


ClusterFacts = ClusterView  # the name the aggregation, the acceptance log and older callers build it by


def subject_name(node: str, rank: int, local_rank: Any, on_gpu: bool) -> str:
    """How the cluster checks name a rank: its GPU on its node, or the rank itself for a CPU worker."""
    return f"{node}/gpu{local_rank}" if on_gpu else f"{node}/rank{rank}"


def pingpong_pairs(view: ClusterView) -> dict[int, dict[str, dict[str, Any]]]:
    """``{pair: {"server": record, "client": record}}`` from the node leaders' fi_pingpong payloads."""
    pairs: dict[int, dict[str, dict[str, Any]]] = {}
    for payload in view.leaders.values():  # only node leaders run fi_pingpong
        for record in payload.get("pingpong") or []:
            entry = dict(record, node=int(payload.get("node_rank", 0)))
            pairs.setdefault(int(record.get("pair", 0)), {})[str(record.get("test_role"))] = entry
    return pairs


def pingpong_client_text(client: dict[str, Any]) -> str:
    """What a pair's client printed (its table, or the error it ended with): the pair's measurement."""
    return str(client.get("raw_output") or client.get("error") or "")

