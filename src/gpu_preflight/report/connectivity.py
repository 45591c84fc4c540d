"""The node-pair connectivity matrix: which node pairs were measured, how fast, and with what verdict.

Pairwise data comes, best first, from a ``matrix`` handed in, from the localisation rounds
(``cluster_summary.localization.matrix``: sparse ``[i, j, gbps, result]`` cells), or from
``network.node_links`` (node 0 exchanges with each other node; its findings name the peer),
which makes a star. The same table, plots and consistency score use whichever is there.
Unmeasured pairs stay ``None``: an empty cell is "not tested", never "fine".

Beside it, the name-resolution and reachability matrix (:func:`reachability_rows`, rendered
by :func:`reachability_markdown` and :func:`reachability_html`): per node, as the user's
health-assessment document lays its connectivity matrix out, the address, the name the
launcher uses, how many nodes resolved and reached it and how fast, and the status
``cluster.connectivity`` gave it; up to :data:`MATRIX_MAX_NODES` nodes the pairwise grid too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from ..findings.model import ClusterReport, Connectivity, ConnectivityCell, ConnectivityPair
from ..ids import CONNECTIVITY_ID, NODE_LINKS_ID
from ..model import Status
from .html_review import table as html_table
from .html_review import td
from .markdown_sections import cell as md_cell
from .markdown_sections import table as md_table

MATRIX_MAX_NODES = 32  # larger clusters get a list of pairs, not a grid

__all__ = ["connectivity", "node_names", "reachability_html", "reachability_markdown", "reachability_rows"]


def node_names(report: ClusterReport) -> list[str]:
    """Node names as findings' subjects use them (``current_host`` in cluster runs), in node order."""
    return report.nodes.host_names()


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _from_findings(report: ClusterReport, ref: str) -> list[ConnectivityPair]:
    """The star: a PASS finding's ``observed`` (or any finding's ``details.exchanges``) maps each
    peer to its speed; WARN/FAIL findings name one slow or failed peer and override it."""
    pairs: dict[str, ConnectivityPair] = {}
    for f in report.findings:
        if f.check_id != NODE_LINKS_ID:
            continue
        observed = f.observed
        exchanges = f.details.get("exchanges")
        if f.status is Status.PASS and isinstance(observed, Mapping):
            exchanges = observed
        for peer, gbps in (exchanges or {}).items() if isinstance(exchanges, Mapping) else ():
            pairs.setdefault(str(peer), ConnectivityPair(a=ref, b=str(peer), gbps=_number(gbps),
                                                         status=Status.PASS.value))
        if f.status in (Status.WARN, Status.FAIL) and f.code != "reference_slow":
            peer = str(f.subject)
            pairs[peer] = ConnectivityPair(a=ref, b=peer, gbps=_number(observed), status=f.status.value)
    return list(pairs.values())


_STATUS = {"ok": Status.PASS.value, "slow": Status.WARN.value, "latency": Status.WARN.value,
           "below_floor": Status.FAIL.value, "wrong": Status.FAIL.value, "failed": Status.FAIL.value,
           "timeout": Status.FAIL.value}


def _from_matrix(matrix: Iterable[Any], names: list[str]) -> list[ConnectivityPair]:
    """Pairs from ``{"a", "b"}`` (node names), localisation measurements (``members`` = two node
    indices, ``status`` ok/wrong/failed/timeout or a judged ``result`` such as ``slow``), or the
    localisation block's sparse cells ``[i, j, gbps, result]``. Several measurements of one pair
    (rails, rounds) merge into the worst status and the lowest speed."""
    merged: dict[tuple[str, str], ConnectivityPair] = {}
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
        merged[key] = ConnectivityPair(a=a, b=b, gbps=gbps, status=status)
    return list(merged.values())


def connectivity(report: ClusterReport,
                 matrix: Iterable[Mapping[str, Any]] | None = None) -> Connectivity | None:
    """The node-pair matrix (source, nodes, pairs, cells), or ``None`` where no pair was measured.

    ``cells[i][j]`` is ``{"gbps", "status"}`` for a measured pair (symmetric), ``None``
    otherwise; above :data:`MATRIX_MAX_NODES` nodes ``cells`` is ``None`` and ``pairs``
    says it all. ``matrix`` (see :func:`_from_matrix`) replaces what the report holds;
    ``truncated`` says the localisation kept only failing cells of a huge matrix.
    """
    typed = report
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
    cells: list[list[ConnectivityCell | None]] | None = None
    if len(names) <= MATRIX_MAX_NODES:  # a grid of 10,000 x 10,000 cells would be 100 million Nones
        index = {n: i for i, n in enumerate(names)}
        cells = [[None] * len(names) for _ in names]
        for p in pairs:
            cell = ConnectivityCell(gbps=p["gbps"], status=p["status"])
            cells[index[p["a"]]][index[p["b"]]] = cell
            cells[index[p["b"]]][index[p["a"]]] = cell
    return Connectivity(source=source, nodes=names, pairs=pairs, cells=cells, truncated=truncated)


# ---- name resolution and reachability (cluster.connectivity's measurements) ----

REACH_WORDS = {"ok": "ok", "unresolved": "unresolved", "timeout": "timed out", "refused": "refused",
               "unreachable": "no route", "error": "not measured", "not_run": "not measured", "none": "no name",
               "mismatch": "mismatch", "skipped": "same host"}


def _pair_statuses(report: ClusterReport) -> tuple[dict[str, str], bool]:
    """Each node's worst ``cluster.connectivity`` status (a pair's finding counts for both ends),
    and whether the check judged anything at all (else rows are "not judged")."""
    worst: dict[str, list[str]] = {}
    judged = False
    for f in report.findings:
        if f.check_id != CONNECTIVITY_ID or f.status is Status.SKIP:
            continue
        judged = True
        for name in str(f.subject).split("->"):
            worst.setdefault(name, []).append(f.status.value)
    return {n: Status.worst(s).value for n, s in worst.items()}, judged


def _ratio(pair: Any) -> str:
    return f"{pair[0]}/{pair[1]}" if isinstance(pair, (list, tuple)) and len(pair) == 2 and pair[1] else "—"


def _ms(value: float) -> str:
    """A response time as people read one: 0.31, 12, 1500 (never 1.5e+03)."""
    return f"{value:.0f}" if value >= 100 else f"{value:.2g}"


def _spread(ms: Any) -> str:
    return f"{_ms(ms[0])}/{_ms(ms[1])}" if isinstance(ms, (list, tuple)) and len(ms) == 2 else "—"


def _reverse(counts: Any) -> str:
    if not isinstance(counts, Mapping) or not counts:
        return "—"
    return ", ".join(f"{REACH_WORDS.get(str(k), k)} {v}" for k, v in counts.items())


def _store(rdzv: Any) -> str:
    if not isinstance(rdzv, Mapping):
        return "—"
    word = REACH_WORDS.get(str(rdzv.get("outcome")), str(rdzv.get("outcome")))
    return f"{word} {_ms(rdzv['ms'])} ms" if rdzv.get("ms") is not None and word == "ok" else word


def _pair_cell(cell: Sequence[Any]) -> str:
    """``lookup/connect ms`` where both worked, else what failed: ``unresolved; refused``."""
    _, _, fwd, fwd_ms, rev, _, conn, conn_ms = cell
    if fwd == "ok" and conn == "ok":
        text = f"{_ms(fwd_ms)}/{_ms(conn_ms)}" if fwd_ms is not None and conn_ms is not None else "ok"
        return text + (" (reverse mismatch)" if rev == "mismatch" else "")
    parts = [f"name {REACH_WORDS.get(fwd, fwd)}" if fwd != "ok" else "", f"port {REACH_WORDS.get(conn, conn)}"
             if conn != "ok" else ""]
    return "; ".join(p for p in parts if p)


MAX_REACH_ROWS = 200  # rows shown in Markdown and HTML; report.json keeps every one
_RANK = {"FAIL": 0, "ERROR": 1, "WARN": 2, "not judged": 3, "PASS": 4}


def reachability_rows(report: ClusterReport) -> dict[str, Any] | None:
    """What the report shows of ``cluster_summary.reachability``: one row per node (the spec's
    connectivity matrix: address, the name looked up, how many nodes resolved and reached it,
    response times, the status ``cluster.connectivity`` gave it) and, up to
    :data:`MATRIX_MAX_NODES` nodes with every cell kept, the pairwise grid. None where nothing was measured."""
    typed = report
    block = typed.cluster_summary.extra.get("reachability")
    if not isinstance(block, Mapping):
        return None
    statuses, judged = _pair_statuses(typed)
    rows = []
    for r in block.get("nodes") or ():
        name = str(r.get("node"))
        where = r.get("address") or "—"
        rows.append([name, f"{where}:{r['port']}" if r.get("port") else where,
                     f"{r.get('lookup') or '—'} ({r.get('source') or '?'})", _ratio(r.get("resolved_by")),
                     _reverse(r.get("reverse")), _ratio(r.get("reached_by")), _ratio(r.get("reaches")),
                     _spread(r.get("forward_ms")), _spread(r.get("connect_ms")), _store(r.get("rendezvous")),
                     statuses.get(name) or ("PASS" if judged else "not judged")])
    grid = None
    names = [str(r.get("node")) for r in block.get("nodes") or ()]
    if block.get("detail") and len(names) <= MATRIX_MAX_NODES:
        index = {n: i for i, n in enumerate(names)}
        grid = [["—" if i == k else "·" for k in range(len(names))] for i in range(len(names))]
        for cell in block.get("cells") or ():
            a, b = index.get(str(cell[0])), index.get(str(cell[1]))
            if a is not None and b is not None:
                grid[a][b] = _pair_cell(cell)
    if len(rows) > MAX_REACH_ROWS:  # a cluster-wide fault at 10,000 nodes: the page stays small
        rows = sorted(rows, key=lambda r: _RANK.get(r[-1], len(_RANK)))[:MAX_REACH_ROWS]
    return {"rows": rows, "more": len(block.get("nodes") or ()) - len(rows), "names": names, "grid": grid,
            "sampled": bool(block.get("sampled")), "peers": block.get("peers_per_node"),
            "timeout_s": block.get("timeout_s"), "detail": block.get("detail")}


REACH_HEAD = ("Node", "Address:probe port", "Name looked up", "Resolved by", "Reverse", "Reached by", "Reaches",
              "Lookup ms", "Connect ms", "Store", "Status")
REACH_INTRO = ("Name resolution and reachability (cluster.connectivity): each node looked up the others' names as "
               "the launcher does (forward and reverse) and opened a TCP connection to each one's probe port. "
               "Resolved by / Reached by: nodes that succeeded of those that tried; Reaches: the same from this "
               "node; times in ms, median/slowest.")
REACH_NONE = "Name resolution and reachability: not measured (one node, or a report from before it was measured)."


def _reach_notes(view: Mapping[str, Any]) -> list[str]:
    notes = []
    if view["sampled"]:
        notes.append(f"Above 64 nodes each node probes {view['peers']} peers (3 ring neighbours and random others).")
    if not view["detail"]:
        notes.append("Above report.detail_max_nodes only the nodes with a step not ok are listed.")
    if view["more"]:
        notes.append(f"{view['more']} more node(s) in report.json under cluster_summary.reachability.")
    return notes


def reachability_markdown(report: ClusterReport) -> list[str]:
    """The Markdown lines of the name-resolution and reachability matrix (or why there is none)."""
    view = reachability_rows(report)
    if view is None:
        return [REACH_NONE, ""]
    lines = [md_cell(REACH_INTRO), "", *md_table(REACH_HEAD, view["rows"]), ""]
    if view["grid"] is not None:
        lines += ["Per pair (row looks up and connects to column; lookup/connect ms):", "",
                  *md_table(("From \\ To", *view["names"]), [(n, *g) for n, g in zip(view["names"], view["grid"],
                                                                                   strict=True)]), ""]
    notes = _reach_notes(view)
    return [*lines, *(md_cell(n) for n in notes), *([""] if notes else [])]


def reachability_html(report: ClusterReport) -> str:
    """The HTML of the same matrix (tables with ids ``reachability`` and ``reachability-pairs``)."""
    view = reachability_rows(report)
    if view is None:
        return f'<p class="small muted">{escape(REACH_NONE)}</p>'
    title, _, intro = REACH_INTRO.partition(": ")
    out = f'<h3>{escape(title)}</h3><p class="small">{escape(intro)}</p>'
    out += html_table(REACH_HEAD, [td(*r) for r in view["rows"]], "reachability")
    if view["grid"] is not None:
        out += ('<p class="small">Per pair (row looks up and connects to column; lookup/connect ms):</p>'
                + html_table(("From \\ To", *view["names"]), [td(n, *g) for n, g in zip(view["names"], view["grid"],
                                                                                    strict=True)],
                        "reachability-pairs"))
    return out + "".join(f'<p class="small muted">{escape(n)}</p>' for n in _reach_notes(view))
