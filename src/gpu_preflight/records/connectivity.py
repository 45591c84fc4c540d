"""The node-to-node name lookups and TCP connects the node leaders measured, as rank 0 reads them.

Each node leader sends one ``connectivity`` block (:mod:`gpu_preflight.distributed.connectivity`
measures it): what it advertised about itself (address, probe port, names) and one probe per
peer it sampled — the forward lookup of the peer's name, the reverse lookup of the peer's
address, the TCP connect to the peer's probe port, and where the name led elsewhere, the connect
to that address. Each step has an ``outcome`` word, never a verdict; this module turns the
blocks into :class:`Cell` rows, tallies them per node, and says which node a set of failed
cells points at (:func:`attribute`). Judging is :mod:`gpu_preflight.checks.cluster_connectivity`'s;
the report's matrix is built from :func:`summary`.

Pure: no sockets, no store; what a step could not do (``error``, ``not_run``) stays apart from
what it found (``unresolved``, ``refused``...), so a probe that never ran is never read as a pass.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from .cluster import ClusterView

__all__ = ["CONNECT_FAILED", "NOT_PERFORMED", "RESOLVE_FAILED", "Cell", "attribute", "blocks", "cells",
           "names_of", "reverse_word", "summary"]

RESOLVE_FAILED = frozenset(("unresolved", "timeout"))  # the name gave no address (in time)
CONNECT_FAILED = frozenset(("refused", "timeout", "unreachable"))  # nothing answered on the port
NOT_PERFORMED = frozenset(("error", "not_run"))  # the step could not be taken: not measured


def _f(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _i(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _step(probe: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    step = probe.get(key)
    return step if isinstance(step, Mapping) else {}


class Cell(msgspec.Struct, frozen=True):
    """One node (``prober``) looking up and reaching another (``peer``): each step's outcome word,
    its time in milliseconds where it was timed, and what it found."""

    prober: int
    peer: int
    name: str | None  # the name looked up (the launcher's name for the peer)
    source: str | None  # where that name came from: "host list", "rendezvous", "host name"
    address: str | None  # the address the peer advertised (its address toward the job's store)
    port: int | None
    forward: str
    forward_ms: float | None
    addresses: tuple[str, ...]
    reverse: str
    reverse_ms: float | None
    reverse_name: str | None
    connect: str
    connect_ms: float | None
    connect_node: int | None  # the node the listener said it was (None: no banner read)
    via: str | None  # the connect to the name's own address, where it is not the advertised one
    via_node: int | None
    via_target: str | None
    errors: tuple[str, ...]  # the steps' error texts, "forward: ...", for the report

    @property
    def loopback(self) -> bool:
        """Both ends on one host (two agents on one machine): the reverse name says nothing of the peer."""
        return bool(self.address) and (str(self.address).startswith("127.") or self.address == "::1")

    @property
    def name_matches(self) -> bool | None:
        """The name gave the peer's advertised address (None: not resolved, or no address to compare)."""
        if self.forward != "ok" or not self.address:
            return None
        return self.address in self.addresses

    def error_of(self, step: str) -> str:
        """The text a step ended with (``"forward"``, ``"connect"``...), or its outcome word."""
        head = f"{step}: "
        found = next((e[len(head):] for e in self.errors if e.startswith(head)), None)
        return found or str(getattr(self, step, None) or "no result")


def blocks(view: ClusterView) -> dict[int, Mapping[str, Any]]:
    """Node rank → the connectivity block its leader sent (only those that sent one)."""
    out = {}
    for node, payload in view.leaders.items():
        block = payload.get("connectivity")
        if isinstance(block, Mapping):
            out[node] = block
    return out


def _cell(prober: int, probe: Mapping[str, Any]) -> Cell | None:
    peer = _i(probe.get("peer"))
    if peer is None:
        return None
    fwd, rev, conn, via = (_step(probe, k) for k in ("forward", "reverse", "connect", "via_name"))
    errors = tuple(f"{k}: {s['error']}" for k, s in (("forward", fwd), ("reverse", rev), ("connect", conn),
                                                   ("via", via)) if s.get("error"))
    return Cell(prober, peer, probe.get("name"), probe.get("source"), probe.get("address"), _i(probe.get("port")),
                str(fwd.get("outcome") or "not_run"), _f(fwd.get("ms")),
                tuple(str(a) for a in fwd.get("addresses") or ()),
                str(rev.get("outcome") or "not_run"), _f(rev.get("ms")), rev.get("name"),
                str(conn.get("outcome") or "not_run"), _f(conn.get("ms")), _i(conn.get("node")),
                str(via["outcome"]) if via.get("outcome") else None, _i(via.get("node")), via.get("target"), errors)


def cells(view: ClusterView) -> list[Cell]:
    """Every probe of every node leader, in node order then peer order."""
    out = []
    for node, block in sorted(blocks(view).items()):
        for probe in block.get("probes") or ():
            if isinstance(probe, Mapping) and (cell := _cell(node, probe)) is not None:
                out.append(cell)
    return out


def names_of(block: Mapping[str, Any] | None) -> set[str]:
    """Every name a node goes by (its own word, its host name, FQDN, the name looked up), lower
    case, with their first labels: what a reverse lookup of its address may answer."""
    me = (block or {}).get("self") or {}
    found = {str(me[k]).lower() for k in ("name", "hostname", "fqdn", "lookup") if me.get(k)}
    return found | {n.split(".", 1)[0] for n in found}


def reverse_word(cell: Cell, sent: Mapping[int, Mapping[str, Any]]) -> str:
    """The reverse lookup's outcome, ``mismatch`` where it named a host the peer does not go by."""
    if cell.reverse != "ok":
        return cell.reverse
    rname = str(cell.reverse_name or "").lower()
    known = names_of(sent.get(cell.peer)) | ({cell.name.lower()} if cell.name else set())
    return "ok" if rname in known or rname.split(".", 1)[0] in known else "mismatch"


Culprit = tuple[str, int] | tuple[str, int, int]  # ("target", j), ("prober", i) or ("pair", i, j)


def attribute(bad: Iterable[tuple[int, int]], measured: Iterable[tuple[int, int]],
              missing: Iterable[int] = ()) -> dict[Culprit, list[tuple[int, int]]]:
    """Which node each failed ``(prober, peer)`` pair points at, by the majority of what was measured.

    The peer, when more than half of the two or more nodes that measured it failed (a name no
    one can resolve, a port every node finds closed), or when it is missing from the run; else
    the prober, when more than half of the two or more peers it measured failed (its own
    resolver, route or firewall: it reaches nobody); else the pair alone, which one measurement
    cannot split (two nodes, or one odd pair in a healthy cluster).
    """
    measured = set(measured)
    bad = [p for p in bad if p in measured]
    gone = set(missing)
    by_peer: dict[int, int] = defaultdict(int)
    by_prober: dict[int, int] = defaultdict(int)
    bad_peer: dict[int, int] = defaultdict(int)
    bad_prober: dict[int, int] = defaultdict(int)
    for i, j in measured:
        by_peer[j] += 1
        by_prober[i] += 1
    for i, j in bad:
        bad_peer[j] += 1
        bad_prober[i] += 1
    out: dict[Culprit, list[tuple[int, int]]] = defaultdict(list)
    for i, j in sorted(bad):
        if j in gone or (by_peer[j] >= 2 and 2 * bad_peer[j] > by_peer[j]):
            out[("target", j)].append((i, j))
        elif by_prober[i] >= 2 and 2 * bad_prober[i] > by_prober[i]:
            out[("prober", i)].append((i, j))
        else:
            out[("pair", i, j)].append((i, j))
    return dict(out)


def _ms(values: list[float]) -> list[float] | None:
    """``[median, max]`` in ms, rounded for the report."""
    return [round(statistics.median(values), 3), round(max(values), 3)] if values else None


def summary(view: ClusterView, detail: bool = True) -> dict[str, Any] | None:
    """The matrix the report shows (``cluster_summary.reachability``), or None where no leader
    measured anything.

    ``nodes``: per node, its advertised address and probe port, the name looked up for it, how
    many nodes resolved and reached it out of those that tried, the same as a prober, the
    median and slowest lookup and connect (ms), reverse-lookup tallies and its connect to the
    job's store. ``cells``: ``[prober, peer, forward, forward_ms, reverse, reverse_ms, connect,
    connect_ms]`` per probe, nodes by name, the reverse outcome ``mismatch`` where the name it
    gave is not one the peer goes by. Without ``detail`` (more nodes than
    ``report.detail_max_nodes``) only the rows and cells with a step not ``ok`` are kept.
    """
    sent = blocks(view)
    if not sent:
        return None
    rows: list[dict[str, Any]] = []
    found = cells(view)
    as_peer: dict[int, list[Cell]] = defaultdict(list)
    as_prober: dict[int, list[Cell]] = defaultdict(list)
    for c in found:
        as_peer[c.peer].append(c)
        as_prober[c.prober].append(c)
    lookup = {c.peer: (c.name, c.source) for c in found if c.name}
    for node in range(view.num_nodes):
        block = sent.get(node) or {}
        me = block.get("self") or {}
        to, fro = as_peer.get(node, []), as_prober.get(node, [])
        tried = [c for c in to if c.forward not in NOT_PERFORMED]
        dialled = [c for c in to if c.connect not in NOT_PERFORMED]
        reverse: dict[str, int] = defaultdict(int)
        for c in to:
            reverse[reverse_word(c, sent)] += 1
        rdzv = block.get("rendezvous") if isinstance(block.get("rendezvous"), Mapping) else None
        name, source = lookup.get(node, (me.get("lookup"), me.get("source")))
        rows.append({
            "node": view.node_names.get(node, f"node{node}"), "address": me.get("address"), "port": me.get("port"),
            "lookup": name, "source": source, "listen_error": me.get("listen_error"),
            "error": block.get("error") if node in sent else "sent no connectivity measurement",
            "probed_by": len(to), "resolved_by": [sum(c.forward == "ok" for c in tried), len(tried)],
            "reached_by": [sum(c.connect == "ok" for c in dialled), len(dialled)],
            "resolves": [sum(c.forward == "ok" for c in fro), sum(c.forward not in NOT_PERFORMED for c in fro)],
            "reaches": [sum(c.connect == "ok" for c in fro), sum(c.connect not in NOT_PERFORMED for c in fro)],
            "forward_ms": _ms([c.forward_ms for c in to if c.forward == "ok" and c.forward_ms is not None]),
            "reverse_ms": _ms([c.reverse_ms for c in to if c.reverse == "ok" and c.reverse_ms is not None]),
            "connect_ms": _ms([c.connect_ms for c in to if c.connect == "ok" and c.connect_ms is not None]),
            "reverse": dict(sorted(reverse.items())),
            "rendezvous": None if rdzv is None else {k: rdzv.get(k) for k in ("target", "outcome", "ms", "error")},
            "clean": all(_clean(c, sent) for c in (*to, *fro)) and not block.get("error") and node in sent,
        })
    label = view.node_names.get
    table = [[label(c.prober, f"node{c.prober}"), label(c.peer, f"node{c.peer}"), c.forward, c.forward_ms,
              reverse_word(c, sent), c.reverse_ms, c.connect, c.connect_ms]
             for c in found if detail or not _clean(c, sent)]
    if not detail:
        rows = [r for r in rows if not r["clean"]]
    sampled = any(bool(b.get("sampled")) for b in sent.values())
    return {"nodes": rows, "cells": table, "detail": detail, "sampled": sampled,
            "peers_per_node": max((len(b.get("probes") or ()) for b in sent.values()), default=0),
            "timeout_s": next((b.get("timeout_s") for b in sent.values() if b.get("timeout_s")), None)}


def _clean(c: Cell, sent: Mapping[int, Mapping[str, Any]]) -> bool:
    return c.forward == "ok" and c.connect == "ok" and c.via in (None, "ok") \
        and reverse_word(c, sent) in ("ok", "skipped", "none")  # no reverse name: shown, not judged
