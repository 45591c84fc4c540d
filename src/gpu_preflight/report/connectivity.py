"""The node-pair connectivity matrix: which node pairs were measured, how fast, and with what verdict.

Pairwise data comes, best first, from a ``matrix`` handed in, from the localisation rounds
(``cluster_summary.localization.matrix``: sparse ``[i, j, gbps, result]`` cells), or from
``network.node_links`` (node 0 exchanges with each other node; its findings name the peer),
which makes a star. The same table, plots and consistency score use whichever is there.
Unmeasured pairs stay ``None``: an empty cell is "not tested", never "fine".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from ..ids import NODE_LINKS_ID
from ..model import Status
from .model import ClusterReport

MATRIX_MAX_NODES = 32  # larger clusters get a list of pairs, not a grid

__all__ = ["Pair", "connectivity", "node_names"]


class Pair(TypedDict):
    """One measured node pair (the ``matrix`` input and the ``pairs`` output)."""

    a: str
    b: str
    gbps: float | None
    status: str


def node_names(report: ClusterReport | Mapping[str, Any]) -> list[str]:
    """Node names as findings' subjects use them (``current_host`` in cluster runs), in node order."""
    return ClusterReport.of(report).nodes.host_names()


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _from_findings(report: ClusterReport, ref: str) -> list[Pair]:
    """The star: a PASS finding's ``observed`` (or any finding's ``details.exchanges``) maps each
    peer to its speed; WARN/FAIL findings name one slow or failed peer and override it."""
    pairs: dict[str, Pair] = {}
    for f in report.findings:
        if f.check_id != NODE_LINKS_ID:
            continue
        observed = f.observed
        exchanges = f.details.get("exchanges")
        if f.status is Status.PASS and isinstance(observed, Mapping):
            exchanges = observed
        for peer, gbps in (exchanges or {}).items() if isinstance(exchanges, Mapping) else ():
            pairs.setdefault(str(peer), Pair(a=ref, b=str(peer), gbps=_number(gbps), status=Status.PASS.value))
        if f.status in (Status.WARN, Status.FAIL) and f.code != "reference_slow":
            peer = str(f.subject)
            pairs[peer] = Pair(a=ref, b=peer, gbps=_number(observed), status=f.status.value)
    return list(pairs.values())


_STATUS = {"ok": Status.PASS.value, "slow": Status.WARN.value, "latency": Status.WARN.value,
           "below_floor": Status.FAIL.value, "wrong": Status.FAIL.value, "failed": Status.FAIL.value,
           "timeout": Status.FAIL.value}


def _from_matrix(matrix: Iterable[Any], names: list[str]) -> list[Pair]:
    """Pairs from ``{"a", "b"}`` (node names), localisation measurements (``members`` = two node
    indices, ``status`` ok/wrong/failed/timeout or a judged ``result`` such as ``slow``), or the
    localisation block's sparse cells ``[i, j, gbps, result]``. Several measurements of one pair
    (rails, rounds) merge into the worst status and the lowest speed."""
    merged: dict[tuple[str, str], Pair] = {}
    for item in matrix:
        p: Mapping[str, Any] = item if isinstance(item, Mapping) else \
            {"members": item[:2], "gbps": item[2], "result": item[3]}
        if "members" in p:
            members = [int(m) for m in p["members"]]
            if len(members) != 2:
                continue  # group tests are not node pairs
            a, b = (names[m] if m < len(names) else f"node{m}" for m in members)
        else:
            a, b = str(p["a"]), str(p["b"])
        raw = str(p.get("result") or p.get("status") or "ok")
        status = _STATUS.get(raw.lower(), raw.upper() if raw.upper() in Status.__members__ else Status.WARN.value)
        key = (min(a, b), max(a, b))
        gbps = _number(p.get("gbps"))
        if key in merged:
            old = merged[key]
            status = Status.worst([old["status"], status]).value
            gbps = min((g for g in (old["gbps"], gbps) if g is not None), default=None)
        merged[key] = Pair(a=a, b=b, gbps=gbps, status=status)
    return list(merged.values())


def connectivity(report: ClusterReport | Mapping[str, Any],
                 matrix: Iterable[Mapping[str, Any]] | None = None) -> dict[str, Any] | None:
    """``{"source", "nodes", "pairs", "cells"}`` or ``None`` where no pair was measured.

    ``cells[i][j]`` is ``{"gbps", "status"}`` for a measured pair (symmetric), ``None``
    otherwise; above :data:`MATRIX_MAX_NODES` nodes ``cells`` is ``None`` and ``pairs``
    says it all. ``matrix`` (see :func:`_from_matrix`) replaces what the report holds;
    ``truncated`` says the localisation kept only failing cells of a huge matrix.
    """
    typed = ClusterReport.of(report)
    names = node_names(typed)
    located = (typed.cluster_summary.extra.get("localization") or {}).get("matrix")
    truncated = False
    if matrix is not None:
        pairs = _from_matrix(matrix, names)
        source = "matrix"
    elif isinstance(located, Mapping) and located.get("cells"):
        pairs = _from_matrix(located["cells"], [str(n) for n in located.get("nodes") or names])
        source, truncated = "localization", bool(located.get("truncated"))
    else:
        pairs = _from_findings(typed, names[0] if names else "node0")
        source = NODE_LINKS_ID
    if not pairs:
        return None
    known = set(names)
    for p in pairs:
        for name in (p["a"], p["b"]):
            if name not in known:
                known.add(name)
                names.append(name)
    cells: list[list[dict[str, Any] | None]] | None = None
    if len(names) <= MATRIX_MAX_NODES:  # a grid of 10,000 x 10,000 cells would be 100 million Nones
        index = {n: i for i, n in enumerate(names)}
        cells = [[None] * len(names) for _ in names]
        for p in pairs:
            cell = {"gbps": p["gbps"], "status": p["status"]}
            cells[index[p["a"]]][index[p["b"]]] = cell
            cells[index[p["b"]]][index[p["a"]]] = cell
    return {"source": source, "nodes": names, "pairs": [dict(p) for p in pairs], "cells": cells,
            "truncated": truncated}
