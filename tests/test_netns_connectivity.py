"""Three namespace hosts, one torchrun agent each, with two broken networks: one host's name is
missing from the other hosts' ``/etc/hosts`` (no DNS answers inside the namespaces), and the
network drops the probe port on its way to another (what a security group or an ``iptables -j
DROP`` rule does to the packets, played with iproute2's ``tc`` alone). ``cluster.connectivity`` must name each host
for its own fault, and only those two, and the report must show the matrix.

Names are shuffled against addresses and the agents start in a shuffled order
(:func:`tests.netns_run.layout`); which host loses its name and which its port is drawn
from the same seed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.report import render

from . import netns
from .conftest import REPO
from .netns_run import LIGHT, TORCHRUN, layout, slurm_env

PREFIX = "gpk"
PORT = 29660  # the probe port every leader listens on (diagnostics.connectivity_port)
RDZV_PORT = 29861


@pytest.fixture
def three_hosts() -> Iterator[list[str]]:
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
        pytest.fail("multi-host tests need root and iproute2 (CI runs as root; scripts/test.sh installs iproute2)")
    with netns.hosts(3, prefix=PREFIX) as names:
        try:
            yield names
        finally:
            for ns in names:
                netns.kill_all(ns)
                shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)


def hosts_files(names: list[str], host_names: list[str], unnamed: int) -> None:
    """``/etc/netns/<ns>/hosts`` (``ip netns exec`` mounts it over /etc/hosts): this machine's own
    lines and every host's name, except that only host ``unnamed`` itself knows its own."""
    base = Path("/etc/hosts").read_text(encoding="utf-8")
    for i, ns in enumerate(names, 1):
        lines = [f"10.250.0.{k} {host_names[k - 1]}" for k in range(1, len(names) + 1) if k == i or k != unnamed]
        Path(f"/etc/netns/{ns}").mkdir(parents=True, exist_ok=True)
        Path(f"/etc/netns/{ns}/hosts").write_text(base.rstrip("\n") + "\n" + "\n".join(lines) + "\n", encoding="utf-8")


def drop_port(host: int, port: int) -> None:
    """Drop every TCP packet to ``port`` on its way to host ``host`` (a security group or firewall in
    the network that lacks the port): on the switch's port towards the host, an htb class whose
    queue holds nothing, chosen by a u32 match; everything else passes. This kernel has no tc
    actions and the image no iptables, so the drop is a queue of length 0."""
    dev = ["dev", f"{PREFIX}b{host}"]
    tc = ["ip", "netns", "exec", f"{PREFIX}sw", "tc"]
    netns.sh(*tc, "qdisc", "add", *dev, "root", "handle", "1:", "htb", "default", "1")
    for minor in ("1", "2"):
        netns.sh(*tc, "class", "add", *dev, "parent", "1:", "classid", f"1:{minor}", "htb", "rate", "1gbit")
    netns.sh(*tc, "qdisc", "add", *dev, "parent", "1:2", "handle", "20:", "pfifo", "limit", "0")
    netns.sh(*tc, "filter", "add", *dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip",
             "protocol", "6", "0xff", "match", "ip", "dport", str(port), "0xffff", "flowid", "1:2")


def launch(names: list[str], host_names: list[str], order: list[int], tmp: Path) -> list[tuple[int, str, str]]:
    """One agent per host, as ``srun ... torchrun --rdzv_backend=c10d`` starts them (names from Slurm)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_")}
    procs: dict[int, subprocess.Popen[str]] = {}
    files = {}
    for i in order:
        cmd = ["ip", "netns", "exec", names[i - 1], "env", "GLOO_SOCKET_IFNAME=eth0",
               *slurm_env(host_names[i - 1], len(names)), "timeout", "150", TORCHRUN, f"--nnodes={len(names)}",
               "--nproc_per_node=1", "--rdzv_backend=c10d", f"--rdzv_endpoint=10.250.0.1:{RDZV_PORT}",
               "--rdzv_id=gpconn", f"--rdzv_conf=is_host={str(i == 1).lower()}", f"--local_addr=10.250.0.{i}",
               "-m", "gpu_preflight", "run", "--format", "json", "--timeout-s", "20", "--no-history",
               "--check", "cluster.connectivity", "--check", "cluster.completeness",
               "--set", f"diagnostics.connectivity_port={PORT}", "--set", "diagnostics.connectivity_timeout_s=2",
               *LIGHT]
        out, err = (tmp / f"agent{i}.out").open("w+"), (tmp / f"agent{i}.err").open("w+")
        files[i] = (out, err)
        procs[i] = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env, cwd=REPO)
    results = []
    for i in sorted(procs):
        procs[i].wait(timeout=170)
        texts = []
        for fh in files[i]:
            fh.seek(0)
            texts.append(fh.read())
            fh.close()
        results.append((procs[i].returncode, texts[0], texts[1]))
    return results


def test_unresolvable_name_and_dropped_port_name_their_hosts(three_hosts: list[str], tmp_path: Path) -> None:
    where = layout(3)
    unnamed, dropped = random.Random(where.seed).sample([1, 2, 3], 2)
    hosts_files(three_hosts, where.names, unnamed)
    drop_port(dropped, PORT)
    t0 = time.monotonic()
    results = launch(three_hosts, where.names, where.order, tmp_path)
    elapsed = time.monotonic() - t0
    stdout = next((out for _, out, _ in results if out.strip()), "")
    assert stdout, "\n".join(err[-3000:] for _, _, err in results)
    report: dict[str, Any] = json.loads(stdout)
    found = {(f["status"], f["subject"], f["code"]) for f in report["findings"]
             if f["check_id"] == "cluster.connectivity"}
    assert found == {("FAIL", where.name(unnamed), "name_unresolved"),
                     ("FAIL", where.name(dropped), "unreachable")}, (where, unnamed, dropped, report["findings"])
    assert [f["status"] for f in report["findings"] if f["check_id"] == "cluster.completeness"] == ["PASS"]
    rows = {r["node"]: r for r in report["cluster_summary"]["reachability"]["nodes"]}
    assert rows[where.name(unnamed)]["resolved_by"] == [0, 2] and rows[where.name(unnamed)]["reached_by"] == [2, 2]
    assert rows[where.name(dropped)]["reached_by"] == [0, 2] and rows[where.name(dropped)]["resolved_by"] == [2, 2]
    for k in (1, 2, 3):  # every node's own address, its probe port and the name Slurm gives it
        assert rows[where.name(k)]["address"] == f"10.250.0.{k}" and rows[where.name(k)]["port"] == PORT
        assert rows[where.name(k)]["lookup"] == where.name(k) and rows[where.name(k)]["source"] == "host list"
    fine = next(k for k in (1, 2, 3) if k not in (unnamed, dropped))
    assert rows[where.name(fine)]["forward_ms"] is not None and rows[where.name(fine)]["connect_ms"] is not None
    md = render(report, "md")
    assert f"| {where.name(unnamed)} | 10.250.0.{unnamed}:{PORT} | {where.name(unnamed)} (host list) | 0/2 |" in md
    assert f"| {where.name(k)} | 10.250.0.{k} |" in md  # node specifications: the address each node measured
    assert elapsed < 150, elapsed  # 45-55 s on the loaded 2-core VM; the bound only catches a hang
