"""Can every node resolve every other node's name and reach it? ``cluster.connectivity``.

Reads what the node leaders measured (:mod:`gpu_preflight.records.connectivity`; measured by
:mod:`gpu_preflight.distributed.connectivity`). The rules, each judged over the (prober, peer)
pairs that were measured, and each failure pinned by the majority
(:func:`~gpu_preflight.records.connectivity.attribute`): on the peer when most nodes that tried
it failed (or it is missing from the run), on the prober when it failed with most of its
peers (it reaches nobody: its own resolver, route or firewall), else on the pair.

- FAIL: a peer's name did not resolve (no address, or none within
  ``diagnostics.connectivity_timeout_s``); a TCP connect to the peer's probe listener was
  refused, dropped or found no route; the name or the address led to a listener of another
  node (a stale DNS record or ``/etc/hosts`` line).
- WARN: the name resolved, but not to the address the peer uses toward the job's store, and
  that address did not answer as the peer (forward mismatch); the reverse lookup of the
  peer's address gave a name the peer does not go by (reverse mismatch); a lookup took longer
  than ``diagnostics.connectivity_slow_ms``; a fresh connect to the job's store failed.
- ERROR: a step could not be taken (no listener to connect to, a node leader that sent no
  measurement or whose measurement broke): not measured, never a pass.
- PASS: every probe resolved and reached its peer.
- SKIP: one node; or no node leader sent a measurement (a report of an older version).

An address with no reverse name at all is shown in the report's matrix but not judged: many
sound networks have forward records only, and no launcher needs the reverse one to start.

Operator actions (:data:`CONNECTIVITY_ACTIONS`): a FAIL pinned on a node isolates it, a FAIL
on a pair and every WARN is ``monitor``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from ..actions import Action
from ..config.diagnostics import diagnostics_config
from ..ids import CONNECTIVITY_ID
from ..model import Finding, Status
from ..records import ClusterView
from ..records.connectivity import (
    CONNECT_FAILED,
    NOT_PERFORMED,
    RESOLVE_FAILED,
    Cell,
    attribute,
    blocks,
    cells,
    reverse_word,
)
from ..registry import CheckContext, check

CHECK = CONNECTIVITY_ID
SHOWN = 6  # nodes named in one finding; the rest are counted

CONNECTIVITY_ACTIONS = {
    **dict.fromkeys(("name_unresolved", "resolver_failing", "unreachable", "reaches_nobody", "name_wrong_host"),
                    Action.ISOLATE_NODE),
    **dict.fromkeys(("name_unresolved_pair", "pair_unreachable", "name_wrong_host_pair", "forward_mismatch",
                     "reverse_mismatch", "slow_lookup", "slow_resolver", "store_connect_failed"), Action.MONITOR),
}
"""A FAIL the majority pins on one node (nobody resolves or reaches it, it resolves or reaches
nobody, its name leads to another host) makes it unusable for any job that spans nodes, and no
reset or reboot mends a DNS record, a route or a firewall: the node stays out until that is fixed
(isolate). A FAIL between one prober and one peer is owned by neither node (the report's
attribution names the pair, so no node's summary takes it): keep both in service and watch the
pair (monitor), as for every WARN, where jobs still start. An ERROR (not measured) names none."""


def _who(names: list[str]) -> str:
    more = len(names) - SHOWN
    return ", ".join(names[:SHOWN]) + (f" and {more} more" if more > 0 else "")


def _ms(value: float | None) -> str:
    return "?" if value is None else f"{value:.3g} ms"


class _Judge:
    """One run of the check: the cells, node names, and the findings built so far."""

    def __init__(self, ctx: CheckContext, c: ClusterView) -> None:
        self.ctx, self.c = ctx, c
        self.sent = blocks(c)
        self.cells = [x for x in cells(c) if x.prober in self.sent and not self.sent[x.prober].get("error")]
        self.missing = set(range(c.num_nodes)) - set(c.leaders)
        self.slow_ms = float(diagnostics_config(ctx.config).connectivity_slow_ms)

    def name(self, node: int) -> str:
        return self.c.node_names.get(node, f"node{node}")

    def kind(self, code_by: Mapping[str, str], status: Status, failed: Callable[[Cell], bool],
             measured: Callable[[Cell], bool], say: Callable[[str, list[Cell], int], tuple[str, str]],
             expected: str) -> Iterator[Finding]:
        """One rule over the measured cells: a finding per node (or pair) the failures point at."""
        done = [x for x in self.cells if measured(x)]
        by_pair = {(x.prober, x.peer): x for x in done}
        bad = [(x.prober, x.peer) for x in done if failed(x)]
        for culprit, pairs in sorted(attribute(bad, by_pair, self.missing).items()):
            role = culprit[0]
            hit = [by_pair[p] for p in pairs]
            if role == "target":
                subject, of = self.name(culprit[1]), sum(1 for x in done if x.peer == culprit[1])
            elif role == "prober":
                subject, of = self.name(culprit[1]), sum(1 for x in done if x.prober == culprit[1])
            else:
                subject, of = f"{self.name(pairs[0][0])}->{self.name(pairs[0][1])}", 1
            summary, advice = say(role, hit, of)
            yield self.ctx.finding(status, subject, code_by[role], summary,
                                   observed={"failed": len(hit), "of": of}, expected=expected, recommendation=advice,
                                   details={"pairs": [[self.name(x.prober), self.name(x.peer), x.name, x.address,
                                                       list(x.errors)] for x in hit[:50]]})

    def others(self, hit: list[Cell], role: str) -> str:
        """The other side of each failed pair: the probers of a target, the peers of a prober."""
        return _who([self.name(x.peer if role == "prober" else x.prober) for x in hit])


def _resolve(j: _Judge) -> Iterator[Finding]:
    def say(role: str, hit: list[Cell], of: int) -> tuple[str, str]:
        x = hit[0]
        what = f"{x.name!r} ({x.source or 'its name'})"
        if role == "prober":
            return (f"{j.name(x.prober)} could not resolve {len(hit)} of the {of} node names it looked up "
                    f"({j.others(hit, role)}; {x.name!r}: {x.error_of('forward')})",
                    f"Check /etc/resolv.conf, /etc/nsswitch.conf and /etc/hosts on {j.name(x.prober)}: "
                    f"`getent hosts {x.name}` fails there.")
        where = f"on {len(hit)} of {of} nodes that looked it up" if role == "target" else f"on {j.name(x.prober)}"
        return (f"{what}, the name the launcher uses for {j.name(x.peer)}, does not resolve {where} "
                f"({j.others(hit, 'target')}: {x.error_of('forward')})",
                f"Add {x.name} to DNS or to /etc/hosts on every node: `getent hosts {x.name}` on "
                f"{j.name(x.prober)} must print {x.address or 'its address'}.")

    yield from j.kind({"target": "name_unresolved", "prober": "resolver_failing", "pair": "name_unresolved_pair"},
                      Status.FAIL, lambda x: x.forward in RESOLVE_FAILED, lambda x: x.forward not in NOT_PERFORMED,
                      say, "the name resolves on every node")


def _reach(j: _Judge) -> Iterator[Finding]:
    def say(role: str, hit: list[Cell], of: int) -> tuple[str, str]:
        x = hit[0]
        if role == "prober":
            return (f"{j.name(x.prober)} could not connect to {len(hit)} of the {of} nodes it tried "
                    f"({j.others(hit, role)}; {x.address}:{x.port}: {x.error_of('connect')})",
                    f"Check {j.name(x.prober)}'s outbound firewall rules and routes (`ip route get {x.address}`).")
        where = f"from {len(hit)} of {of} nodes" if role == "target" else f"from {j.name(x.prober)}"
        return (f"{j.name(x.peer)} did not accept a TCP connection on {x.address}:{x.port} {where} "
                f"({j.others(hit, 'target')}: {x.connect}: {x.error_of('connect')})",
                f"Let the job's nodes through {j.name(x.peer)}'s firewall or security group on every TCP port: "
                "NCCL and gloo listen on ephemeral ports (diagnostics.connectivity_port probes a fixed one).")

    yield from j.kind({"target": "unreachable", "prober": "reaches_nobody", "pair": "pair_unreachable"},
                      Status.FAIL, lambda x: x.connect in CONNECT_FAILED, lambda x: x.connect not in NOT_PERFORMED,
                      say, "every node accepts connections from the others")


def _wrong_host(j: _Judge) -> Iterator[Finding]:
    def other(x: Cell) -> int | None:
        for node in (x.connect_node, x.via_node):
            if node is not None and node != x.peer:
                return node
        return None

    def say(role: str, hit: list[Cell], of: int) -> tuple[str, str]:
        x = hit[0]
        wrong = other(x)
        target = x.via_target if x.via_node == wrong else f"{x.address}:{x.port}"
        return (f"{x.name!r}, the name of {j.name(x.peer)}, led to {target}, which answered as "
                f"{j.name(wrong) if wrong is not None else 'another node'} (on {j.others(hit, 'target')})",
                f"Fix the stale DNS record or /etc/hosts line for {x.name}: a launcher would start "
                f"{j.name(x.peer)}'s work on another host.")

    yield from j.kind({"target": "name_wrong_host", "prober": "name_wrong_host", "pair": "name_wrong_host_pair"},
                      Status.FAIL, lambda x: other(x) is not None, lambda x: x.connect == "ok" or x.via == "ok",
                      say, "each name leads to its own node")


def _forward_mismatch(j: _Judge) -> Iterator[Finding]:
    def say(role: str, hit: list[Cell], of: int) -> tuple[str, str]:
        x = hit[0]
        return (f"{x.name!r}, the name of {j.name(x.peer)}, resolves to {', '.join(x.addresses[:4])}, not "
                f"{x.address} (the address it uses toward the job's store), and that address "
                f"{'answered, but not as a node of this job' if x.via == 'ok' else x.via or 'was not tried'} "
                f"(on {j.others(hit, 'target')})",
                f"Make {x.name} resolve to {x.address} (or the address NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME "
                "select) on every node.")

    yield from j.kind({"target": "forward_mismatch", "prober": "forward_mismatch", "pair": "forward_mismatch"},
                      Status.WARN, lambda x: x.name_matches is False and x.via_node is None,
                      lambda x: x.name_matches is not None and not x.loopback, say,
                      "the name resolves to the node's address")


def _reverse_mismatch(j: _Judge) -> Iterator[Finding]:
    def say(role: str, hit: list[Cell], of: int) -> tuple[str, str]:
        x = hit[0]
        return (f"{x.address} (the address of {j.name(x.peer)}) reverse-resolves to {x.reverse_name!r}, a name "
                f"{j.name(x.peer)} does not go by (on {j.others(hit, 'target')})",
                f"Fix the PTR record or the /etc/hosts line for {x.address}: it should name {x.name}.")

    yield from j.kind({"target": "reverse_mismatch", "prober": "reverse_mismatch", "pair": "reverse_mismatch"},
                      Status.WARN, lambda x: reverse_word(x, j.sent) == "mismatch", lambda x: x.reverse == "ok", say,
                      "the address maps back to the node's name")


def _slow(j: _Judge) -> Iterator[Finding]:
    def slowest(x: Cell) -> float:
        return max((ms for ms, word in ((x.forward_ms, x.forward), (x.reverse_ms, x.reverse))
                    if word == "ok" and ms is not None), default=0.0)

    def say(role: str, hit: list[Cell], of: int) -> tuple[str, str]:
        worst = max(hit, key=slowest)
        if role == "prober":
            return (f"{j.name(worst.prober)}'s name lookups took up to {_ms(slowest(worst))} for {len(hit)} of "
                    f"{of} peers (over {j.slow_ms:g} ms): its resolver is slow",
                    f"Check the first nameserver in {j.name(worst.prober)}'s /etc/resolv.conf (a dead first server "
                    "costs its timeout on every lookup), or list the nodes in /etc/hosts.")
        return (f"lookups of {worst.name!r} ({j.name(worst.peer)}) took up to {_ms(slowest(worst))} "
                f"(over {j.slow_ms:g} ms) on {j.others(hit, 'target')}",
                f"Check the DNS server answering for {worst.name}, or list the nodes in /etc/hosts.")

    yield from j.kind({"target": "slow_lookup", "prober": "slow_resolver", "pair": "slow_lookup"},
                      Status.WARN, lambda x: slowest(x) > j.slow_ms, lambda x: "ok" in (x.forward, x.reverse), say,
                      f"lookups within {j.slow_ms:g} ms")


def _not_measured(j: _Judge) -> Iterator[Finding]:
    for node in sorted(set(j.c.leaders) - set(j.sent)):
        yield j.ctx.finding(Status.ERROR, j.name(node), "not_measured", f"{j.name(node)} sent no connectivity "
                            "measurement: its lookups and connects of the other nodes are unknown",
                            recommendation="Re-run; if it persists, look at that node leader's log.")
    for node, block in sorted(j.sent.items()):
        if block.get("error"):
            yield j.ctx.finding(Status.ERROR, j.name(node), "not_measured", f"{j.name(node)}: {block['error']}",
                                recommendation="Re-run; if it persists, look at that node leader's log.")
    undone: dict[int, list[Cell]] = {}
    for x in j.cells:
        steps = [x.forward, x.connect] + ([] if x.reverse == "skipped" else [x.reverse])
        if x.peer not in j.missing and any(s in NOT_PERFORMED for s in steps):
            undone.setdefault(x.peer, []).append(x)
    for peer, hit in sorted(undone.items()):
        x = hit[0]
        step = next(s for s in ("connect", "forward", "reverse") if getattr(x, s) in NOT_PERFORMED)
        yield j.ctx.finding(Status.ERROR, j.name(peer), "not_measured",
                            f"{len(hit)} probe(s) of {j.name(peer)} could not be taken "
                            f"({j.others(hit, 'target')}; {step}: {x.error_of(step)})",
                            observed={"not_measured": len(hit)},
                            recommendation="Not measured is not a pass: fix what the error says and re-run.")


def _store(j: _Judge) -> Iterator[Finding]:
    for node, block in sorted(j.sent.items()):
        rdzv = block.get("rendezvous")
        if isinstance(rdzv, Mapping) and rdzv.get("outcome") in CONNECT_FAILED:
            yield j.ctx.finding(Status.WARN, j.name(node), "store_connect_failed",
                                f"a new TCP connection from {j.name(node)} to the job's store at {rdzv.get('target')} "
                                f"failed ({rdzv.get('outcome')}: {rdzv.get('error')}): a rank restarted there could "
                                "not rejoin", recommendation="Check the firewall between this node and the "
                                                             "rendezvous host on the rendezvous port.")


def _passed(j: _Judge) -> Finding:
    done = [x for x in j.cells if x.forward == "ok" and x.connect == "ok"]
    fwd = max((x.forward_ms for x in done if x.forward_ms is not None), default=None)
    conn = max((x.connect_ms for x in done if x.connect_ms is not None), default=None)
    unnamed = sum(1 for x in done if x.reverse == "none")
    sampled = any(b.get("sampled") for b in j.sent.values())
    note = f"; {unnamed} address lookup(s) without a reverse name (not judged)" if unnamed else ""
    scope = " (sampled peers per node)" if sampled else ""
    return j.ctx.finding(
        Status.PASS, "cluster", "ok",
        f"{j.c.num_nodes} nodes: each of {len(done)} probes{scope} resolved the peer's name and reached its probe "
        f"port; slowest lookup {_ms(fwd)}, slowest connect {_ms(conn)}{note}",
        observed={"probes": len(done), "forward_ms_max": fwd, "connect_ms_max": conn, "reverse_unnamed": unnamed},
        expected="every name resolves and every node is reachable", unit=None)


@check(CHECK, needs=("cluster",), scope="cluster", group=(), component="network_infrastructure",
       actions=CONNECTIVITY_ACTIONS)
def connectivity(ctx: CheckContext) -> Iterator[Finding]:
    """Every node resolved every other node's name (forward and reverse) and reached it over TCP.

    Node leaders measure it (docs/distributed.md, "Name resolution and reachability"): the
    forward lookup of the name the launcher uses, the reverse lookup of the peer's address, a
    connect to a listener each leader opens (``diagnostics.connectivity_port``, 0 = ephemeral
    as NCCL's), and a connect to the job's store. FAIL: a name that does not resolve, a node
    not reachable, a name that leads to another node — pinned on the node the majority of
    measurements point at. WARN: forward or reverse mismatch, a lookup slower than
    ``diagnostics.connectivity_slow_ms``, a store connect that failed. ERROR: not measured.
    SKIP on one node or when no leader measured it.
    """
    c: ClusterView = ctx.fact("cluster")
    if c.num_nodes < 2:
        yield ctx.finding(Status.SKIP, "cluster", "not_run", "connectivity not measured: one node")
        return
    j = _Judge(ctx, c)
    if not j.sent:
        yield ctx.finding(Status.SKIP, "cluster", "not_run", "connectivity not measured: no node leader sent a "
                                                             "measurement (a run of an older version, or its replay)")
        return
    found: list[Finding] = []
    for rule in (_not_measured, _resolve, _reach, _wrong_host, _forward_mismatch, _reverse_mismatch, _slow, _store):
        found.extend(rule(j))
    yield from found if found else [_passed(j)]
