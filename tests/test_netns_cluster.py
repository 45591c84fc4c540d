"""Three hosts in network namespaces, one torchrun agent each; one host's link is capped.

The report must name that host — and only that host — as slow.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from . import netns
from .conftest import REPO

TORCHRUN = str(Path(sys.executable).with_name("torchrun"))


@pytest.fixture
def three_hosts() -> list[str]:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.fail("multi-host tests need root and iproute2 (CI runs as root; scripts/test.sh installs iproute2)")
    with netns.hosts(3, prefix="gpc") as names:
        yield names


def launch(names: list[str], port: int, timeout_s: int) -> list[tuple[int, str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_")}
    procs = []
    for i, ns in enumerate(names, 1):
        cmd = ["ip", "netns", "exec", ns, "env", "GLOO_SOCKET_IFNAME=eth0", f"GPU_PREFLIGHT_NODE_NAME=host{i}",
               "timeout", "300", TORCHRUN, f"--nnodes={len(names)}", "--nproc_per_node=1", "--rdzv_backend=c10d",
               f"--rdzv_endpoint=10.250.0.1:{port}", "--rdzv_id=gpns", f"--rdzv_conf=is_host={str(i == 1).lower()}",
               f"--local_addr=10.250.0.{i}", "-m", "gpu_preflight", "run", "--format", "json", "--timeout-s",
               str(timeout_s), "--check", "network.*", "--check", "nccl.*", "--check", "cluster.*"]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                      cwd=REPO))
    outs = [p.communicate(timeout=320) for p in procs]
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, outs, strict=True)]


def test_capped_link_names_that_host(three_hosts: list[str]) -> None:
    netns.cap("gpc", 2, "100mbit")
    results = launch(three_hosts, 29811, 60)
    stdout = next((out for _, out, _ in results if out.strip()), "")
    assert stdout, "\n".join(err[-2000:] for _, _, err in results)
    report = json.loads(stdout)
    assert len({code for code, _, _ in results}) == 1  # one verdict for every agent
    assert report["cluster_info"]["cluster_topology"]["total_nodes"] == 3
    links = [f for f in report["findings"] if f["check_id"] == "network.node_links"]
    flagged = {f["subject"] for f in links if f["status"] in ("WARN", "FAIL")}
    assert flagged == {"host2"}, links
