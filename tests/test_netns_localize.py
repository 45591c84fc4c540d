"""Hosts in network namespaces, one agent each, ``--localize``: the capped host and only it is excluded.

The small-cluster rows (2, 3 and 5 hosts: all healthy, one host capped, every host capped
alike against a configured floor) run once each here, with the capped host varied
across rows; the many-seed repetitions of the same rules are in test_localize_small.py
(simulated) and bench/bench_localize_small.py (20 real 3-host runs).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import netns
from .conftest import REPO
from .fault_hooks import fault_env
from .netns_run import LIGHT, TORCHRUN, Layout, launch, layout, report_of
from .torch_extra import needs_torch

pytestmark = needs_torch

PREFIX = "gpl"
FLOOR = ["--set", "perf.node_link_min_gbps=0.05"]  # healthy veth pairs here: ~0.5-1.2 GB/s; 100 Mbit/s: 0.0125
SMALL_ROWS = [(2, ()), (2, (2,)), (2, (1,)), (2, (1, 2)),
              (3, ()), (3, (1,)), (3, (2,)), (3, (3,)), (3, (1, 2, 3)),
              (5, ()), (5, (4,)), (5, (1, 2, 3, 4, 5))]


@pytest.fixture
def four_hosts() -> Iterator[list[str]]:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.fail("multi-host tests need root and iproute2 (CI runs as root; scripts/test.sh installs iproute2)")
    with netns.hosts(4, prefix=PREFIX) as names:
        yield names


def test_capped_host_is_the_only_one_excluded(four_hosts: list[str], tmp_path: Path) -> None:
    """Names shuffled against addresses, agents started in a shuffled order, the capped host drawn
    at random: the report names and excludes that host by its Slurm name, and only it."""
    where = layout(4)
    capped = random.Random(where.seed).randint(1, 4)
    netns.cap(PREFIX, capped, "100mbit")
    results, _ = launch(four_hosts, 29851, tmp_path, LIGHT, where=where)
    report = report_of(results)
    loc = report["cluster_summary"]["localization"]
    bad = where.name(capped)
    assert loc["exclude_nodes"] == [bad], (where, loc["suspects"])
    assert loc["exclude_hostlist"] == bad
    assert sorted(loc["healthy_nodes"]) == sorted(set(where.names) - {bad})
    assert (tmp_path / "exclude").read_text() == f"{bad}\n"
    assert_named_by_themselves(report, where)


def test_healthy_cluster_excludes_nobody(four_hosts: list[str], tmp_path: Path) -> None:
    results, _ = launch(four_hosts, 29852, tmp_path, LIGHT)
    loc = report_of(results)["cluster_summary"]["localization"]
    assert loc["exclude_nodes"] == [] and len(loc["healthy_nodes"]) == 4, loc["suspects"]
    assert (tmp_path / "exclude").read_text() == ""


def test_link_cut_mid_run_is_named_and_the_run_ends(tmp_path: Path) -> None:
    """Host 4 loses its link during the workloads: it is named and excluded, and rank 0's report
    arrives within the time limits (the store-hosting torchrun agent itself may linger: killed)."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.fail("multi-host tests need root and iproute2")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_")}
    report_path = tmp_path / "rd" / "report.json"
    where = layout(4)
    with netns.hosts(4, prefix="gpk") as names:
        procs = []
        t0 = time.monotonic()
        for i, ns in enumerate(names, 1):
            named = f"GPU_PREFLIGHT_NODE_NAME={where.name(i)}"
            cmd = ["ip", "netns", "exec", ns, "env", "GLOO_SOCKET_IFNAME=eth0", named,
                   "timeout", "300", TORCHRUN, "--nnodes=4", "--nproc_per_node=1", "--rdzv_backend=c10d",
                   "--rdzv_endpoint=10.250.0.1:29854", "--rdzv_id=gpkcut",
                   f"--rdzv_conf=is_host={str(i == 1).lower()}", f"--local_addr=10.250.0.{i}", "-m", "gpu_preflight",
                   "run", "--format", "json", "--timeout-s", "20", "--check", "network.*", "--check",
                   "cluster.completeness", "--localize", "quick", "--no-history", "--report-dir", str(tmp_path / "rd")]
            # host 4 stops itself as it enters its first all_reduce: the cut then falls inside the
            # collectives whatever the machine's load (a fixed delay could fall before it registered)
            fault = fault_env(fault="stop:*:all_reduce@all") if i == 4 else {}
            procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          env={**env, **fault}, cwd=REPO, start_new_session=True))
        stopped: list[int] = []
        while not stopped and time.monotonic() - t0 < 150 and procs[3].poll() is None:
            stopped = netns.stopped_below(procs[3].pid)
            time.sleep(0.2)
        assert stopped, "host 4 never reached its first all_reduce"
        netns.sh("ip", "-n", "gpkn4", "link", "set", "eth0", "down")
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
        while not report_path.exists() and time.monotonic() - t0 < 240:
            time.sleep(0.5)
        elapsed = time.monotonic() - t0
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        # torchrun starts its workers in sessions of their own: the cut-off host's worker survives killpg
        subprocess.run(["pkill", "-KILL", "-f", str(tmp_path / "rd")], check=False)
    assert report_path.exists(), "rank 0 wrote no report within 240 s"
    report = json.loads(report_path.read_text())
    loc = report["cluster_summary"]["localization"]
    cut, first = where.name(4), where.name(1)
    assert cut in loc["exclude_nodes"] and first not in loc["exclude_nodes"], (where, loc["suspects"])
    missing = [f for f in report["findings"] if f["check_id"] == "cluster.completeness" and f["status"] == "FAIL"]
    assert missing and cut in missing[0]["subject"], (where, missing)
    assert elapsed < 200, elapsed


@pytest.mark.parametrize(("count", "capped"), SMALL_ROWS)
def test_small_cluster_excludes_exactly_the_capped_host(count: int, capped: tuple[int, ...], tmp_path: Path) -> None:
    """Never a healthy host excluded. Two hosts: the capped one, or an explicit 'undecided' for both.
    Every host capped: FAIL against the floor, nobody excluded."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.fail("multi-host tests need root and iproute2 (CI runs as root; scripts/test.sh installs iproute2)")
    hosts = [f"host{i}" for i in range(1, count + 1)]
    where = layout(count)
    with netns.hosts(count, prefix="gps") as names:
        for h in capped:
            netns.cap("gps", h, "100mbit")
        results, _ = launch(names, 29860 + count, tmp_path, [*LIGHT, *FLOOR], where=where)
    report = report_of(results)
    assert_named_by_themselves(report, where)
    loc = report["cluster_summary"]["localization"]
    bad = sorted(where.name(h) for h in capped)
    mine = [f for f in report["findings"] if f["check_id"] == "localize.suspect"]
    why = json.dumps(loc["suspects"], indent=1)
    assert loc["done"], why
    assert not set(loc["exclude_nodes"]) - set(bad), why  # never a healthy host
    if not capped:
        assert (loc["exclude_nodes"], loc["undecided_nodes"]) == ([], []), why
        assert sorted(loc["healthy_nodes"]) == hosts and [f["status"] for f in mine] == ["PASS"]
    elif len(capped) == 1 and count > 2:
        assert (loc["exclude_nodes"], loc["undecided_nodes"]) == (bad, []), why
        assert sorted(loc["healthy_nodes"]) == sorted(set(hosts) - set(bad))
        assert [(f["subject"], f["status"]) for f in mine] == [(bad[0], "FAIL")]
    elif len(capped) == 1:  # two hosts: the capped one (a node-local tie-break), or plainly undecided
        assert loc["exclude_nodes"] == bad or (loc["exclude_nodes"], sorted(loc["undecided_nodes"])) == ([], hosts), why
    else:  # every link capped alike: below the floor everywhere, nobody to exclude, and the run FAILs
        assert (loc["exclude_nodes"], sorted(loc["undecided_nodes"]), loc["healthy_nodes"]) == ([], hosts, []), why
    if capped:
        assert all(f["status"] == "FAIL" for f in mine) and report["cluster_summary"]["exit_code"] == 2, why
    assert (tmp_path / "exclude").read_text() == "".join(f"{h}\n" for h in loc["exclude_nodes"])


def assert_named_by_themselves(report: dict[str, Any], where: Layout) -> None:
    """Every node section carries the name its own host gave it (``SLURMD_NODENAME``), with the
    address that host has; no node section or finding carries a name that is not a host's."""
    by_address = {f"10.250.0.{i}": where.name(i) for i in range(1, len(where.names) + 1)}
    for key, section in report["nodes"].items():
        info = section["node_info"]
        identity = info["identity"]
        assert identity["source"] == "SLURMD_NODENAME", (key, identity)
        assert info["current_host"] == identity["name"] == by_address[identity["address"]], (where, key, info)
    subjects = {f["subject"].split("/", 1)[0] for f in report["findings"] if f["subject"] != "cluster"}
    assert not {s for part in subjects for s in part.split("<->")
                if not s.startswith("group ")} - set(where.names), (where, subjects)

