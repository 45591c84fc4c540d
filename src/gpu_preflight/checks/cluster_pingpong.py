"""Node pairs exchanged libfabric ``fi_pingpong`` traffic (EFA in production, tcp in CI).

Operator actions (:data:`PINGPONG_ACTIONS`): ``monitor`` for a pair that failed or was slow.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..actions import Action
from ..config.diagnostics import diagnostics_config
from ..ids import PINGPONG_ID
from ..model import Finding, Status
from ..records import ClusterView, pingpong_pairs
from ..records.errors import ParseError
from ..records.libfabric import PingpongRecord
from ..registry import CheckContext, check
from .evidence import judge_record, parse_error_finding

CHECK = PINGPONG_ID

PINGPONG_ACTIONS = {"pingpong_failed": Action.MONITOR, "bandwidth_low": Action.MONITOR}
"""A pair's exchange is owned by neither node: node 2k serves, node 2k+1 connects, each node is in
one pair, so one failed or slow exchange cannot say which side (or the switch path between) is at
fault, and the finding's subject is the pair (``a<->b``), which no node's summary takes. Keep both
in service and watch the pair (monitor); a node whose own provider, EFA device or port is at fault
is named by its node checks (``fabric.fi_info``, ``fabric.efa``, ``ib.ports``) with their actions."""


def _expected(ctx: CheckContext, c: ClusterView, provider: str, nodes: list[int]) -> bool:
    """A missing provider FAILs only where it should exist (as ``fabric.fi_info`` decides per node)."""
    wanted = diagnostics_config(ctx.config).efa_expected
    if provider != "efa":
        return True
    if wanted is not None:
        return wanted
    return any((c.node_facts.get(n, {}).get("fabric") or {}).get("efa_devices") for n in nodes)


@check(CHECK, needs=("cluster",), scope="cluster", group="efa_network", component="network_infrastructure", core=True,
       actions=PINGPONG_ACTIONS)
def pingpong(ctx: CheckContext) -> Iterator[Finding]:
    """Each node pair exchanged fi_pingpong traffic over the configured libfabric provider.

    Node 2k serves and node 2k+1 connects (an odd last node connects to node 0), over
    ``diagnostics.pingpong_provider`` (efa; tcp to test without EFA) and
    ``pingpong_endpoint``. Judged by the ``fi-pingpong`` rules on the client's table: FAIL
    when the exchange did not complete (refused, reset, provider error) or the largest size
    is below ``evidence.pingpong_min_mb_per_s``. ERROR when the client timed out or a side
    sent no result;
    SKIP when fi_pingpong is not installed, or the provider is absent on nodes that are
    not expected to have it. SKIP on a single node.
    """
    c: ClusterView = ctx.fact("cluster")
    pairs = pingpong_pairs(c)
    tables: dict[int, PingpongRecord | ParseError] = ctx.facts.get("pingpong_tables") or {}
    if not pairs:
        why = "one node: no node pair" if c.num_nodes < 2 else "no node reported a fi_pingpong result"
        yield ctx.finding(Status.SKIP, "cluster", "not_run", f"fi_pingpong not run: {why}")
        return
    for k, sides in sorted(pairs.items()):
        yield _pair(ctx, c, k, sides, tables.get(k))


def _pair(ctx: CheckContext, c: ClusterView, k: int, sides: dict[str, dict[str, Any]],
          table: PingpongRecord | ParseError | None) -> Finding:
    server, client = sides.get("server"), sides.get("client")
    nodes = [s["node"] for s in (server, client) if s] + [int(s.get("peer_node", -1)) for s in (server, client) if s]
    nodes = sorted({n for n in nodes if n >= 0})
    subject = "<->".join(c.node_names.get(n, f"node{n}") for n in nodes)
    provider = str((client or server or {}).get("provider"))
    details = {"pair": k, "server": _brief(server), "client": _brief(client)}
    for side in (server, client):
        if side and side.get("missing"):
            return Finding(CHECK, Status.SKIP, subject, "not_installed",
                           f"fi_pingpong not found on {c.node_names.get(side['node'], side['node'])}",
                           details=details, recommendation="Install libfabric's fabtests (fi_pingpong) on every node.")
    if any(s and s.get("provider_missing") for s in (server, client)) and not _expected(ctx, c, provider, nodes):
        return Finding(CHECK, Status.SKIP, subject, "no_provider",
                       f"provider {provider} not available (fi_getinfo -61) and not expected here", details=details)
    if server is None or client is None:
        gone = "server" if server is None else "client"
        return Finding(CHECK, Status.ERROR, subject, "side_missing",
                       f"pair {k}: no fi_pingpong result from the {gone} side", details=details,
                       recommendation="That node did not run or report its side: see cluster.completeness.")
    if client.get("timed_out"):  # the client's outcome is the measurement; a server waits for it
        where = c.node_names.get(client["node"], client["node"])
        return Finding(CHECK, Status.ERROR, subject, "tool_timeout",
                       f"fi_pingpong (client on {where}) did not finish within its time limit: {client.get('error')}",
                       details=details, recommendation="Check that the two nodes can reach each other on the control "
                                                       "port and that the provider works on both (`fi_info -p`).")
    if table is None:  # the aggregation parses every client table it hands over (cluster.pingpong_tables)
        return ctx.finding(Status.ERROR, subject, "not_parsed", f"pair {k}: the client's fi_pingpong table was "
                           "not parsed for this check", details=details,
                           recommendation="This is a gpu-preflight bug: please report it with the report.")
    if isinstance(table, ParseError):
        finding = parse_error_finding(table, subject)
        finding.check_id, finding.details = CHECK, {**finding.details, **details}
        return finding
    record = PingpongRecord(list(table.rows), list(table.errors))
    if not record.rows and client.get("error"):
        record.errors.append(str(client["error"]))
    findings = judge_record("fi-pingpong", record, ctx.config, source=subject)
    worst = max(findings, key=lambda f: f.status.rank)
    worst.details.update(details)
    return worst


def _brief(side: dict[str, Any] | None) -> dict[str, Any] | None:
    if side is None:
        return None
    return {k: side.get(k) for k in ("node", "test_role", "peer", "provider", "endpoint", "port", "rc", "timed_out",
                                     "attempts", "duration_s", "error")}
