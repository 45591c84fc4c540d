"""What rank 0 gathered from a distributed run, and how the cluster checks name a rank."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from itertools import chain, compress
from operator import itemgetter
from typing import Any


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
        """Every rank's GEMM, memory and training results as columns (:mod:`.columns`):
        the leaders' packed columns, plus those of payloads that still hold their results."""
        from .columns import columns_of, unpack

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
