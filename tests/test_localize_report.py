"""The localisation block, its findings and exclude lists, and round 0 read from a gathered run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_preflight.distributed.runner import _bundle
from gpu_preflight.localize.model import FAILED, OK, TIMEOUT, LocalizeConfig, Measurement, Outcome
from gpu_preflight.localize.report import (
    CHECK_ID,
    hostlist_of,
    localization_block,
    localization_findings,
    localization_result,
    write_exclude_file,
)
from gpu_preflight.localize.round0 import evidence_from_gathered, node_local_evidence, star_measurements
from gpu_preflight.localize.scheduler import Localizer
from gpu_preflight.localize.simulate import Scenario, simulate
from gpu_preflight.model import Status

from .test_cluster_checks import payload

NAMES = [f"gpu-{i:03d}" for i in range(16)]


def outcome(scenario: Scenario, config: LocalizeConfig | None = None) -> Outcome:
    return simulate(scenario, config or LocalizeConfig(rails=scenario.rails)).outcome


def test_block_shape_for_a_slow_node_and_a_slow_link() -> None:
    out = outcome(Scenario(16, slow={3: 0.3}, slow_links={(5, 13): 0.3}))
    block = localization_block(out, NAMES, duration_s=12.34567)
    assert set(block) == {"mode", "done", "rounds", "tests", "duration_s", "suspects", "exclude_nodes",
                          "exclude_hostlist", "kubernetes_nodes", "undecided_nodes", "healthy_nodes",
                          "healthy_hostlist", "matrix"}
    assert block["exclude_hostlist"] == "gpu-003" and block["kubernetes_nodes"] == ["gpu-003"]
    assert block["duration_s"] == 12.346 and block["done"] is True
    node = next(s for s in block["suspects"] if s["kind"] == "node")
    assert node["node"] == "gpu-003" and node["reason"] == "slow" and node["gpu"] is None and node["exclude"]
    assert node["confidence"] > 0.9
    assert {m for e in node["evidence"] for m in e["members"]} >= {"gpu-003"}
    assert all({"round", "members", "result"} <= set(e) for e in node["evidence"])
    assert any(e["result"] == "slow" and e["gbps"] < e["threshold_gbps"] for e in node["evidence"])
    links = {(s["node"], tuple(s["peers"])) for s in block["suspects"] if s["kind"] == "link"}
    assert links == {("gpu-005", ("gpu-013",)), ("gpu-013", ("gpu-005",))}
    assert not any(s["exclude"] for s in block["suspects"] if s["kind"] == "link")
    assert set(block["healthy_nodes"]) == set(NAMES) - {"gpu-003", "gpu-005", "gpu-013"}
    assert block["healthy_hostlist"] == "gpu-[000-002,004,006-012,014-015]"
    cells = {(a, b): (g, r) for a, b, g, r in block["matrix"]["cells"]}
    assert cells[(5, 13)][1] == "slow" and cells[(0, 8)] == (48.0, "ok")
    assert block["matrix"]["nodes"] == NAMES and block["matrix"]["truncated"] is False
    json.dumps(block)  # the block is plain JSON


def test_rail_suspect_names_gpu_and_nic() -> None:
    out = outcome(Scenario(16, rails=4, slow_rails={(6, 2): 0.3}))
    block = localization_block(out, NAMES, nics={2: "mlx5_2"})
    (s,) = block["suspects"]
    assert (s["node"], s["gpu"], s["rail"]) == ("gpu-006", 2, "mlx5_2")
    assert all(e["gpu"] == 2 for e in s["evidence"])
    (f,) = localization_findings(out, NAMES)
    assert f.subject == "gpu-006/gpu2" and f.status is Status.FAIL


def test_healthy_cluster_has_empty_exclude_and_a_pass_finding(tmp_path: Path) -> None:
    out = outcome(Scenario(16, noise=0.05))
    block = localization_block(out, NAMES)
    assert block["exclude_hostlist"] == "" and block["exclude_nodes"] == [] and block["suspects"] == []
    assert block["healthy_hostlist"] == "gpu-[000-015]"
    (f,) = localization_findings(out, NAMES)
    assert (f.status, f.subject, f.check_id) == (Status.PASS, "cluster", CHECK_ID)
    path = write_exclude_file(tmp_path / "exclude", block["exclude_nodes"])
    assert path.read_text() == ""


def test_findings_per_suspect_kind() -> None:
    out = outcome(Scenario(16, dead={2}, slow={9: 0.3}, slow_links={(5, 12): 0.3}))  # 5 meets 12 in round 1
    found = {(f.subject, f.status, f.code) for f in localization_findings(out, NAMES)}
    assert found == {("gpu-002", Status.FAIL, "dead"), ("gpu-009", Status.FAIL, "slow"),
                     ("gpu-005<->gpu-012", Status.WARN, "link_slow")}
    dead = next(f for f in localization_findings(out, NAMES) if f.code == "dead")
    assert "NodeName=gpu-002" in (dead.recommendation or "")
    slow = next(f for f in localization_findings(out, NAMES) if f.code == "slow")
    assert slow.unit == "GB/s" and slow.observed < 20 and slow.details["confidence"] > 0.9
    result = localization_result(out, NAMES)
    assert result.status is Status.FAIL and result.to_dict()["check_id"] == CHECK_ID


def test_unresolved_nodes_are_excluded_with_an_error() -> None:
    out = outcome(Scenario(16, slow={3: 0.3}), LocalizeConfig(max_extra_rounds=0))  # budget spent after round 1
    findings = localization_findings(out, NAMES)
    assert {(f.subject, f.status, f.code) for f in findings} == {("gpu-003", Status.ERROR, "unresolved"),
                                                                ("gpu-011", Status.ERROR, "unresolved")}
    assert localization_block(out, NAMES)["exclude_hostlist"] == "gpu-[003,011]"


def test_two_undecided_nodes_fail_plainly_and_are_not_excluded() -> None:
    out = outcome(Scenario(2, slow={1: 0.3}), LocalizeConfig(floor_gbps=30.0))
    findings = localization_findings(out, NAMES[:2])
    assert {(f.subject, f.status, f.code) for f in findings} == {("gpu-000", Status.FAIL, "undecided"),
                                                                ("gpu-001", Status.FAIL, "undecided")}
    assert "cannot tell whether gpu-000 or gpu-001 is at fault" in findings[0].summary
    assert "nothing excluded" in findings[0].summary and "threshold 30" in findings[0].summary
    block = localization_block(out, NAMES[:2])
    assert block["exclude_nodes"] == [] and block["exclude_hostlist"] == "" and block["healthy_nodes"] == []
    assert block["undecided_nodes"] == ["gpu-000", "gpu-001"]
    assert not any(s["exclude"] for s in block["suspects"])


def test_a_tie_broken_by_node_local_evidence_says_so() -> None:
    sc = Scenario(2, slow={1: 0.3}, local={1: "node checks failed: network.interfaces"})
    out = outcome(sc, LocalizeConfig(floor_gbps=30.0))
    (finding,) = localization_findings(out, NAMES[:2])
    assert (finding.subject, finding.status, finding.code) == ("gpu-001", Status.FAIL, "local")
    assert "node-local evidence breaks the tie: node checks failed: network.interfaces" in finding.summary
    assert localization_block(out, NAMES[:2])["exclude_nodes"] == ["gpu-001"]


def test_node_local_evidence_from_a_gathered_run() -> None:
    """Failed node checks, a failed node-local collective, and a node-local all_reduce at a quarter of the best."""
    per_node = 2
    payloads = {}
    for node in range(4):
        for local in range(per_node):
            rank = node * per_node + local
            p = payload(rank, node, local, busbw=75.0 if node == 2 else 300.0, group=f"node{node}",
                        ranks=[node * per_node, node * per_node + 1])
            p["collectives"][0]["scope"] = "intra_node"
            if node == 3:
                p["collectives"][0].update(error="RuntimeError: connection reset", success=False, results=[])
            if local == 0:
                status = "FAIL" if node == 1 else "PASS"
                p["node_entry"] = {"findings": [{"check_id": "network.interfaces", "status": status},
                                                {"check_id": "gpu.thermal", "status": "ERROR"}]}
            payloads[rank] = json.dumps(p)
    bundles = [json.loads(_bundle({r: t for r, t in payloads.items() if r // per_node == n}, {})) for n in range(4)]
    gathered = {"payloads": {int(r): v for b in bundles for r, v in b["payloads"].items()},
                "collectives": [b["collectives"] for b in bundles],
                "topology": {"world_size": 8, "num_nodes": 4, "local_world_size": per_node}}
    ev = node_local_evidence(gathered)
    assert [(e.node, e.state) for e in ev] == [(1, "local"), (2, "local"), (3, "local")]
    assert ev[0].reason == "node checks failed: network.interfaces"  # ERROR is a failure to measure: not evidence
    assert ev[1].reason.startswith("node-local all_reduce 75 GB/s, under half the best node's 300")
    assert ev[2].reason == "node-local all_reduce failed: RuntimeError: connection reset"
    assert node_local_evidence({"payloads": {}, "topology": {}}) == []


def test_hostlist_and_exclude_files(tmp_path: Path) -> None:
    names = ["node0007", "node0003", "node0004", "gpu-a", "node0005"]
    assert hostlist_of(names) == "gpu-a,node[0003-0005,0007]"
    assert hostlist_of([]) == ""
    lines = write_exclude_file(tmp_path / "x.txt", names)
    assert lines.read_text().splitlines() == sorted(names)
    one = write_exclude_file(tmp_path / "x.hostlist", names, "hostlist")
    assert one.read_text() == "gpu-a,node[0003-0005,0007]\n"
    assert not list(tmp_path.glob("*.tmp"))
    with pytest.raises(ValueError):
        write_exclude_file(tmp_path / "y", names, "csv")


def test_matrix_is_truncated_to_failing_cells_at_scale() -> None:
    out = outcome(Scenario(16, slow={3: 0.3}), LocalizeConfig(mode="full"))
    full = localization_block(out, NAMES)["matrix"]
    assert len(full["cells"]) == 120 and not full["truncated"]
    cut = localization_block(out, NAMES, matrix_limit=50)["matrix"]
    assert cut["truncated"] and {c[3] for c in cut["cells"]} == {"slow"} and len(cut["cells"]) == 15
    with pytest.raises(ValueError):
        localization_block(out, NAMES[:3])


def test_round_zero_from_a_gathered_run() -> None:
    links = [{"pair": [0, 2], "gbps": 10.0, "wrong": 0, "bytes": 1, "iters": 1},
             {"pair": [0, 4], "gbps": 2.0, "wrong": 0, "bytes": 1, "iters": 1},
             {"pair": [0, 6], "error": "CollectiveTimeout: exchange 0<->6 did not complete within 60 s",
              "bytes": 1, "iters": 1},
             {"pair": [0, 8], "gbps": 9.0, "wrong": 3, "bytes": 1, "iters": 1},
             {"pair": [0, 10], "error": "RuntimeError: Connection reset by peer", "bytes": 1, "iters": 1}]
    gathered = {"payloads": {0: payload(0, 0, 0, links=links)},
                "missing": {6: "rank 6 on h3 stopped answering", 7: "rank 7 on h3 stopped answering",
                            9: "rank 9 on h4 did not report"},
                "topology": {"world_size": 12, "num_nodes": 6, "local_world_size": 2}}
    ms = star_measurements(gathered)
    assert [(m.members, m.status, m.gbps, m.kind) for m in ms] == [
        ((0, 1), OK, 10.0, "star"), ((0, 2), OK, 2.0, "star"), ((0, 3), TIMEOUT, None, "star"),
        ((0, 4), "wrong", None, "star"), ((0, 5), FAILED, None, "star")]
    ev = evidence_from_gathered(gathered)
    assert [(e.node, e.state, e.rail) for e in ev] == [(3, "dead", None), (4, "suspect", 1)]
    loc = Localizer(6, LocalizeConfig(rails=2))
    for e in ev:
        loc.add_evidence(e)
    loc.record(ms)
    plan = loc.next_round()
    assert plan is not None and all(3 not in t.members for t in plan.tests)


def test_measurement_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        Measurement("t", (1, 1))
    with pytest.raises(ValueError):
        Measurement("t", (0, 1), "slowish")
