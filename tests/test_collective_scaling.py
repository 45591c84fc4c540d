"""Issue 29 item 6: collective sizes and iterations follow the size of the job (the table in
docs/distributed.md), and the report says which were chosen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from msgspec.structs import replace

from gpu_preflight.backends.launcher.topology import Launcher, Topology
from gpu_preflight.cluster.aggregate import build_cluster_report
from gpu_preflight.config import Config
from gpu_preflight.distributed.plan import make_plan, report_parameters
from gpu_preflight.workloads.scaling import GPU_TIERS, collective_sweep, tier_of

from .conftest import REPO

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


@pytest.mark.parametrize(("world", "nodes", "tier"), [
    (1, 1, "pair"), (2, 1, "pair"), (3, 1, "node"), (8, 1, "node"), (9, 1, "cluster"), (16, 1, "cluster"),
    (2, 2, "cluster"),  # two nodes of one GPU: the network's latency, never a one-node tier
    (16, 2, "cluster"), (64, 8, "cluster"), (65, 9, "large"), (512, 64, "large"), (513, 65, "huge"),
    (80_000, 10_000, "huge"),
])
def test_tier_follows_ranks_and_nodes(world: int, nodes: int, tier: str) -> None:
    assert tier_of(world, nodes).name == tier


@pytest.mark.parametrize(("world", "nodes", "quick", "iters"), [
    (2, 1, [256 * KiB, 2 * MiB, 16 * MiB, 64 * MiB], 5),  # a pair finishes fast
    (8, 1, [1 * MiB, 8 * MiB, 64 * MiB, 256 * MiB], 10),  # one node: the configured values, as before
    (16, 2, [2 * MiB, 16 * MiB, 128 * MiB, 512 * MiB], 10),
    (256, 32, [4 * MiB, 32 * MiB, 256 * MiB, 1 * GiB], 10),
    (4096, 512, [8 * MiB, 64 * MiB, 512 * MiB, 2 * GiB], 10),  # the bandwidth regime of a large ring
])
def test_gpu_quick_sweep_by_job_size(world: int, nodes: int, quick: list[int], iters: int) -> None:
    sweep = collective_sweep(Config().workload, "quick", True, world, nodes)
    assert (sweep.sizes, sweep.iters) == (quick, iters)


@pytest.mark.parametrize(("world", "nodes", "top"), [(2, 1, 2 * GiB), (8, 1, 8 * GiB), (4096, 512, 8 * GiB)])
def test_gpu_full_sweep_doubles_from_8_bytes_and_never_exceeds_the_configured_largest(world: int, nodes: int,
                                                                                      top: int) -> None:
    sweep = collective_sweep(Config().workload, "full", True, world, nodes)
    assert sweep.sizes[0] == 8 and sweep.sizes[-1] == top
    assert all(b == 2 * a for a, b in zip(sweep.sizes, sweep.sizes[1:], strict=False))


def test_every_tier_scales_the_configured_values_and_is_capped_by_the_full_largest() -> None:
    w = replace(Config().workload, collective_max_bytes_quick_gpu=64 * MiB, collective_max_bytes_full_gpu=256 * MiB,
                collective_iters=20)
    tops = [collective_sweep(w, "quick", True, t.max_ranks or 100_000, 1 if t.one_node else 2).sizes[-1]
            for t in GPU_TIERS]
    assert tops == [16 * MiB, 64 * MiB, 128 * MiB, 256 * MiB, 256 * MiB]  # x0.25, x1, x2, x4, x8 capped at 256 MiB
    assert collective_sweep(w, "quick", True, 2, 1).iters == 10


@pytest.mark.parametrize("world", [2, 8, 64, 4096])
def test_cpu_workers_and_exact_settings_are_not_scaled(world: int) -> None:
    cfg = Config().workload
    cpu = collective_sweep(cfg, "quick", False, world, max(1, world // 8))
    assert (cpu.tier, cpu.sizes, cpu.iters) == ("cpu", [1 * KiB, 32 * KiB, 1 * MiB, 4 * MiB], 3)
    exact = collective_sweep(replace(cfg, collective_scaling=False), "quick", True, world, max(1, world // 8))
    assert (exact.tier, exact.sizes, exact.iters) == ("configured", [1 * MiB, 8 * MiB, 64 * MiB, 256 * MiB], 10)


def _topo(world: int, nodes: int) -> Topology:
    return Topology(launcher=Launcher.TORCHRUN, world_size=world, rank=0, local_rank=0, local_world_size=world // nodes,
                    node_rank=0, num_nodes=nodes, hostname="h0")


def test_the_plan_of_a_rank_takes_the_table_and_reports_it() -> None:
    plan = make_plan(Config(), "quick", True, _topo(256, 32))
    assert (plan.tier, plan.sizes[-1], plan.iters) == ("large", 1 * GiB, 10)
    assert make_plan(Config(), "quick", True).tier == "configured"  # a job of unknown shape
    assert plan.pair_bytes() == 256 * MiB  # node links and localisation: a pair of nodes, whatever the job's size
    assert make_plan(Config(), "quick", False, _topo(2, 1)).pair_bytes() == 4 * MiB
    params = report_parameters(plan, _topo(256, 32), "quick")
    assert params == {"suite": "quick", "device": "gpu", "world_size": 256, "num_nodes": 32, "tier": "large",
                      "collective_sizes_bytes": [4 * MiB, 32 * MiB, 256 * MiB, 1 * GiB], "collective_iters": 10,
                      "collective_warmup": 1}


def test_the_report_carries_the_parameters_a_node_leader_sent() -> None:
    params = report_parameters(make_plan(Config(), "quick", True, _topo(2, 1)), _topo(2, 1), "quick")
    gathered = {"payloads": {0: {"rank": 0, "local_rank": 0, "node_rank": 0, "test_parameters": params},
                             1: {"rank": 1, "local_rank": 1, "node_rank": 0}},
                "missing": {}, "topology": {"world_size": 2, "num_nodes": 1, "local_world_size": 2, "hosts": ["h0"]}}
    report, _ = build_cluster_report(gathered, Config(), fail_on="fail", include=[], exclude=[], suite="quick",
                                     timeout_s=30)
    assert report.to_dict()["cluster_info"]["test_parameters"] == params


def test_a_real_run_reports_the_sizes_it_measured(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the self-launched run with workers needs the torch extra")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPU_PREFLIGHT_", "RANK", "LOCAL_RANK",
                                                                    "WORLD_SIZE", "MASTER_", "SM_", "TORCHELASTIC_"))}
    proc = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--no-history", "--quiet", "--format", "json",
                           "--skip", "system.*", "--skip", "diagnostics", "--timeout-s", "60",
                           "--report-dir", str(tmp_path)],
                          capture_output=True, text=True, env={**env, "OMP_NUM_THREADS": "1"}, cwd=REPO, timeout=300)
    report = json.loads((tmp_path / "report.json").read_text())
    params = report["cluster_info"]["test_parameters"]
    chosen = collective_sweep(Config().workload, "quick", False, 2, 1)
    assert params == {"suite": "quick", "device": "cpu", "world_size": 2, "num_nodes": 1, "tier": "cpu",
                      "collective_sizes_bytes": chosen.sizes, "collective_iters": chosen.iters,
                      "collective_warmup": 1}, proc.stderr[-2000:]
    measured = report["nodes"]["node_0"]["nccl"]["communication_tests"]["distributed_all_reduce"]["results"]
    assert [r["size_bytes"] for r in measured] == chosen.sizes
