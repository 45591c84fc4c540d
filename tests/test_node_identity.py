"""Each node's data carries its own identity from the rank that measured it to the drain.

The gathered runs here put the node ranks in an order the job's host list does not follow
(as c10d does: it numbers agents by address and process id), seeded and printed; the bad node
is drawn at random. Every name in the report must be the one that node gave itself.
"""

from __future__ import annotations

import copy
import random
import sys
from typing import Any

import pytest

from gpu_preflight.backends.launcher.identity import PRECEDENCE, choose_name, local_address, measure
from gpu_preflight.backends.launcher.topology import detect
from gpu_preflight.cluster.aggregate import cluster_facts, node_names
from gpu_preflight.config import Config
from gpu_preflight.config.schema import PerfConfig
from gpu_preflight.localize.report import localization_block
from gpu_preflight.localize.simulate import Scenario, simulate
from gpu_preflight.report.build import build_cluster_report

from .report_data import gathered_cluster

SEEDS = [3, 17, 2026]


def _seeded(seed: int, what: str) -> random.Random:
    print(f"{what}: seed {seed}", file=sys.stderr)
    return random.Random(seed)


def renamed(gathered: dict[str, Any], names: list[str], hosts: list[str], per_node: int) -> dict[str, Any]:
    """``gathered`` with node rank ``n`` calling itself ``names[n]`` (every rank, and its leader's
    identity) while the launcher lists ``hosts`` in the job's own order."""
    g = copy.deepcopy(gathered)
    for rank, p in g["payloads"].items():
        name = names[rank // per_node]
        p["hostname"], p["node_name"] = "ip-10-0-0-1", name  # one OS host name for all: it names nothing
        if rank % per_node == 0:
            p["identity"] = {"name": name, "source": "SM_CURRENT_HOST", "hostname": "ip-10-0-0-1",
                             "node_rank": rank // per_node}
    g["topology"]["hosts"] = hosts
    return g


def _report(g: dict[str, Any]) -> dict[str, Any]:
    config = Config(perf=PerfConfig(gemm_bf16_tflops=670.0))
    report, _ = build_cluster_report(g, config, fail_on="fail", include=[], exclude=[], suite="quick", timeout_s=30.0)
    return report.to_dict()


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("bad", ["algo-10", "algo-2"])
def test_sagemaker_twelve_hosts_bad_node_named_right(seed: int, bad: str) -> None:
    """12 hosts ``algo-1 ... algo-12`` (numeric order in SM_HOSTS; ``algo-10`` sorts before
    ``algo-2`` as text), node ranks shuffled against them: the slow GEMM and the slow intra-node
    fabric of ``bad`` are filed under ``bad``, and no other node is blamed."""
    rng = _seeded(seed, f"sagemaker 12 hosts, bad {bad}")
    hosts = [f"algo-{i}" for i in range(1, 13)]
    order = hosts[:]
    rng.shuffle(order)  # node rank n is order[n]
    per_node = 2
    where = order.index(bad)
    gemm = [700.0] * 24
    gemm[where * per_node] = 300.0
    fabric = [450.0] * 12
    fabric[where] = 150.0
    report = _report(renamed(gathered_cluster(12, per_node, gemm=gemm, node_fabric=fabric), order, hosts, per_node))
    assert {s["node_info"]["current_host"] for s in report["nodes"].values()} == set(hosts)
    flagged = [f for f in report["findings"] if f["status"] in ("WARN", "FAIL") and f["node"] == "cluster"
               and f["check_id"] in ("compute.gemm", "nccl.intra_node_bandwidth")]
    assert flagged, report["findings"]
    for f in flagged:
        assert f["subject"].split("/", 1)[0] == bad, (order, f)


@pytest.mark.parametrize("seed", SEEDS)
def test_localisation_excludes_the_node_by_its_own_name(seed: int) -> None:
    """The simulator's verdicts (by node rank) become names through the gathered run: the
    exclude list names the node that was slow, not the host at its position in the host list."""
    rng = _seeded(seed, "localisation names")
    hosts = [f"gpu-st-p5-{i}" for i in range(1, 9)]
    order = hosts[:]
    rng.shuffle(order)
    bad = rng.randrange(8)
    outcome = simulate(Scenario(8, slow={bad: 0.2}), seed=seed).outcome
    names = node_names(renamed(gathered_cluster(8, 1), order, hosts, 1))
    block = localization_block(outcome, names, duration_s=1.0)
    assert block["exclude_nodes"] == [order[bad]], (order, bad, block["suspects"])
    assert order[bad] not in block["healthy_nodes"]


def test_missing_node_named_from_the_host_list_only_by_elimination() -> None:
    hosts = ["n1", "n2", "n3", "n4"]
    g = renamed(gathered_cluster(4, 1), ["n3", "n1", "n4", "n2"], hosts, 1)
    del g["payloads"][2]
    g["missing"] = {2: "rank 2 never arrived"}
    facts = cluster_facts(g)
    assert facts.node_names == {0: "n3", 1: "n1", 2: "n4", 3: "n2"} and facts.missing_hosts == []
    del g["payloads"][3]
    g["missing"][3] = "rank 3 never arrived"
    facts = cluster_facts(g)  # two silent nodes, two unclaimed hosts: which is which is not known
    assert facts.node_names[2] == "node2" and facts.node_names[3] == "node3"
    assert facts.missing_hosts == ["n2", "n4"]
    report = _report(g)
    gone = [f for f in report["findings"] if f["code"] == "hosts_missing"]
    assert gone and gone[0]["status"] == "FAIL" and gone[0]["observed"] == ["n2", "n4"]


def test_two_nodes_claiming_one_name_is_a_failure_naming_both() -> None:
    g = renamed(gathered_cluster(3, 1), ["a", "b", "a"], ["a", "b", "c"], 1)
    g["payloads"][2]["identity"]["hostname"] = "other-host"
    report = _report(g)
    clash = [f for f in report["findings"] if f["code"] == "duplicate_node_name"]
    assert [f["status"] for f in clash] == ["FAIL"]
    assert clash[0]["subject"] == "a#0<->a#2" and "other-host" in clash[0]["summary"]
    assert report["cluster_summary"]["overall_status"] == "FAIL"


def test_one_gpu_in_two_node_sections_is_a_failure() -> None:
    """Two ranks on one machine counted as two nodes: the same GPU UUIDs in both sections."""
    g = renamed(gathered_cluster(3, 1), ["a", "b", "c"], ["a", "b", "c"], 1)
    g["payloads"][2]["node_entry"] = copy.deepcopy(g["payloads"][1]["node_entry"])
    report = _report(g)
    dup = [f for f in report["findings"] if f["code"] == "duplicate_gpu"]
    assert [(f["status"], f["subject"]) for f in dup] == [("FAIL", "b<->c")]


def test_node_name_missing_from_the_job_host_list_is_reported() -> None:
    env = {"SLURMD_NODENAME": "gpu-st-p5-9", "SLURM_JOB_NODELIST": "gpu-st-p5-[1-3]"}
    ident = measure(env, hostname="ip-10-1-2-3", node_rank=0, job_hosts=["gpu-st-p5-1", "gpu-st-p5-2", "gpu-st-p5-3"])
    assert ident.name == "gpu-st-p5-9" and ident.source == "SLURMD_NODENAME"
    assert len(ident.conflicts) == 1 and "SLURM_JOB_NODELIST" in ident.conflicts[0]
    g = renamed(gathered_cluster(2, 1), ["gpu-st-p5-9", "gpu-st-p5-2"], ["gpu-st-p5-1", "gpu-st-p5-2"], 1)
    g["payloads"][0]["identity"] = ident.to_dict()
    report = _report(g)
    found = [f for f in report["findings"] if f["code"] == "name_conflict"]
    assert [(f["status"], f["subject"]) for f in found] == [("WARN", "gpu-st-p5-9")]
    assert [f["code"] for f in report["findings"] if f["check_id"] == "cluster.completeness"
            and f["status"] != "PASS"] == ["hosts_missing"]  # gpu-st-p5-1 took no part


@pytest.mark.parametrize(("env", "name", "source"), [
    ({}, "ip-10-1-2-3", "hostname"),
    ({"NODE_NAME": "k8s-node"}, "ip-10-1-2-3", "hostname"),  # outside Kubernetes NODE_NAME means nothing
    ({"NODE_NAME": "k8s-node", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}, "k8s-node", "NODE_NAME"),
    ({"SM_CURRENT_HOST": "algo-3", "NODE_NAME": "n", "KUBERNETES_SERVICE_HOST": "x"}, "algo-3", "SM_CURRENT_HOST"),
    ({"SLURMD_NODENAME": "gpu-st-p5-3", "SM_CURRENT_HOST": "algo-3"}, "gpu-st-p5-3", "SLURMD_NODENAME"),
    ({"GPU_PREFLIGHT_NODE_NAME": "mine", "SLURMD_NODENAME": "gpu-st-p5-3"}, "mine", "GPU_PREFLIGHT_NODE_NAME"),
    ({"GPU_PREFLIGHT_NODE_NAME": "  ", "SLURMD_NODENAME": "gpu-st-p5-3"}, "gpu-st-p5-3", "SLURMD_NODENAME"),
])
def test_name_precedence(env: dict[str, str], name: str, source: str) -> None:
    assert choose_name(env, "ip-10-1-2-3") == (name, source)
    assert source in PRECEDENCE


def test_sagemaker_name_from_resource_config_when_the_variable_is_unset() -> None:
    assert choose_name({}, "ip-1", sagemaker_host="algo-7") == ("algo-7", "SM_CURRENT_HOST")


def test_override_of_the_slurm_name_is_said() -> None:
    ident = measure({"GPU_PREFLIGHT_NODE_NAME": "x", "SLURMD_NODENAME": "gpu-1"}, hostname="h", node_rank=0)
    assert ident.name == "x" and any("overrides Slurm's name 'gpu-1'" in c for c in ident.conflicts)


def test_slurm_node_named_not_after_its_host_name() -> None:
    """``SLURMD_NODENAME=gpu-st-p5-3`` on ``ip-10-1-2-3``, inside torchrun: the Slurm name, which a drain needs."""
    env = {"SLURMD_NODENAME": "gpu-st-p5-3", "SLURM_JOB_NODELIST": "gpu-st-p5-[1-4]", "SLURM_NODEID": "2",
           "SLURM_PROCID": "2", "SLURM_NTASKS": "4", "TORCHELASTIC_RUN_ID": "r", "RANK": "0", "LOCAL_RANK": "0",
           "WORLD_SIZE": "4", "GROUP_RANK": "0", "LOCAL_WORLD_SIZE": "1"}
    topo = detect(env, hostname="ip-10-1-2-3")
    assert topo.launcher == "torchrun" and topo.node_rank == 0  # c10d put it first, the list has it third
    assert topo.node_name == "gpu-st-p5-3"


def test_local_address_is_the_source_address_toward_the_master() -> None:
    assert local_address("127.0.0.1", 29500) == "127.0.0.1"
    assert local_address(None, None) is None
    assert local_address("no-such-host.invalid", 1) is None


@pytest.mark.parametrize(("low", "high", "warned"), [
    (0.2, 0.9, False), (0.9, 1.1, False), (1.0, 1.3, False), (1.01, 1.3, True),
    (-1.3, -1.0, False), (-1.3, -1.01, True), (-31.0, -29.5, True), (-5.0, 5.0, False),
])
def test_clock_skew_beyond_the_setting_warns_naming_the_node(low: float, high: float, warned: bool) -> None:
    """``system.clock_skew_warn_s`` (1 s): only a range wholly beyond it is a skew worth a WARN;
    the node is named by its own name, never a position."""
    g = renamed(gathered_cluster(3, 2), ["c", "a", "b"], ["a", "b", "c"], 2)
    g["clock_skew"] = {1: [0.0, 0.1], 3: [low, high], 5: [0.05, 0.2]}
    found = [f for f in _report(g)["findings"] if f["code"] == "clock_skew"]
    assert [(f["status"], f["subject"]) for f in found] == ([("WARN", "a")] if warned else [])
