"""fi_pingpong between node pairs: the pairing, and real runs (tcp provider) across two network namespaces."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.cluster.pingpong_tables import client_tables
from gpu_preflight.config import Config
from gpu_preflight.distributed.pingpong import PairRole, pingpong_plan, run_pingpong_pair
from gpu_preflight.model import Finding, Status
from gpu_preflight.records import ClusterFacts
from gpu_preflight.registry import CheckContext, get_check

from . import netns
from .conftest import REPO
from .diag_tools import config

PREFIX = "gpp"
CLIENT_SCRIPT = """
import json, sys
from gpu_preflight.distributed.pingpong import local_address_towards, run_pingpong_pair
role, peer, port, timeout = sys.argv[1], sys.argv[2] or None, int(sys.argv[3]), float(sys.argv[4])
record = run_pingpong_pair(role, peer, "tcp", port=port, endpoint="msg", iterations=20, timeout_s=timeout)
record["local_address"] = local_address_towards(peer) if peer else None
print(json.dumps(record))
"""


@pytest.fixture
def fi_pingpong() -> str:
    """The real fi_pingpong; CI installs libfabric-bin, so its absence is a failure, not a skip."""
    path = shutil.which("fi_pingpong")
    if path is None:
        pytest.fail("fi_pingpong not found: install libfabric-bin (scripts/test.sh does)")
    return path


@pytest.fixture
def two_hosts(fi_pingpong: str) -> Iterator[list[str]]:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.fail("multi-host tests need root and iproute2 (CI runs as root; scripts/test.sh installs iproute2)")
    with netns.hosts(2, prefix=PREFIX) as names:
        yield names


def cluster(*sides: tuple[int, dict[str, Any]]) -> ClusterFacts:
    payloads: dict[int, dict[str, Any]] = {}
    for node, record in sides:
        payloads.setdefault(node, {"node_rank": node, "pingpong": []})["pingpong"].append(record)
    return ClusterFacts(world_size=2, num_nodes=2, local_world_size=1, payloads=payloads, missing={},
                        node_names={0: "host1", 1: "host2"})


def judge(facts: ClusterFacts, floor: float | None = None, *, cfg: Config | None = None,
          parsed: bool = True) -> list[Finding]:
    """The check as the aggregation runs it: the pairs' client tables parsed beforehand (``pingpong_tables``)."""
    if cfg is None:
        cfg = config(evidence={"pingpong_min_mb_per_s": floor} if floor is not None else None,
                     pingpong_provider="tcp")
    tables = client_tables(facts) if parsed else {}
    return list(get_check("fabric.pingpong").fn(CheckContext(host="cluster", facts={"cluster": facts,
                                                                                      "pingpong_tables": tables},
                                                             config=cfg)))


def in_namespace(ns: str, role: str, peer: str, port: int, timeout_s: float = 30.0) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", CLIENT_SCRIPT, role, peer, str(port),
                             str(timeout_s)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    record = json.loads(out)
    assert isinstance(record, dict)
    return record


def mb_per_s_at_largest(record: dict[str, Any]) -> float:
    from gpu_preflight.parsers.libfabric import parse_pingpong

    rows = parse_pingpong(record["raw_output"]).rows
    value = max(rows, key=lambda r: r.size_bytes).mb_per_s
    assert value is not None
    return float(value)


@pytest.mark.parametrize(("nodes", "plans"), [
    (1, [[]]),
    (2, [[PairRole("server", 1, 0, 100)], [PairRole("client", 0, 0, 100)]]),
    (3, [[PairRole("server", 1, 0, 100), PairRole("server", 2, 1, 101)], [PairRole("client", 0, 0, 100)],
         [PairRole("client", 0, 1, 101)]]),
    (4, [[PairRole("server", 1, 0, 100)], [PairRole("client", 0, 0, 100)], [PairRole("server", 3, 1, 101)],
         [PairRole("client", 2, 1, 101)]]),
])
def test_node_2k_serves_node_2k_plus_1_and_an_odd_last_node_pairs_with_node_0(nodes: int,
                                                                              plans: list[list[PairRole]]) -> None:
    assert [pingpong_plan(n, nodes, 100) for n in range(nodes)] == plans


def test_two_namespaces_exchange_over_tcp(two_hosts: list[str]) -> None:
    client = in_namespace(two_hosts[1], "client", "10.250.0.1", 47611)  # first: it must wait for the server
    time.sleep(0.5)
    server = in_namespace(two_hosts[0], "server", "", 47611)
    srv, cli = result(server), result(client)
    assert srv["success"] and cli["success"], (srv, cli)
    assert cli["attempts"] > 1  # the client retried the refused connection until the server listened
    assert cli["local_address"] == "10.250.0.2"
    assert cli["argv"][1:] == ["-p", "tcp", "-e", "msg", "-I", "20", "-P", "47611", "10.250.0.1"]
    assert srv["argv"][1:] == ["-p", "tcp", "-e", "msg", "-I", "20", "-B", "47611"]
    assert mb_per_s_at_largest(cli) > 50  # a veth pair moves far more than 50 MB/s
    findings = judge(cluster((0, dict(srv, pair=0, peer_node=1)), (1, dict(cli, pair=0, peer_node=0))))
    assert [(f.status, f.subject, f.code) for f in findings] == [(Status.PASS, "host1<->host2", "ok")]
    floor = mb_per_s_at_largest(cli) * 10
    slow = judge(cluster((0, dict(srv, pair=0, peer_node=1)), (1, dict(cli, pair=0, peer_node=0))), floor)
    assert [(f.status, f.code) for f in slow] == [(Status.FAIL, "bandwidth_low")]


def test_a_capped_link_reads_slow(two_hosts: list[str]) -> None:
    netns.cap(PREFIX, 2, "100mbit")
    server = in_namespace(two_hosts[0], "server", "", 47612)
    client = in_namespace(two_hosts[1], "client", "10.250.0.1", 47612)
    srv, cli = result(server), result(client)
    assert srv["success"] and cli["success"]
    assert mb_per_s_at_largest(cli) < 25  # 100 Mbit/s is 12.5 MB/s
    findings = judge(cluster((0, dict(srv, pair=0, peer_node=1)), (1, dict(cli, pair=0, peer_node=0))), 50.0)
    assert [(f.status, f.subject, f.code) for f in findings] == [(Status.FAIL, "host1<->host2", "bandwidth_low")]


def test_no_server_is_a_failed_exchange(two_hosts: list[str]) -> None:
    cli = result(in_namespace(two_hosts[1], "client", "10.250.0.1", 47613, timeout_s=2.0))
    assert not cli["success"] and cli["rc"] == 111 and not cli["timed_out"] and cli["attempts"] > 1
    srv = {"test_role": "server", "provider": "tcp", "success": False, "timed_out": True, "rc": None,
           "error": "fi_pingpong did not finish", "raw_output": "", "pair": 0, "peer_node": 1}
    findings = judge(cluster((0, srv), (1, dict(cli, pair=0, peer_node=0))))
    assert [(f.status, f.code) for f in findings] == [(Status.FAIL, "pingpong_failed")]
    assert "Connection refused" in findings[0].summary


def test_loopback_pair_in_process(fi_pingpong: str) -> None:
    box: dict[str, dict[str, Any]] = {}
    server = threading.Thread(target=lambda: box.update(server=run_pingpong_pair(
        "server", None, "tcp", port=47614, endpoint="msg", iterations=5, size=65536, timeout_s=20)))
    server.start()
    box["client"] = run_pingpong_pair("client", "127.0.0.1", "tcp", port=47614, endpoint="msg", iterations=5,
                                      size=65536, timeout_s=20)
    server.join(30)
    assert box["server"]["success"] and box["client"]["success"]
    assert "65536" not in box["client"]["raw_output"] and "64k" in box["client"]["raw_output"]


def test_hung_client_is_an_error(fi_pingpong: str) -> None:
    srv = run_pingpong_pair("server", None, "tcp", port=47615, endpoint="msg", timeout_s=1.0)
    assert srv["timed_out"] and not srv["success"] and "did not finish within" in srv["error"]
    cli = dict(srv, test_role="client")
    findings = judge(cluster((0, dict(srv, pair=0, peer_node=1)), (1, dict(cli, pair=0, peer_node=0))))
    assert [(f.status, f.code) for f in findings] == [(Status.ERROR, "tool_timeout")]
    assert "client on host2" in findings[0].summary


def test_missing_tool_is_a_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    cli = run_pingpong_pair("client", "10.0.0.1", "efa", port=47616, timeout_s=1.0)
    assert cli["missing"] and not cli["success"] and cli["error"] == "fi_pingpong not found (looked in PATH)"
    findings = judge(cluster((1, dict(cli, pair=0, peer_node=0))))
    assert [(f.status, f.code) for f in findings] == [(Status.SKIP, "not_installed")]


def test_provider_absent_where_not_expected_is_a_skip_and_a_fail_where_expected(fi_pingpong: str) -> None:
    box: dict[str, dict[str, Any]] = {}
    server = threading.Thread(target=lambda: box.update(server=run_pingpong_pair(
        "server", None, "efa", port=47617, timeout_s=10.0)))
    server.start()
    cli = run_pingpong_pair("client", "127.0.0.1", "efa", port=47617, timeout_s=10.0)
    server.join(20)
    srv = box["server"]
    assert srv["provider_missing"] and srv["rc"] == 61 and not srv["success"] and not cli["success"]
    facts = cluster((0, dict(srv, pair=0, peer_node=1)), (1, dict(cli, pair=0, peer_node=0)))
    skipped = judge(facts, cfg=config())
    assert [(f.status, f.code) for f in skipped] == [(Status.SKIP, "no_provider")]
    failed = judge(facts, cfg=config(efa_expected=True))
    assert [(f.status, f.code) for f in failed] == [(Status.FAIL, "pingpong_failed")]


def test_missing_side_is_an_error_and_no_results_a_skip() -> None:
    cli = {"test_role": "client", "provider": "tcp", "success": True, "raw_output": "", "pair": 0, "peer_node": 0}
    findings = judge(cluster((1, cli)))
    assert [(f.status, f.code) for f in findings] == [(Status.ERROR, "side_missing")]
    empty = ClusterFacts(2, 2, 1, {0: {"node_rank": 0}, 1: {"node_rank": 1}}, {}, {0: "a", 1: "b"})
    assert [(f.status, f.code) for f in judge(empty)] == [(Status.SKIP, "not_run")]


def test_a_table_nobody_parsed_is_an_error_never_a_pass() -> None:
    """The check judges the table the aggregation parsed for it; without one it cannot judge the pair."""
    table = "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n" \
            "64      10      =10      1.2k        0.00s      5.45      11.75       0.09\n"
    srv = {"test_role": "server", "provider": "tcp", "success": True, "raw_output": table, "pair": 0, "peer_node": 1}
    cli = dict(srv, test_role="client", peer_node=0)
    facts = cluster((0, srv), (1, cli))
    assert [(f.status, f.code) for f in judge(facts)] == [(Status.PASS, "ok")]
    assert [(f.status, f.code) for f in judge(facts, parsed=False)] == [(Status.ERROR, "not_parsed")]
    unreadable = cluster((0, srv), (1, dict(cli, raw_output="bytes #sent MB/sec\n64 10\n")))
    assert [(f.check_id, f.status, f.code) for f in judge(unreadable)] == [("fabric.pingpong", Status.ERROR,
                                                                           "parse_error")]


def test_runner_stage_exchanges_addresses_through_the_job_store(fi_pingpong: str) -> None:
    """Two node leaders with a real c10d TCPStore, as the distributed runner has: announce, pair, exchange."""
    from datetime import timedelta

    import torch.distributed as dist

    from gpu_preflight.config.diagnostics import DiagnosticsConfig
    from gpu_preflight.distributed.pingpong import exchange_pingpong

    host = dist.TCPStore(  # type: ignore[attr-defined]
        "127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=30))
    cfg = DiagnosticsConfig(pingpong_provider="tcp", pingpong_endpoint="msg", pingpong_base_port=47640,
                            pingpong_iterations=5, pingpong_timeout_s=20)
    box: dict[int, list[dict[str, Any]]] = {}

    def leader(node: int) -> None:
        store = dist.TCPStore(  # type: ignore[attr-defined]
            "127.0.0.1", host.port, is_master=False, timeout=timedelta(seconds=30))
        box[node] = exchange_pingpong(store, node, 2, "127.0.0.1", cfg, wait_s=10)

    threads = [threading.Thread(target=leader, args=(n,)) for n in (1, 0)]  # the client first
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [r["test_role"] for r in box[0]] == ["server"] and [r["test_role"] for r in box[1]] == ["client"]
    assert box[0][0]["success"] and box[1][0]["success"] and box[1][0]["argv"][-1] == "127.0.0.1"
    facts = ClusterFacts(2, 2, 1, {n: {"node_rank": n, "pingpong": box[n]} for n in (0, 1)}, {},
                         {0: "host1", 1: "host2"})
    assert [(f.status, f.code) for f in judge(facts)] == [(Status.PASS, "ok")]


def test_runner_stage_reports_a_server_node_that_never_announced(fi_pingpong: str) -> None:
    from datetime import timedelta

    import torch.distributed as dist

    from gpu_preflight.config.diagnostics import DiagnosticsConfig
    from gpu_preflight.distributed.pingpong import exchange_pingpong

    store = dist.TCPStore(  # type: ignore[attr-defined]
        "127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=30))
    records = exchange_pingpong(store, 1, 2, "127.0.0.1", DiagnosticsConfig(pingpong_provider="tcp"), wait_s=0.5)
    assert len(records) == 1 and not records[0]["success"] and "published no address" in records[0]["error"]
    facts = ClusterFacts(2, 2, 1, {1: {"node_rank": 1, "pingpong": records}}, {}, {0: "host1", 1: "host2"})
    assert [(f.status, f.code) for f in judge(facts)] == [(Status.ERROR, "side_missing")]


# --- operator actions (issue 27): a pair's exchange is no node's to drain: monitor ---------------------

TABLE = "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n" \
        "64      10      =10      1.2k        0.00s      5.45      11.75       0.09\n"


def _pair(client: dict[str, Any]) -> ClusterFacts:
    srv = {"test_role": "server", "provider": "tcp", "success": True, "raw_output": TABLE, "pair": 0, "peer_node": 1}
    return cluster((0, srv), (1, {**srv, "test_role": "client", "peer_node": 0, **client}))


@pytest.mark.parametrize(("client", "floor", "want"), [
    ({}, 5.45, [("PASS", "ok", None)]),  # at the floor
    ({}, 5.46, [("FAIL", "bandwidth_low", "monitor")]),  # just above what the pair did
    ({"success": False, "rc": 1, "raw_output": "fi_pingpong: connect failed: Connection refused (-111)\n",
      "error": "exit 1"}, None, [("FAIL", "pingpong_failed", "monitor")]),
    ({"timed_out": True, "success": False, "raw_output": "", "error": "did not finish within 5 s"}, None,
     [("ERROR", "tool_timeout", None)]),  # not measured: no action
    ({"missing": True, "success": False, "raw_output": ""}, None, [("SKIP", "not_installed", None)]),
])
def test_pair_failures_are_monitored(client: dict[str, Any], floor: float | None,
                                     want: list[tuple[str, str, str | None]]) -> None:
    found = judge(_pair(client), floor)
    assert [(f.status.value, f.code, f.details.get("operator_action")) for f in found] == want
    assert {f.subject for f in found} == {"host1<->host2"}  # the pair: no node summary takes it


def test_a_leaders_unreadable_pingpong_records_leave_the_block_out_not_the_report() -> None:
    """A payload's ``pingpong`` is not validated on the wire: a record that does not read as a
    :class:`PingpongPair` (here a string ``pair``) leaves that node's ``efa_communication_test`` out,
    the other node keeps its own, and the report is built."""
    from gpu_preflight.report.build import build_cluster_report

    from .report_data import gathered_cluster

    gathered = gathered_cluster(nodes=2, per_node=2)
    srv = {"test_role": "server", "provider": "tcp", "success": True, "raw_output": TABLE, "pair": 0, "peer_node": 1}
    gathered["payloads"][0]["pingpong"] = [srv]
    gathered["payloads"][2]["pingpong"] = [{**srv, "test_role": "client", "pair": "0", "peer_node": 0}]
    report, _ = build_cluster_report(gathered, Config(), fail_on="fail", include=[], exclude=[], suite="quick",
                                     timeout_s=30.0)
    nodes = report.to_dict()["nodes"]
    assert nodes["node_0"]["network"]["efa_communication_test"]["pairs"] == [srv]
    assert "efa_communication_test" not in nodes["node_1"]["network"]
