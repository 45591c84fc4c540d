"""cluster.connectivity: the rules at and around each boundary, the majority that pins a failure
on a node, the measurement's own steps on real sockets, and the report's matrix.

The multi-host run with a name that does not resolve and a port a firewall drops is
``tests/test_netns_connectivity.py``.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any, cast

import pytest

from gpu_preflight.backends.launcher.topology import Launcher, Topology
from gpu_preflight.cluster.aggregate import cluster_facts
from gpu_preflight.config import Config
from gpu_preflight.config.diagnostics import DiagnosticsConfig
from gpu_preflight.distributed import connectivity as conn
from gpu_preflight.distributed.store import KVStore
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.ids import CONNECTIVITY_ID
from gpu_preflight.records.connectivity import attribute
from gpu_preflight.registry import CheckContext, get_check
from gpu_preflight.report import render
from gpu_preflight.report.build import build_cluster_report
from gpu_preflight.report.connectivity import reachability_markdown

from .connectivity_data import add_connectivity, address, block
from .report_data import gathered_cluster

UNRESOLVED = {"forward": {"outcome": "unresolved", "ms": 0.1, "error": "gaierror: [Errno -2] Name not known"}}
DROPPED = {"connect": {"outcome": "timeout", "ms": 5000.0, "target": "x", "error": "no answer within 5 s (dropped)"}}
REFUSED = {"connect": {"outcome": "refused", "ms": 0.1, "target": "x", "error": "[Errno 111] Connection refused"}}
NO_ROUTE = {"connect": {"outcome": "unreachable", "ms": 0.1, "target": "x", "error": "OSError: No route to host"}}


def gathered(nodes: int, **kwargs: Any) -> dict[str, Any]:
    return add_connectivity(gathered_cluster(nodes, 1), **kwargs)


def judge(g: dict[str, Any], slow_ms: float = 1000.0) -> list[tuple[str, str, str]]:
    config = Config(diagnostics=DiagnosticsConfig(connectivity_slow_ms=slow_ms))
    found = get_check(CONNECTIVITY_ID).fn(CheckContext(host="cluster", facts={"cluster": cluster_facts(g)},
                                                       config=config))
    return [(f.status.value, f.subject, f.code) for f in found]


def towards(peer: int, nodes: int, steps: dict[str, Any], probers: list[int] | None = None) -> dict[Any, Any]:
    return {(i, peer): steps for i in (probers if probers is not None else range(nodes)) if i != peer}


def from_(prober: int, nodes: int, steps: dict[str, Any]) -> dict[Any, Any]:
    return {(prober, j): steps for j in range(nodes) if j != prober}


# ---- the majority: which node a set of failed pairs points at ----

def _all_pairs(n: int) -> set[tuple[int, int]]:
    return {(i, j) for i in range(n) for j in range(n) if i != j}


@pytest.mark.parametrize(("n", "bad", "missing", "want"), [
    (3, [(0, 2), (1, 2)], [], {("target", 2)}),  # 2 of 2 that tried it
    (3, [(0, 2)], [], {("pair", 0, 2)}),  # 1 of 2: neither side's majority
    (4, [(0, 3), (1, 3)], [], {("target", 3)}),  # 2 of 3 > half
    (5, [(0, 4), (1, 4)], [], {("pair", 0, 4), ("pair", 1, 4)}),  # 2 of 4 is not more than half
    (3, [(2, 0), (2, 1)], [], {("prober", 2)}),  # reaches nobody: the prober itself
    (4, [(3, 0), (3, 1)], [], {("prober", 3)}),  # 2 of its 3 peers
    (2, [(0, 1)], [], {("pair", 0, 1)}),  # one measurement cannot split two nodes
    (2, [(0, 1)], [1], {("target", 1)}),  # ... unless the peer is missing from the run
])
def test_attribution_by_majority(n: int, bad: list[tuple[int, int]], missing: list[int], want: set[Any]) -> None:
    assert set(attribute(bad, _all_pairs(n), missing)) == want


def test_unmeasured_pairs_do_not_count() -> None:
    """A pair that was not measured is neither a failure nor a vote."""
    measured = _all_pairs(3) - {(1, 2)}
    assert set(attribute([(0, 2), (1, 2)], measured)) == {("pair", 0, 2)}


# ---- the rules, each on both sides of its boundary ----

def test_healthy_cluster_passes_once() -> None:
    assert judge(gathered(3)) == [("PASS", "cluster", "ok")]


def test_single_node_and_no_measurement_skip() -> None:
    assert judge(gathered(1)) == [("SKIP", "cluster", "not_run")]
    assert judge(gathered_cluster(3, 1)) == [("SKIP", "cluster", "not_run")]  # a report from before the measurement


def test_name_nobody_resolves_fails_that_node_only() -> None:
    assert judge(gathered(3, faults=towards(1, 3, UNRESOLVED))) == [("FAIL", "h1", "name_unresolved")]
    timed_out = {"forward": {"outcome": "timeout", "ms": None, "error": "no answer within 7 s (forward)"}}
    assert judge(gathered(3, faults=towards(1, 3, timed_out))) == [("FAIL", "h1", "name_unresolved")]


def test_node_that_resolves_nobody_is_at_fault_itself() -> None:
    assert judge(gathered(3, faults=from_(2, 3, UNRESOLVED))) == [("FAIL", "h2", "resolver_failing")]


def test_one_odd_pair_is_named_as_the_pair() -> None:
    assert judge(gathered(3, faults={(0, 2): UNRESOLVED})) == [("FAIL", "h0->h2", "name_unresolved_pair")]


@pytest.mark.parametrize("steps", [DROPPED, REFUSED, NO_ROUTE])
def test_node_nobody_reaches_fails(steps: dict[str, Any]) -> None:
    assert judge(gathered(3, faults=towards(0, 3, steps))) == [("FAIL", "h0", "unreachable")]


def test_node_that_reaches_nobody_is_at_fault_itself() -> None:
    assert judge(gathered(4, faults=from_(3, 4, DROPPED))) == [("FAIL", "h3", "reaches_nobody")]


def test_both_faults_in_one_run_name_two_nodes() -> None:
    faults = {**towards(0, 3, UNRESOLVED), **towards(2, 3, DROPPED)}
    want = [("FAIL", "h0", "name_unresolved"), ("FAIL", "h2", "unreachable")]
    assert sorted(judge(gathered(3, faults=faults))) == want


def test_name_leading_to_another_node_fails() -> None:
    wrong = {"forward": {"outcome": "ok", "ms": 0.3, "addresses": [address(2)]},
             "via_name": {"outcome": "ok", "ms": 0.2, "target": f"{address(2)}:41000", "node": 2}}
    assert judge(gathered(3, faults=towards(1, 3, wrong, [0]))) == [("FAIL", "h0->h1", "name_wrong_host_pair")]
    assert judge(gathered(3, faults=towards(1, 3, wrong))) == [("FAIL", "h1", "name_wrong_host")]


def test_forward_mismatch_warns_unless_the_name_reaches_the_node() -> None:
    elsewhere = {"forward": {"outcome": "ok", "ms": 0.3, "addresses": ["192.168.9.9"]}}
    stale = {**elsewhere, "via_name": {"outcome": "timeout", "ms": None, "target": "192.168.9.9:41000"}}
    assert judge(gathered(3, faults=towards(1, 3, stale))) == [("WARN", "h1", "forward_mismatch")]
    other_nic = {**elsewhere, "via_name": {"outcome": "ok", "ms": 0.2, "target": "192.168.9.9:41000", "node": 1}}
    assert judge(gathered(3, faults=towards(1, 3, other_nic))) == [("PASS", "cluster", "ok")]


def test_reverse_mismatch_warns_and_a_missing_reverse_name_is_not_judged() -> None:
    other = {"reverse": {"outcome": "ok", "ms": 0.3, "of": address(1), "name": "old-host-7.example"}}
    assert judge(gathered(3, faults=towards(1, 3, other))) == [("WARN", "h1", "reverse_mismatch")]
    short = {"reverse": {"outcome": "ok", "ms": 0.3, "of": address(1), "name": "H1"}}  # the name, other case
    assert judge(gathered(3, faults=towards(1, 3, short))) == [("PASS", "cluster", "ok")]
    none = {"reverse": {"outcome": "none", "ms": 0.3, "of": address(1), "error": "gaierror: -2"}}
    assert judge(gathered(3, faults=towards(1, 3, none))) == [("PASS", "cluster", "ok")]


@pytest.mark.parametrize(("ms", "want"), [(250.0, [("PASS", "cluster", "ok")]),
                                          (250.001, [("WARN", "h2", "slow_resolver")])])
def test_slow_lookups_warn_above_the_setting(ms: float, want: list[Any]) -> None:
    slow = {"forward": {"outcome": "ok", "ms": ms, "addresses": ["x"]}}
    faults = {(2, j): {**slow, "forward": {**slow["forward"], "addresses": [address(j)]}} for j in (0, 1)}
    assert judge(gathered(3, faults=faults), slow_ms=250.0) == want


def test_what_could_not_be_measured_is_an_error_never_a_pass() -> None:
    g = gathered(3, faults=towards(1, 3, {"connect": {"outcome": "not_run", "error": "no listener to connect to: "
                                                                                    "cannot listen on port 29660"}}))
    assert judge(g) == [("ERROR", "h1", "not_measured")]
    g = gathered(3)
    del g["payloads"][2]["connectivity"]
    assert judge(g) == [("ERROR", "h2", "not_measured")]
    g = gathered(3)
    g["payloads"][0]["connectivity"] = {"node": 0, "self": {}, "probes": [], "error": "connectivity not measured: x"}
    assert judge(g) == [("ERROR", "h0", "not_measured")]


def test_missing_node_takes_the_failures_towards_it_and_no_error() -> None:
    """A node that left the run (cluster.completeness names it) is the one its failed probes point at,
    even on two nodes; what it did not measure itself is not an ERROR of this check."""
    g = gathered(2, faults=towards(1, 2, REFUSED))
    del g["payloads"][1]
    g["missing"] = {1: "never joined"}
    assert judge(g) == [("FAIL", "h1", "unreachable")]


def test_store_connect_failure_warns() -> None:
    g = gathered(3)
    g["payloads"][2]["connectivity"]["rendezvous"] = {"outcome": "refused", "ms": 0.1, "target": "10.1.0.1:29500",
                                                      "error": "refused"}
    assert judge(g) == [("WARN", "h2", "store_connect_failed")]


# ---- the measurement's steps, on real sockets of this host ----

def test_peers_of_bounds_each_node_and_covers_each() -> None:
    assert conn.peers_of(2, 5) == [0, 1, 3, 4]
    assert len(conn.peers_of(0, conn.ALL_PEERS_UP_TO)) == conn.ALL_PEERS_UP_TO - 1
    n = 1000
    chosen = {i: conn.peers_of(i, n) for i in range(n)}
    assert all(len(set(p)) == conn.SAMPLE and i not in p for i, p in chosen.items())
    probed_by = {j: 0 for j in range(n)}
    for p in chosen.values():
        for j in p:
            probed_by[j] += 1
    assert min(probed_by.values()) >= conn.RING
    assert conn.peers_of(7, n) == chosen[7]  # the same pairs for the same job shape


def test_launch_name_prefers_the_host_list_then_the_rendezvous() -> None:
    advert = {"node": 1, "name": "gpu-st-3", "listed": True, "hostname": "ip-10-1-2-3"}
    assert conn.launch_name(advert, {1: "10.1.2.3"}) == ("gpu-st-3", "host list")
    assert conn.launch_name({**advert, "listed": False}, {1: "10.1.2.3"}) == ("10.1.2.3", "rendezvous")
    assert conn.launch_name({**advert, "listed": False}, {}) == ("ip-10-1-2-3", "host name")


def test_lookup_and_connect_steps_report_what_happened() -> None:
    assert conn.forward("localhost")["outcome"] == "ok"
    gone = conn.forward("no-such-node.invalid")
    assert gone["outcome"] == "unresolved" and gone["error"]
    listener = conn.Listener(0, 4, "tok", socket.AF_INET, lifetime_s=30)
    try:
        got = conn.connect("127.0.0.1", listener.port, 2.0, {"tok": 4})
        assert got["outcome"] == "ok" and got["node"] == 4 and got["ms"] >= 0
        other = conn.connect("127.0.0.1", listener.port, 2.0, {})  # no token known: the banner's node number
        assert other["node"] == 4
    finally:
        listener.close()
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    assert conn.connect("127.0.0.1", closed, 2.0, {})["outcome"] == "refused"


class _DictStore:
    """The store calls the measurement makes, on a dict (one process plays every node)."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def set(self, key: str, value: str) -> None:
        self.data[key] = value.encode()

    def get(self, key: str) -> bytes:
        return self.data[key]

    def add(self, key: str, n: int) -> int:
        value = int(self.data.get(key, b"0")) + n
        self.data[key] = str(value).encode()
        return value

    def check(self, keys: list[str]) -> bool:
        return all(k in self.data for k in keys)

    def multi_get(self, keys: list[str]) -> list[bytes]:
        return [self.data[k] for k in keys]


def DictStore() -> KVStore:  # reads as the class it makes
    return cast(KVStore, _DictStore())


def _topo(node: int, nodes: int, store_port: int) -> Topology:
    return Topology(Launcher.SLURM, nodes, node, 0, 1, node, nodes, "vm",
                    hosts=tuple("localhost" for _ in range(nodes)), master_addr="127.0.0.1", master_port=store_port)


def test_three_leaders_measure_each_other_through_the_store() -> None:
    """Three node leaders in one process: each advertises its listener and measures the other two;
    a leader whose listener is gone is unreachable from both, and the check names it."""
    store = DictStore()
    cfg = DiagnosticsConfig(connectivity_timeout_s=2.0)
    rdzv = conn.Listener(0, 99, "store", socket.AF_INET, lifetime_s=30)  # stands for the job's store port
    identity = {"name": "localhost", "hostname": "localhost", "address": "127.0.0.1"}
    probes = [conn.start(store, _topo(n, 3, rdzv.port), identity, cfg, wait_s=10.0) for n in range(3)]
    assert all(p is not None and p.listener is not None for p in probes)
    t0 = time.monotonic()
    blocks = [p.result() for p in probes if p is not None]
    assert time.monotonic() - t0 < 10
    for n, b in enumerate(blocks):
        assert [x["peer"] for x in b["probes"]] == [j for j in range(3) if j != n]
        assert all(x["connect"]["outcome"] == "ok" and x["connect"]["node"] == x["peer"] for x in b["probes"]), b
        assert all(x["forward"]["outcome"] == "ok" and x["reverse"]["outcome"] == "skipped" for x in b["probes"])
        assert b["rendezvous"]["outcome"] == "ok"
    g = gathered_cluster(3, 1)
    for n, b in enumerate(blocks):
        g["payloads"][n]["connectivity"] = json.loads(json.dumps(b))
    assert judge(g) == [("PASS", "cluster", "ok")]
    probes[1].listener.close()  # type: ignore[union-attr]
    time.sleep(0.7)  # the accept loop notices within its 0.5 s tick
    g2 = gathered_cluster(3, 1)
    for n in range(3):
        me = {**blocks[n]["self"]}
        g2["payloads"][n]["connectivity"] = conn.measure(store, _topo(n, 3, rdzv.port), me, 2.0, 1.0)
    assert judge(g2) == [("FAIL", "h1", "unreachable")]
    rdzv.close()


def test_a_port_taken_is_an_error_cell_not_a_pass() -> None:
    store = DictStore()
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))  # the same wildcard the listener binds
        s.listen(1)
        taken = s.getsockname()[1]
        cfg = DiagnosticsConfig(connectivity_port=taken, connectivity_timeout_s=1.0)
        identity = {"name": "localhost", "hostname": "localhost", "address": "127.0.0.1"}
        first = conn.start(store, _topo(0, 2, taken), identity, DiagnosticsConfig(connectivity_timeout_s=1.0), 5.0)
        second = conn.start(store, _topo(1, 2, taken), identity, cfg, 5.0)
        assert second is not None and second.me.get("listen_error")
        blocks = [p.result() for p in (first, second) if p is not None]
    g = gathered_cluster(2, 1)
    for n, b in enumerate(blocks):
        g["payloads"][n]["connectivity"] = b
    assert judge(g) == [("ERROR", "h1", "not_measured")]


# ---- the report ----

def _report(g: dict[str, Any]) -> dict[str, Any]:
    report, _ = build_cluster_report(g, Config(), fail_on="fail", include=[], exclude=[], suite="quick",
                                     timeout_s=30.0)
    return report.to_dict()


def test_report_shows_the_matrix_with_times_and_statuses() -> None:
    report = _report(gathered(3, faults=towards(1, 3, UNRESOLVED)))
    reach = report["cluster_summary"]["reachability"]
    assert [r["node"] for r in reach["nodes"]] == ["h0", "h1", "h2"]
    assert reach["nodes"][1]["resolved_by"] == [0, 2] and reach["nodes"][0]["resolved_by"] == [2, 2]
    assert reach["nodes"][0]["forward_ms"] == [0.4, 0.4] and reach["nodes"][0]["connect_ms"] == [0.2, 0.2]
    md = render(report, "md")
    assert "| h1 | 10.1.0.2:41000 | h1 (host list) | 0/2 | ok 2 | 2/2 | 2/2 | — | 0.2/0.2 | ok 0.1 ms | FAIL |" in md
    assert "| h0 | 10.1.0.1:41000 | h0 (host list) | 2/2 | ok 2 | 2/2 | 2/2 | 0.4/0.4 | 0.2/0.2 | ok 0.1 ms | PASS |" \
        in md
    assert "| h0 | — | name unresolved | 0.4/0.2 |" in md  # the pair grid: h0 could not resolve h1
    assert "not measured by gpu-preflight" not in md
    html = render(report, "html")
    assert 'id="reachability"' in html and 'id="reachability-pairs"' in html and "name unresolved" in html


def test_node_specifications_show_the_address_each_node_measured() -> None:
    g = gathered_cluster(2, 1)
    for n in range(2):
        g["payloads"][n]["node_entry"]["section"]["node_info"]["identity"] = {"name": f"h{n}", "address": address(n)}
    md = render(_report(g), "md")
    assert "| h0 | 10.1.0.1 |" in md and "| Node | Address | GPUs |" in md


def test_report_without_a_measurement_says_so() -> None:
    md = render(_report(gathered_cluster(2, 1)), "md")
    assert "Name resolution and reachability: not measured" in md


def test_sampled_large_cluster_keeps_only_the_rows_with_a_problem() -> None:
    g = add_connectivity(gathered_cluster(40, 1), faults=towards(5, 40, DROPPED))
    report = _report(g)  # 40 nodes > report.detail_max_nodes (32)
    reach = report["cluster_summary"]["reachability"]
    assert not reach["detail"]
    assert {r["node"] for r in reach["nodes"]} == {f"h{i}" for i in range(40)}  # every prober has a bad cell
    assert all(c[1] == "h5" for c in reach["cells"]) and len(reach["cells"]) == 39
    assert ("FAIL", "h5", "unreachable") in {(f["status"], f["subject"], f["code"]) for f in report["findings"]
                                             if f["check_id"] == CONNECTIVITY_ID}


def test_block_helper_matches_the_measurement_shape() -> None:
    """The test data has the keys the measurement writes (so these tests judge real shapes)."""
    store = DictStore()
    identity = {"name": "localhost", "hostname": "localhost", "address": "127.0.0.1"}
    probes = [conn.start(store, _topo(n, 2, 1), identity, DiagnosticsConfig(connectivity_timeout_s=1.0), 5.0)
              for n in range(2)]
    real = next(p.result() for p in probes if p is not None)
    fake = block(0, 2)
    assert set(fake) >= set(real) - {"error"} and set(fake["probes"][0]) == set(real["probes"][0]) - {"via_name"}
    assert set(fake["self"]) >= set(real["self"]) - {"listen_error"}


GOLDEN = Path(__file__).parent / "fixtures" / "assessment" / "reachability.md"


def test_matrix_markdown_golden() -> None:
    """The section as the Markdown report prints it, for a run with one name nobody resolves, one
    node nobody reaches and one slow resolver (``UPDATE_GOLDEN=1`` rewrites it after a deliberate change)."""
    slow = {(0, j): {"forward": {"outcome": "ok", "ms": 1500.0, "addresses": [address(j)]}} for j in (1, 2, 3)}
    faults = {**towards(1, 4, UNRESOLVED, [2, 3]), **towards(2, 4, DROPPED, [0, 1, 3]), **slow}
    report = _report(gathered(4, faults=faults))
    text = "\n".join(reachability_markdown(ClusterReport.of(report)))
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8"), f"{GOLDEN.name} differs (UPDATE_GOLDEN=1 regenerates it)"


def test_rendered_rows_are_capped_worst_first() -> None:
    """A fault on every node of a huge cluster: Markdown and HTML show the worst rows and say how
    many more report.json holds."""
    from gpu_preflight.report.connectivity import MAX_REACH_ROWS, reachability_rows

    report = _report(gathered(3, faults=towards(1, 3, UNRESOLVED)))
    rows = report["cluster_summary"]["reachability"]["nodes"]
    report["cluster_summary"]["reachability"]["nodes"] = [dict(rows[i % 3], node=f"n{i}")
                                                         for i in range(MAX_REACH_ROWS + 50)]
    report["findings"].append({**next(f for f in report["findings"] if f["check_id"] == CONNECTIVITY_ID),
                               "subject": "n249"})
    view = reachability_rows(ClusterReport.of(report))
    assert view is not None and len(view["rows"]) == MAX_REACH_ROWS and view["more"] == 50
    assert view["rows"][0][0] == "n249" and view["rows"][0][-1] == "FAIL"
    assert "50 more node(s) in report.json" in "\n".join(reachability_markdown(ClusterReport.of(report)))


# ---- operator actions (issue 27): a node the majority pins is isolated, a pair or a WARN monitored ----

def acted(g: dict[str, Any], slow_ms: float = 1000.0) -> list[tuple[str, str, str, str | None]]:
    config = Config(diagnostics=DiagnosticsConfig(connectivity_slow_ms=slow_ms))
    found = get_check(CONNECTIVITY_ID).fn(CheckContext(host="cluster", facts={"cluster": cluster_facts(g)},
                                                       config=config))
    return sorted((f.status.value, f.subject, f.code, f.details.get("operator_action")) for f in found)


WRONG = {"forward": {"outcome": "ok", "ms": 0.3, "addresses": [address(2)]},
         "via_name": {"outcome": "ok", "ms": 0.2, "target": f"{address(2)}:41000", "node": 2}}
SLOW = {(2, j): {"forward": {"outcome": "ok", "ms": 250.001, "addresses": [address(j)]}} for j in (0, 1)}


@pytest.mark.parametrize(("g", "want"), [
    (gathered(3, faults=towards(1, 3, UNRESOLVED)), [("FAIL", "h1", "name_unresolved", "isolate_node")]),
    (gathered(3, faults=from_(2, 3, UNRESOLVED)), [("FAIL", "h2", "resolver_failing", "isolate_node")]),
    (gathered(3, faults={(0, 2): UNRESOLVED}), [("FAIL", "h0->h2", "name_unresolved_pair", "monitor")]),
    (gathered(3, faults=towards(0, 3, DROPPED)), [("FAIL", "h0", "unreachable", "isolate_node")]),
    (gathered(4, faults=from_(3, 4, REFUSED)), [("FAIL", "h3", "reaches_nobody", "isolate_node")]),
    # 2 of the 4 nodes that tried h4 failed: not more than half, so two pairs, neither node pinned
    (gathered(5, faults=towards(4, 5, DROPPED, [0, 1])),
     [("FAIL", "h0->h4", "pair_unreachable", "monitor"), ("FAIL", "h1->h4", "pair_unreachable", "monitor")]),
    (gathered(3, faults=towards(1, 3, WRONG)), [("FAIL", "h1", "name_wrong_host", "isolate_node")]),
    (gathered(3, faults=towards(1, 3, WRONG, [0])), [("FAIL", "h0->h1", "name_wrong_host_pair", "monitor")]),
    (gathered(3, faults=towards(1, 3, {"forward": {"outcome": "ok", "ms": 0.3, "addresses": ["192.168.9.9"]},
                                       "via_name": {"outcome": "timeout", "ms": None, "target": "192.168.9.9:1"}})),
     [("WARN", "h1", "forward_mismatch", "monitor")]),
    (gathered(3, faults=towards(1, 3, {"reverse": {"outcome": "ok", "ms": 0.3, "of": address(1),
                                                   "name": "old-host-7.example"}})),
     [("WARN", "h1", "reverse_mismatch", "monitor")]),
    (gathered(3, faults=SLOW), [("WARN", "h2", "slow_resolver", "monitor")]),
    (gathered(2, rendezvous={"outcome": "refused", "ms": 0.1, "target": "10.1.0.1:29500", "error": "refused"}),
     [("WARN", "h0", "store_connect_failed", "monitor"), ("WARN", "h1", "store_connect_failed", "monitor")]),
    (gathered(3, faults=towards(1, 3, {"connect": {"outcome": "not_run", "error": "no listener"}})),
     [("ERROR", "h1", "not_measured", None)]),  # not measured: no action, never a pass
    (gathered(3), [("PASS", "cluster", "ok", None)]),
])
def test_each_failure_mode_names_its_action(g: dict[str, Any], want: list[Any]) -> None:
    assert acted(g, slow_ms=250.0) == want


def test_a_pinned_node_is_isolated_in_its_summary_drain_reason_and_console_line() -> None:
    """The node the majority pins carries the action wherever a hook reads it; a pair's monitor names no node."""
    from gpu_preflight.config.slurm_schema import SlurmConfig
    from gpu_preflight.findings.model import ClusterReport
    from gpu_preflight.integrations.slurm import drain_reason
    from gpu_preflight.integrations.slurm_result import judge as slurm_judge
    from gpu_preflight.integrations.slurm_result import node_results, parse_timestamp
    from gpu_preflight.report.console import render_console_text

    report = json.loads(json.dumps(_report(gathered(3, faults=towards(1, 3, UNRESOLVED)))))
    actions = {s["node_info"]["current_host"]: s["summary"].get("operator_action") for s in report["nodes"].values()}
    assert actions == {"h0": None, "h1": "isolate_node", "h2": None}
    nodes, _ = node_results(ClusterReport.of(report))
    h1 = next(n for n in nodes if "h1" in n.names)
    verdict = slurm_judge(h1.findings, SlurmConfig(), parse_timestamp(report["timestamp"]))
    reason = drain_reason(verdict, "gpu-preflight:")
    assert reason.startswith("gpu-preflight: action=isolate_node "), reason
    assert "action  isolate_node: h1" in render_console_text(ClusterReport.of(report)).splitlines()

    pair = json.loads(json.dumps(_report(gathered(3, faults={(0, 2): UNRESOLVED}))))
    assert all("operator_action" not in s["summary"] for s in pair["nodes"].values())
