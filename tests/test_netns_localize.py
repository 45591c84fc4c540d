"""Four hosts in network namespaces, one agent each, ``--localize``: the capped host and only it is excluded."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from . import netns
from .conftest import REPO

TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
PREFIX = "gpl"


@pytest.fixture
def four_hosts() -> list[str]:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.fail("multi-host tests need root and iproute2 (CI runs as root; scripts/test.sh installs iproute2)")
    with netns.hosts(4, prefix=PREFIX) as names:
        yield names


def launch(names: list[str], port: int, tmp: Path, extra: list[str]) -> tuple[list[tuple[int, str, str]], float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_")}
    procs = []
    t0 = time.monotonic()
    for i, ns in enumerate(names, 1):
        cmd = ["ip", "netns", "exec", ns, "env", "GLOO_SOCKET_IFNAME=eth0", f"GPU_PREFLIGHT_NODE_NAME=host{i}",
               "timeout", "400", TORCHRUN, f"--nnodes={len(names)}", "--nproc_per_node=1", "--rdzv_backend=c10d",
               f"--rdzv_endpoint=10.250.0.1:{port}", f"--rdzv_id=gpl{port}",
               f"--rdzv_conf=is_host={str(i == 1).lower()}", f"--local_addr=10.250.0.{i}", "-m", "gpu_preflight",
               "run", "--format", "json", "--timeout-s", "20", "--check", "network.*",
               "--check", "cluster.completeness", "--localize", "quick", "--exclude-file", str(tmp / "exclude"),
               "--no-history", *extra]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                      cwd=REPO))
    outs = [p.communicate(timeout=420) for p in procs]
    return [(p.returncode, o, e) for p, (o, e) in zip(procs, outs, strict=True)], time.monotonic() - t0


def report_of(results: list[tuple[int, str, str]]) -> dict:
    stdout = next((out for _, out, _ in results if out.strip()), "")
    assert stdout, "\n".join(err[-3000:] for _, _, err in results)
    return json.loads(stdout)


def test_capped_host_is_the_only_one_excluded(four_hosts: list[str], tmp_path: Path) -> None:
    netns.cap(PREFIX, 3, "100mbit")
    results, _ = launch(four_hosts, 29851, tmp_path, [])
    loc = report_of(results)["cluster_summary"]["localization"]
    assert loc["exclude_nodes"] == ["host3"], loc["suspects"]
    assert loc["exclude_hostlist"] == "host3"
    assert sorted(loc["healthy_nodes"]) == ["host1", "host2", "host4"]
    assert (tmp_path / "exclude").read_text() == "host3\n"


def test_healthy_cluster_excludes_nobody(four_hosts: list[str], tmp_path: Path) -> None:
    results, _ = launch(four_hosts, 29852, tmp_path, [])
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
    with netns.hosts(4, prefix="gpk") as names:
        procs = []
        t0 = time.monotonic()
        for i, ns in enumerate(names, 1):
            cmd = ["ip", "netns", "exec", ns, "env", "GLOO_SOCKET_IFNAME=eth0", f"GPU_PREFLIGHT_NODE_NAME=host{i}",
                   "timeout", "300", TORCHRUN, "--nnodes=4", "--nproc_per_node=1", "--rdzv_backend=c10d",
                   "--rdzv_endpoint=10.250.0.1:29854", "--rdzv_id=gpkcut",
                   f"--rdzv_conf=is_host={str(i == 1).lower()}", f"--local_addr=10.250.0.{i}", "-m", "gpu_preflight",
                   "run", "--format", "json", "--timeout-s", "20", "--check", "network.*", "--check",
                   "cluster.completeness", "--localize", "quick", "--no-history", "--report-dir", str(tmp_path / "rd")]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                          cwd=REPO, start_new_session=True))
        time.sleep(12)  # inside the workloads: torch is up and the ranks are measuring
        netns.sh("ip", "-n", "gpkn4", "link", "set", "eth0", "down")
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
    assert "host4" in loc["exclude_nodes"] and "host1" not in loc["exclude_nodes"], loc["suspects"]
    missing = [f for f in report["findings"] if f["check_id"] == "cluster.completeness" and f["status"] == "FAIL"]
    assert missing and "host4" in missing[0]["subject"]
    assert elapsed < 200, elapsed
