"""The two-level gather: node leaders bundle their node's payloads, the reporting rank reads
one bundle per node and names every rank that did not report.

At 80,000 ranks rank 0 would otherwise poll 80,000 keys and decode 80,000 texts; a bundle
per node is 10,000 of each, and the results arrive as columns rank 0 can screen in bulk.
A node whose leader is gone is read rank by rank, so its surviving ranks still count.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Collection, Iterable
from typing import Any

from .payload import NodeBundle
from .plan import node_ranks
from .store import PREFIX, RDZV_NAMES_KEY, STALE_S, KVStore, get_text
from .topology import Topology

__all__ = ["collect", "gather", "names", "post_node_bundle"]


def collect(store: KVStore, ranks: Iterable[int], deadline: float,
            absent: Collection[int] = ()) -> tuple[dict[int, str], dict[int, str]]:
    """These ranks' payload texts as they arrive, and why each rank that did not arrive is missing
    (it never joined the job, its heartbeat went stale, or the deadline passed). One pass when the
    deadline is already past."""
    texts: dict[int, str] = {}
    missing: dict[int, str] = {}
    pending = set(ranks)
    while pending:
        for r in sorted(pending):
            key = f"{PREFIX}/payload/{r}"
            if store.check([key]):
                texts[r] = bytes(store.get(key)).decode()
                pending.discard(r)
                continue
            beat = get_text(store, f"{PREFIX}/beat/{r}")
            if beat is None and r in absent:
                missing[r] = "never joined the job (did not arrive before the process group was due)"
                pending.discard(r)
            elif beat is not None and time.time() - float(beat) > STALE_S:
                missing[r] = f"stopped answering (last heartbeat {time.time() - float(beat):.0f} s ago)"
                pending.discard(r)
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    for r in pending:
        missing[r] = "did not report before the deadline"
    return texts, missing


def post_node_bundle(store: KVStore, topo: Topology, deadline: float, absent: Collection[int] = ()) -> None:
    """Node leader: put the node's payloads in one store value (a :class:`NodeBundle`) for rank 0."""
    texts, missing = collect(store, node_ranks(topo, topo.node_rank), deadline, absent)
    store.set(f"{PREFIX}/node/{topo.node_rank}", NodeBundle.from_texts(texts, missing).to_json())
    for r in texts:  # the bundle holds them now: the store's host keeps one copy, not two
        with contextlib.suppress(Exception):
            store.delete_key(f"{PREFIX}/payload/{r}")


def gather(store: KVStore, topo: Topology, deadline: float, absent: Collection[int] = ()) -> dict[str, Any]:
    """The reporting rank: collect every node's bundle; name ranks that died, stopped answering
    or never joined.

    A node whose leader died (stale heartbeat), never joined, or never posted a bundle is read
    rank by rank, so its surviving ranks still count. A rank that never said hello is named
    from its node's other ranks, else from the launcher's view of the job
    (:func:`~gpu_preflight.distributed.topology.launcher_node_names`).
    """
    payloads: dict[int, dict[str, Any]] = {}
    missing: dict[int, str] = {}
    columns: list[dict[str, Any]] = []
    index: list[list[Any]] = []
    collectives: list[dict[str, Any]] = []
    pending = set(range(topo.num_nodes))

    def take(texts: dict[int, str], why: dict[int, str]) -> None:
        payloads.update((r, json.loads(t)) for r, t in texts.items())
        missing.update(why)

    while pending:
        for n in sorted(pending):
            key = f"{PREFIX}/node/{n}"
            if store.check([key]):
                bundle = NodeBundle.from_dict(json.loads(store.get(key)))
                payloads.update(bundle.payloads)
                missing.update(bundle.missing)
                columns.append(bundle.columns)
                index.append(bundle.index)
                collectives.append(bundle.collectives)
                pending.discard(n)
                continue
            leader = node_ranks(topo, n)[0]
            beat = get_text(store, f"{PREFIX}/beat/{leader}")
            if (beat is None and leader in absent) or (beat is not None and time.time() - float(beat) > STALE_S):
                take(*collect(store, node_ranks(topo, n), deadline, absent))
                pending.discard(n)
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    for n in sorted(pending):  # no bundle in time: whatever its ranks posted themselves
        take(*collect(store, node_ranks(topo, n), time.monotonic(), absent))
    named = names(store, topo, [r for r in range(topo.world_size) if r in missing or r not in payloads])
    for r, why in list(missing.items()):
        progress = get_text(store, f"{PREFIX}/progress/{r}")
        missing[r] = (f"rank {r} on {named.get(r) or 'unknown host'} {why}"
                      + (f", last stage {progress}" if progress else ""))
    return {"payloads": payloads, "missing": missing, "names": named, "topology": topo.to_dict(),
            "columns": columns, "index": index, "collectives": collectives}


def names(store: KVStore, topo: Topology, ranks: list[int]) -> dict[int, str]:
    """Host names of ranks that did not report: their own hello, a node-mate's, or the launcher's."""
    from .topology import launcher_node_names

    found: dict[int, str] = {}
    launcher: dict[int, str] | None = None
    for r in ranks:
        for other in [r, *node_ranks(topo, r // max(topo.local_world_size, 1))]:
            hello = get_text(store, f"{PREFIX}/hello/{other}")
            if hello:
                data = json.loads(hello)
                found[r] = data.get("node_name") or data.get("hostname")
                break
        else:
            if launcher is None:
                launcher = launcher_node_names(topo)
                launcher.update((int(n), a) for n, a in json.loads(get_text(store, RDZV_NAMES_KEY) or "{}").items())
            if r // max(topo.local_world_size, 1) in launcher:
                found[r] = launcher[r // max(topo.local_world_size, 1)]
    return found
