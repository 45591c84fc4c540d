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
from datetime import timedelta
from typing import Any

from ..backends.launcher.topology import Topology
from .liveness import Beats, read_values, tracker
from .payload import BUNDLE, PAYLOAD, NodeBundle, RankPayload, WireError, unreadable
from .plan import node_ranks
from .store import PREFIX, RDZV_NAMES_KEY, KVStore, clock_skews, get_text, hello_of

__all__ = ["BUNDLED_ALL_KEY", "BUNDLED_KEY", "WAKE_S", "collect", "gather", "names", "post_node_bundle"]

BUNDLED_KEY = f"{PREFIX}/bundled"  # "<node>," appended by each leader once its bundle is in the store
BUNDLED_ALL_KEY = f"{PREFIX}/bundled_all"  # set by the leader whose bundle was the last one expected
WAKE_S = 1.0  # a reader waiting on the store looks at the heartbeats of those it waits for this often


def collect(store: KVStore, ranks: Iterable[int], deadline: float, absent: Collection[int] = (),
            beats: Beats | None = None, until: str | None = None) -> tuple[dict[int, str], dict[int, str]]:
    """These ranks' payload texts as they arrive, and why each rank that did not arrive is missing
    (it never joined the job, its heartbeat stood still, or the deadline passed). One pass when the
    deadline is already past.

    The store tells when the payloads are in (a ``wait`` on their keys): no polling while they
    come, and one read of all of them (``multi_get``). Heartbeats are read (``beats``, this
    process's view by default) only when the wait ran out, every :data:`WAKE_S` seconds.
    ``until``: a key that ends the wait once set (a node's bundle: its leader was only late,
    and the payloads it bundled are gone from the store); the ranks still awaited then are
    neither read nor named.
    """
    beats = beats if beats is not None else tracker(store)
    texts: dict[int, str] = {}
    missing: dict[int, str] = {}
    pending = sorted(ranks)
    while pending:
        for r, text in zip(pending, read_values(store, [f"{PREFIX}/payload/{r}" for r in pending]), strict=True):
            if text is not None:
                texts[r] = text
        pending = [r for r in pending if r not in texts]
        missing.update(_dead(store, beats, pending, absent))
        pending = [r for r in pending if r not in missing]
        while pending and time.monotonic() < deadline:
            try:
                store.wait([f"{PREFIX}/payload/{r}" for r in pending],
                           timedelta(seconds=min(WAKE_S, deadline - time.monotonic())))
                break  # all in: read them
            except Exception:  # the wait ran out: only the heartbeats are read until something changes
                if until is not None and store.check([until]):
                    return texts, missing
                if any(beats.silent(r) for r in beats.read(store, pending, PREFIX)):
                    break
        if time.monotonic() >= deadline:
            break
    for r, text in zip(pending, read_values(store, [f"{PREFIX}/payload/{r}" for r in pending]), strict=True):
        if text is not None:  # posted as the deadline passed
            texts[r] = text
    for r in pending:
        if r not in texts:
            missing[r] = "did not report before the deadline"
    return texts, missing


def _dead(store: KVStore, beats: Beats, ranks: list[int], absent: Collection[int]) -> dict[int, str]:
    """Why each of these ranks will not report: it never joined, or its heartbeat stood still."""
    out: dict[int, str] = {}
    joined = [r for r in ranks if r not in absent]
    beats.read(store, joined, PREFIX)
    for r in ranks:
        if r in absent and beats.read(store, [r], PREFIX)[r] is None:
            out[r] = "never joined the job (did not arrive before the process group was due)"
        elif beats.silent(r):
            out[r] = f"stopped answering (no heartbeat for {beats.quiet_s(r) or 0:.0f} s)"
    return out


def post_node_bundle(store: KVStore, topo: Topology, deadline: float, absent: Collection[int] = (),
                     beats: Beats | None = None) -> None:
    """Node leader: put the node's payloads in one store value (a :class:`NodeBundle`) for rank 0,
    then say so (:data:`BUNDLED_KEY`); the last leader expected wakes rank 0 (:data:`BUNDLED_ALL_KEY`).

    The node's ranks share the leader's host and clock (:attr:`~.liveness.Beats.same_host`): one
    that died before the leader began to wait is named from its last stamp, not from when the
    leader first looked."""
    beats = beats if beats is not None else tracker(store)
    beats.same_host.update(node_ranks(topo, topo.node_rank))
    texts, missing = collect(store, node_ranks(topo, topo.node_rank), deadline, absent, beats)
    store.set(f"{PREFIX}/node/{topo.node_rank}", NodeBundle.from_texts(texts, missing).to_json())
    store.append(BUNDLED_KEY, f"{topo.node_rank},")
    if int(store.add(f"{BUNDLED_KEY}_n", 1)) >= topo.num_nodes:
        store.set(BUNDLED_ALL_KEY, "1")
    for r in texts:  # the bundle holds them now: the store's host keeps one copy, not two
        with contextlib.suppress(Exception):
            store.delete_key(f"{PREFIX}/payload/{r}")


def gather(store: KVStore, topo: Topology, deadline: float, absent: Collection[int] = (),
           beats: Beats | None = None) -> dict[str, Any]:
    """The reporting rank: collect every node's bundle; name ranks that died, stopped answering
    or never joined.

    Bundles are found from the leaders' list of posted nodes (:data:`BUNDLED_KEY`, one read)
    and read together (``multi_get``) as they come; between reads rank 0 waits on
    :data:`BUNDLED_ALL_KEY`, which the last leader sets, so the last bundle is read the moment
    it lands. A node whose leader died (its heartbeat stood still), never joined, or never
    posted a bundle is read rank by rank, so its surviving ranks still count. A rank that never
    said hello is named from its node's other ranks, else from the launcher's view of the job
    (:func:`~gpu_preflight.backends.launcher.topology.launcher_node_names`). A bundle or payload
    that does not read as its type (:class:`~.payload.WireError`) names its ranks missing, with
    the key path, for ``cluster.completeness`` to FAIL; it neither stops the gather nor passes.
    ``clock_skew``: each
    rank's clock minus this rank's, as ``[low, high]`` seconds, from what the ranks measured.
    """
    beats = beats if beats is not None else tracker(store)
    payloads: dict[int, dict[str, Any]] = {}
    missing: dict[int, str] = {}
    bundles: dict[int, NodeBundle] = {}
    pending = set(range(topo.num_nodes))
    seen, looked = 0, float("-inf")

    def take(texts: dict[int, str], why: dict[int, str]) -> None:
        missing.update(why)
        for r, text in texts.items():
            try:
                payloads[r] = RankPayload.from_json(text).to_dict()
            except WireError as exc:
                missing[r] = unreadable(PAYLOAD, exc)

    def take_bundles(nodes: list[int]) -> None:
        for n, text in zip(nodes, read_values(store, [f"{PREFIX}/node/{n}" for n in nodes]), strict=True):
            if text is None:
                continue
            pending.discard(n)
            try:
                bundles[n] = bundle = NodeBundle.from_json(text)
            except WireError as exc:  # its payloads are gone from the store: its ranks are named, saying why
                missing.update((r, unreadable(BUNDLE, exc)) for r in node_ranks(topo, n))
                continue
            payloads.update(bundle.payloads)
            missing.update(bundle.missing)

    while pending:
        posted = get_text(store, BUNDLED_KEY) or ""
        take_bundles([n for n in map(int, posted[seen:posted.rfind(",") + 1].split(",")[:-1]) if n in pending])
        seen = posted.rfind(",") + 1
        now = time.monotonic()
        if pending and now - looked >= WAKE_S:
            looked = now
            leaders = {node_ranks(topo, n)[0]: n for n in sorted(pending)}
            for leader in _dead(store, beats, list(leaders), absent):
                n = leaders[leader]  # its leader looks dead: read its ranks, unless its bundle comes meanwhile
                found = collect(store, node_ranks(topo, n), deadline, absent, beats, until=f"{PREFIX}/node/{n}")
                take_bundles([n])
                if n in pending:
                    take(*found)
                    pending.discard(n)
        left = deadline - time.monotonic()
        if not pending or left <= 0:
            break
        with contextlib.suppress(Exception):  # the wait ran out: read what was posted meanwhile
            store.wait([BUNDLED_ALL_KEY], timedelta(seconds=min(WAKE_S, left)))
    for n in sorted(pending):  # no bundle in time: whatever its ranks posted themselves
        take(*collect(store, node_ranks(topo, n), time.monotonic(), absent, beats))
    named = names(store, topo, [r for r in range(topo.world_size) if r in missing or r not in payloads])
    for r, why in list(missing.items()):
        progress = get_text(store, f"{PREFIX}/progress/{r}")
        missing[r] = (f"rank {r} on {named.get(r) or 'unknown host'} {why}"
                      + (f", last stage {progress}" if progress else ""))
    skew = {r: [low, high] for r, (low, high) in clock_skews(store).items()}
    ordered = [bundles[n] for n in sorted(bundles)]  # node order, whatever order they came in
    return {"payloads": payloads, "missing": missing, "names": named, "topology": topo.to_dict(),
            "columns": [b.columns for b in ordered], "index": [b.index for b in ordered],
            "collectives": [b.collectives for b in ordered], "clock_skew": skew}


def names(store: KVStore, topo: Topology, ranks: list[int]) -> dict[int, str]:
    """Host names of ranks that did not report: their own hello, a node-mate's, or the launcher's."""
    from ..backends.launcher.topology import launcher_node_names

    found: dict[int, str] = {}
    launcher: dict[int, str] | None = None
    for r in ranks:
        for other in [r, *node_ranks(topo, r // max(topo.local_world_size, 1))]:
            hello = hello_of(store, other)
            if hello is not None:
                found[r] = hello.node_name or hello.hostname
                break
        else:
            if launcher is None:
                launcher = launcher_node_names(topo)
                launcher.update((int(n), a) for n, a in json.loads(get_text(store, RDZV_NAMES_KEY) or "{}").items())
            if r // max(topo.local_world_size, 1) in launcher:
                found[r] = launcher[r // max(topo.local_world_size, 1)]
    return found
