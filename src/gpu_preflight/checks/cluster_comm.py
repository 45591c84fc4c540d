"""Cluster checks over the gathered run: completeness and collectives (correctness, speed)."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from operator import itemgetter
from typing import Any

from ..actions import Action, with_action
from ..ids import NODE_LINKS_ID
from ..model import Finding, Status
from ..records import ClusterView
from ..registry import CheckContext, check
from .cluster_rollup import Passes, Series
from .floors import Floor, allreduce_floor, node_topology, peer_gap_status


def cluster(ctx: CheckContext) -> ClusterView:
    facts: ClusterView = ctx.fact("cluster")
    return facts


@check("cluster.completeness", needs=("cluster",), scope="cluster",
       group="nccl_communication", component="service_reliability")
def completeness(ctx: CheckContext) -> Iterator[Finding]:
    """Every rank of the job reported to rank 0.

    FAIL for each rank that died, stopped answering (its heartbeat went stale), did not
    report before the deadline or sent what could not be read (its payload, or its node's
    bundle: the reason names the key path), naming the rank, its host and the stage it was in. Hosts of
    the launcher's list that no reporting node claimed as its name are named too (FAIL beside
    missing ranks, WARN when every rank reported: a listed host that took no part). A node whose
    clock is off rank 0's by more than ``system.clock_skew_warn_s`` WARNs (``clock_skew``).
    """
    c = cluster(ctx)
    for rank, why in sorted(c.missing.items()):
        yield ctx.finding(Status.FAIL, c.rank_subject(rank, {"node_rank": rank // max(
            c.local_world_size, 1), "local_rank": rank % max(c.local_world_size, 1)}), "rank_missing", why,
                          observed="missing", expected="reported",
                          recommendation="Check that host (dmesg, nvidia-smi, network link); exclude it and re-run.")
    if c.missing_hosts:  # named from the launcher's list only because no node answered to them
        shown = ", ".join(c.missing_hosts[:12]) + (f" and {len(c.missing_hosts) - 12} more"
                                                   if len(c.missing_hosts) > 12 else "")
        yield ctx.finding(Status.FAIL if c.missing else Status.WARN, "cluster", "hosts_missing",
                          f"the job's host list names {shown}, but no node that reported calls itself so"
                          + (" (which of the silent node ranks each is, nothing measured says)" if c.missing else ""),
                          observed=list(c.missing_hosts), expected="every listed host reports",
                          recommendation="Check those hosts (is the agent running, can it reach the rendezvous "
                                         "endpoint?); exclude them and re-run.")
    yield from _clock_skew(ctx, c)
    if not c.missing and not c.missing_hosts:
        yield ctx.finding(Status.PASS, "cluster", "ok",
                          f"all {c.world_size} ranks on {c.num_nodes} node(s) reported", observed=c.world_size)


def _clock_skew(ctx: CheckContext, c: ClusterView) -> Iterator[Finding]:
    """WARN per node whose clock is off rank 0's by more than ``system.clock_skew_warn_s`` over the
    whole range its heartbeats bracketed (:mod:`gpu_preflight.distributed.liveness`): the run judges
    liveness on each reader's own clock, so skew costs no verdict, but it is a broken NTP setup."""
    limit = ctx.config.system.clock_skew_warn_s
    worst: dict[int, tuple[int, float, float]] = {}  # node -> its most skewed rank's range
    for rank, (low, high) in sorted(c.clock_skew.items()):
        if low > limit or high < -limit:
            node = rank // max(c.local_world_size, 1)
            off = min(abs(low), abs(high))
            if node not in worst or off > min(abs(worst[node][1]), abs(worst[node][2])):
                worst[node] = (rank, low, high)
    for node, (rank, low, high) in sorted(worst.items()):
        name = c.node_names.get(node, f"node{node}")
        yield ctx.finding(Status.WARN, name, "clock_skew",
                          f"{name}'s clock is {low:+.1f} to {high:+.1f} s off rank 0's (rank {rank})",
                          observed=[round(low, 3), round(high, 3)], expected=f"within ±{limit:g} s", unit="s",
                          recommendation="Fix time sync on that host (chronyc tracking / timedatectl): skewed "
                                         "clocks misalign logs and break timeouts that compare hosts' times.")


def _largest(entry: dict[str, Any]) -> dict[str, Any] | None:
    results = entry.get("results") or []
    return max(results, key=_SIZE) if results else None


_SIZE = itemgetter("size_bytes")


def collective_entries(c: ClusterView) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each group's results once: as reported by the group's lowest rank (all members agree)."""
    yield from c.group_entries


@check("nccl.correctness", needs=("cluster",), scope="cluster",
       group="nccl_communication", component="network_infrastructure")
def correctness(ctx: CheckContext) -> Iterator[Finding]:
    """Every collective produced exactly the expected values.

    FAIL when any element of any verified collective was wrong (nccl-tests' ``#wrong``):
    silent data corruption in a GPU, NVLink, NIC or the library. Names the group, the
    collective and the message size.
    """
    c = cluster(ctx)
    bad = False
    seen = 0
    for _, entry in collective_entries(c):
        seen += 1
        if entry.get("wrong") == 0:  # the runner's total over the sweep: no row to read (60,000 sweeps at scale)
            continue
        for r in entry.get("results", []):
            if r.get("wrong"):
                bad = True
                yield ctx.finding(Status.FAIL, f"group {entry['group']}", "wrong_elements",
                                  f"{entry['op']} on {entry['group']} (ranks {entry['ranks']}) at {r['size_bytes']} B: "
                                  f"{r['wrong']} wrong element(s)", observed=r["wrong"], expected=0, unit="elements",
                                  recommendation="Data corruption: run the pairwise localisation (--localize) or "
                                                 "DCGM diagnostics to find the GPU or link; drain the suspects.")
    if not bad:
        yield ctx.finding(Status.PASS if seen else Status.SKIP, "cluster",
                          "ok" if seen else "not_run",
                          f"{seen} collective sweep(s) verified, no wrong element" if seen else
                          "no collective ran (a single rank, or the run failed before)")


@check("nccl.collectives", needs=("cluster",), scope="cluster",
       group="nccl_communication", component="network_infrastructure")
def collectives(ctx: CheckContext) -> Iterator[Finding]:
    """Collectives complete and reach the expected bus bandwidth.

    FAIL when a collective failed or timed out (naming the ranks that stopped answering),
    or when all_reduce on GPUs at the largest size (at least ``perf.busbw_floor_min_bytes``)
    is below its floor: for a node-local group a site's ``perf.allreduce_busbw_min_gbps``, or
    else the floor its node's topology calls for (``perf.allreduce_nvswitch_busbw_min_gbps`` on
    NVSwitch, scaled by active NVLinks; ``perf.allreduce_pcie_busbw_min_gbps`` otherwise,
    scaled by PCIe generation); for a group across nodes ``perf.network_busbw_min_gbps``.
    CPU (gloo) groups are not held to GPU floors. A node's node-local all_reduce more than
    ``perf.peer_outlier_fraction`` below the median of the nodes WARNs,
    ``perf.peer_outlier_fail_fraction`` or more below FAILs: a slow NVLink/PCIe fabric on
    that node.
    """
    c, perf = cluster(ctx), ctx.config.perf
    passes = Passes(ctx, c)
    entries = list(collective_entries(c))
    errors = c.collective_errors
    reported: set[str] = set()
    for _rank, entry in errors:
        key = f"{entry['op']}@{entry['group']}"
        if key in reported:
            continue
        reported.add(key)
        culprits = [why for r, why in sorted(c.missing.items()) if r in entry.get("ranks", [])]
        yield ctx.finding(Status.FAIL, f"group {entry['group']}", "collective_failed",
                          f"{entry['op']} on {entry['group']} failed: {entry['error']}"
                          + (f"; {'; '.join(culprits)}" if culprits else ""), observed=entry["error"],
                          recommendation="A rank died, hung or lost its link: check the named host; exclude it "
                                         "and re-run, or run --localize to find the bad node.")
    intra: dict[str, float] = {}
    topologies: dict[int, dict[str, Any] | None] = {}
    for _, entry in entries:
        if entry["op"] != "all_reduce" or not entry.get("results"):
            continue
        top = _largest(entry)
        assert top is not None
        busbw = float(top["busbw_gbps"])
        crosses_nodes = entry.get("scope") == "inter_node" or (entry.get("scope") == "distributed" and c.num_nodes > 1)
        subject = f"group {entry['group']}"
        if entry.get("scope") in ("intra_node",) or (entry.get("scope") == "distributed" and c.num_nodes == 1):
            intra[entry["group"]] = busbw
        floor = _floor(c, ctx, entry, top, crosses_nodes, topologies)
        if floor is not None and busbw < floor.gbps:
            yield ctx.finding(Status.FAIL, subject, "busbw_below_floor",
                              f"all_reduce busbw {busbw:.1f} GB/s on {entry['group']} at {top['size_bytes']} B, "
                              f"floor {floor.gbps:g} ({floor.basis})", observed=round(busbw, 2),
                              expected=f">= {floor.gbps:g}", unit="GB/s", details={"floor_basis": floor.basis},
                              recommendation="Check NVLink/NVSwitch health, NCCL env (NCCL_P2P_DISABLE, NCCL_IB_*), "
                                             "and the network for inter-node groups.")
        else:
            scope = str(entry.get("scope"))

            def passed(_: int, subject: str = subject, busbw: float = busbw, entry: dict[str, Any] = entry,
                       top: dict[str, Any] = top, floor: Floor | None = floor) -> Finding:
                return _allreduce_pass(ctx, subject, busbw, entry, top, floor)

            yield from passes.add((subject,), passed,
                                  Series(scope, (round(busbw, 3),), f"all_reduce ({scope})", "GB/s busbw"))
    yield from passes.findings()
    if len(intra) >= 3:
        median = statistics.median(intra.values())
        for group, busbw in sorted(intra.items()):
            status = peer_gap_status(busbw, median, perf)
            if status is not Status.PASS:
                limit = median * (1 - (perf.peer_outlier_fail_fraction if status is Status.FAIL
                                       else perf.peer_outlier_fraction))
                yield ctx.finding(status, f"group {group}", "busbw_outlier",
                                  f"{group}: all_reduce busbw {busbw:.1f} GB/s, "
                                  f"{100 * (1 - busbw / median):.0f}% below the median node ({median:.1f})",
                                  observed=round(busbw, 2),
                                  expected=f"{'>' if status is Status.FAIL else '>='} {limit:.1f}", unit="GB/s",
                                  details={"median_gbps": round(median, 3)},
                                  recommendation="This node's GPU interconnect is slower than its peers: check NVLink "
                                                 "state and PCIe links (gpu.nvlink, gpu.pcie)."
                                                 + (" Every collective of a job on it runs at its pace: drain it."
                                                    if status is Status.FAIL else ""))
    if not entries and not errors:
        yield ctx.finding(Status.SKIP, "cluster", "not_run",
                          "no collective ran: a single rank (add GPUs or nodes to test communication)")


def _floor(c: ClusterView, ctx: CheckContext, entry: dict[str, Any], top: dict[str, Any], crosses_nodes: bool,
           topologies: dict[int, dict[str, Any] | None]) -> Floor | None:
    """The floor this all_reduce is held to, or None: CPU ranks, one rank, too small a message, none set."""
    perf = ctx.config.perf
    ranks = entry.get("ranks") or []
    if len(ranks) < 2 or not c.gpu_ranks.issuperset(ranks) or top["size_bytes"] < perf.busbw_floor_min_bytes:
        return None
    if crosses_nodes:
        return None if perf.network_busbw_min_gbps is None else Floor(perf.network_busbw_min_gbps, "across nodes")
    first = c.payloads.get(ranks[0], {})
    node = int(first.get("node_rank", ranks[0] // max(c.local_world_size, 1)))
    if node not in topologies:
        topologies[node] = node_topology(c.node_facts.get(node, {}).get("gpu"))
    return allreduce_floor(perf, ctx.config.gpu, topologies[node])


def _allreduce_pass(ctx: CheckContext, subject: str, busbw: float, entry: dict[str, Any], top: dict[str, Any],
                    floor: Floor | None) -> Finding:
    return ctx.finding(Status.PASS, subject, "ok",
                       f"all_reduce {busbw:.2f} GB/s busbw on {entry['group']} ({len(entry['ranks'])} ranks, "
                       f"{top['size_bytes']} B)" + (f", floor {floor.gbps:g} ({floor.basis})" if floor else ""),
                       observed=round(busbw, 3), expected=f">= {floor.gbps:g}" if floor else None, unit="GB/s")


def _link_action(status: Status, nodes: int, reference: bool) -> Action:
    """The operator action of a slow or failed exchange with node 0, by who owns it.

    A FAIL with three or more nodes, node 0 clear (most of its exchanges are fine), is the peer's:
    it stays out until its link is fixed (isolate, as localisation isolates a node it convicts).
    On two nodes one exchange cannot say which end is at fault, and when most exchanges are bad
    node 0 is (``reference_slow``, isolate) and the peers are collateral: watch them (monitor),
    as every WARN."""
    if status is Status.FAIL and nodes >= 3 and not reference:
        return Action.ISOLATE_NODE
    return Action.MONITOR


@check(NODE_LINKS_ID, needs=("cluster",), scope="cluster", group=(), component="network_infrastructure",
       core=True)
def node_links(ctx: CheckContext) -> Iterator[Finding]:
    """Every node exchanges data with node 0 at the speed of its peers.

    Node 0 exchanges a message both ways with each other node in turn. FAIL for an
    exchange that failed, timed out or delivered wrong data, and for one below
    ``perf.node_link_min_gbps`` or ``perf.peer_outlier_fail_fraction`` or more below the
    median (the slow link paces every collective); WARN for one more than
    ``perf.peer_outlier_fraction`` below the median. The slow node is named: the peer of a slow exchange, or node 0
    itself when (with three or more nodes) most of its exchanges are slow. SKIP on one node.
    Operator action (:func:`_link_action`): a FAIL pinned on a peer isolates it, ``reference_slow``
    isolates node 0; a WARN, a FAIL on two nodes (either end) and the peers of a slow node 0 are
    ``monitor``.
    """
    c, perf = cluster(ctx), ctx.config.perf
    ref_rank = 0
    pairs = c.payloads.get(ref_rank, {}).get("links", [])
    if c.num_nodes < 2:
        yield ctx.finding(Status.SKIP, "cluster", "single_node", "one node: no node links to test")
        return
    per_node = max(c.local_world_size, 1)

    def name(rank: int) -> str:
        node = int(c.payloads[rank].get("node_rank", rank // per_node)) if rank in c.payloads else rank // per_node
        return c.node_names.get(node, f"rank{rank}")

    ok = [p for p in pairs if "gbps" in p and not p.get("wrong")]
    median = statistics.median(p["gbps"] for p in ok) if ok else None
    slow, found = [], []
    for p in pairs:
        peer = p["pair"][1]
        if p.get("error") or p.get("wrong"):
            slow.append(p)
            found.append(ctx.finding(Status.FAIL, name(peer), "exchange_failed",
                                     f"exchange {name(p['pair'][0])} <-> {name(peer)} failed: "
                                     f"{p.get('error') or str(p['wrong']) + ' wrong element(s)'}",
                                     recommendation="Check this node's network link (cables, NIC, switch port) and its "
                                                    "fabric settings; exclude it and re-run."))
        elif perf.node_link_min_gbps is not None and p["gbps"] < perf.node_link_min_gbps:
            slow.append(p)
            found.append(ctx.finding(Status.FAIL, name(peer), "link_below_floor",
                                     f"exchange with {name(p['pair'][0])}: {p['gbps']:.3f} GB/s",
                                     observed=round(p["gbps"], 4),
                                     expected=f">= {perf.node_link_min_gbps:g}", unit="GB/s",
                                     recommendation="This node's link is below the floor: check its NIC, cable and "
                                                    "switch port."))
        elif median and len(ok) >= 2 and (status := peer_gap_status(p["gbps"], median, perf)) is not Status.PASS:
            slow.append(p)
            limit = median * (1 - (perf.peer_outlier_fail_fraction if status is Status.FAIL
                                   else perf.peer_outlier_fraction))
            found.append(ctx.finding(status, name(peer), "link_slow",
                                     f"exchange with {name(p['pair'][0])}: {p['gbps']:.3f} GB/s, "
                                     f"{100 * (1 - p['gbps'] / median):.0f}% below the median {median:.3f}",
                                     observed=round(p["gbps"], 4),
                                     expected=f"{'>' if status is Status.FAIL else '>='} {limit:.3f}",
                                     unit="GB/s", details={"median_gbps": round(median, 4)},
                                     recommendation="This node's network link is slower than its peers': check "
                                                    "its NIC, cable, switch port and link speed."
                                                    + (" Every collective of a job on it runs at its pace: exclude it."
                                                       if status is Status.FAIL else "")))
    reference = c.num_nodes >= 3 and bool(pairs) and len(slow) > len(pairs) / 2
    for f in found:
        f.details = with_action(f.details, _link_action(f.status, c.num_nodes, reference))
        yield f
    if reference:
        yield ctx.finding(Status.FAIL, name(ref_rank), "reference_slow",
                          f"{len(slow)} of {len(pairs)} exchanges with {name(ref_rank)} are slow or failed: "
                          f"the common member, {name(ref_rank)}, is the likely culprit",
                          details=with_action({}, Action.ISOLATE_NODE),
                          recommendation="Check node 0's network link; re-run with it excluded to confirm.")
    elif not slow:
        yield ctx.finding(Status.PASS, "cluster", "ok",
                          f"{len(pairs)} node exchange(s) with {name(ref_rank)}, median {median or 0:.3f} GB/s",
                          observed={name(p["pair"][1]): round(p.get("gbps", 0.0), 4) for p in pairs}, unit="GB/s")
