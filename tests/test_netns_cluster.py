"""Hosts in network namespaces, one torchrun agent each, with one bad host.

A capped link, a worker killed before the process group forms, one stopped mid-run, a link
cut mid-run: the report must name that host, and only that host.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from . import netns
from .conftest import REPO
from .fault_hooks import fault_env
from .netns_run import Layout, layout, slurm_env
from .torch_extra import needs_torch

pytestmark = needs_torch

TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
_OUTPUT: dict[int, tuple[IO[str], IO[str]]] = {}


def spawn(cmd: list[str], env: dict[str, str], **kw: Any) -> subprocess.Popen[str]:
    """An agent whose output goes to files, not pipes: the agent holding rank 0 prints a report
    larger than a pipe's 64 KiB, and pipes read one after the other would leave it blocked."""
    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")  # noqa: SIM115 - read and closed by output()
    proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env, cwd=REPO, **kw)
    _OUTPUT[proc.pid] = (out, err)
    return proc


def output(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """What the agent wrote to stdout and stderr (once it has ended or been killed)."""
    texts = []
    for fh in _OUTPUT.pop(proc.pid):
        fh.seek(0)
        texts.append(fh.read())
        fh.close()
    return texts[0], texts[1]


@pytest.fixture
def three_hosts() -> Iterator[list[str]]:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.fail("multi-host tests need root and iproute2 (CI runs as root; scripts/test.sh installs iproute2)")
    with netns.hosts(3, prefix="gpc") as names:
        yield names


def launch(names: list[str], port: int, timeout_s: int, where: Layout) -> list[tuple[int, str, str]]:
    """One agent per host as ``srun ... torchrun --rdzv_backend=c10d`` starts them: named by Slurm
    (``where``: names shuffled against addresses, started in a shuffled order); results in host order."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_")}
    procs: dict[int, subprocess.Popen[str]] = {}
    for i in where.order:
        ns = names[i - 1]
        cmd = ["ip", "netns", "exec", ns, "env", "GLOO_SOCKET_IFNAME=eth0", *slurm_env(where.name(i), len(names)),
               "timeout", "300", TORCHRUN, f"--nnodes={len(names)}", "--nproc_per_node=1", "--rdzv_backend=c10d",
               f"--rdzv_endpoint=10.250.0.1:{port}", "--rdzv_id=gpns", f"--rdzv_conf=is_host={str(i == 1).lower()}",
               f"--local_addr=10.250.0.{i}", "-m", "gpu_preflight", "run", "--format", "json", "--timeout-s",
               str(timeout_s), "--check", "network.*", "--check", "nccl.*", "--check", "cluster.*"]
        procs[i] = spawn(cmd, env)
    for p in procs.values():
        p.wait(timeout=320)
    return [(procs[i].returncode, *output(procs[i])) for i in sorted(procs)]


def test_capped_link_names_that_host(three_hosts: list[str]) -> None:
    where = layout(3)
    # Host 1 (10.250.0.1) holds node rank 0, the end every node_links exchange shares: capped, it
    # slows every link alike and a median cannot place it (the localisation rounds can: test_netns_localize).
    # Its name is still drawn at random by the layout.
    capped = random.Random(where.seed).randint(2, 3)
    netns.cap("gpc", capped, "100mbit")
    results = launch(three_hosts, 29811, 60, where)
    stdout = next((out for _, out, _ in results if out.strip()), "")
    assert stdout, "\n".join(err[-2000:] for _, _, err in results)
    report = json.loads(stdout)
    assert len({code for code, _, _ in results}) == 1  # one verdict for every agent
    assert report["cluster_info"]["cluster_topology"]["total_nodes"] == 3
    links = [f for f in report["findings"] if f["check_id"] == "network.node_links"]
    flagged = {f["subject"] for f in links if f["status"] in ("WARN", "FAIL")}
    assert flagged == {where.name(capped)}, (where, links)
    assert sorted(s["node_info"]["current_host"] for s in report["nodes"].values()) == sorted(where.names)


# The failure matrix: 2, 3 and 5 hosts; one host (d) dies before the process group forms,
# (e) is stopped mid-run (SIGSTOP), (f) loses its link mid-run. The bad host is the last
# one (torchrun ranks agents by address: host 1 holds rank 0 and the job's store), except
# (e) on two hosts, which stops rank 0 itself: another rank must take over the report.
MATRIX_TIMEOUT_S = 15
MATRIX = [(n, case) for case in ("killed_before_group", "stopped_mid_run", "link_cut_mid_run") for n in (2, 3, 5)]
FAULTS = {"killed_before_group": "kill:*:arrive", "stopped_mid_run": "stop:*:all_reduce@all",
          "link_cut_mid_run": "stop:*:all_reduce@all"}


@pytest.fixture
def matrix_hosts(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.fail("multi-host tests need root and iproute2 (CI runs as root; scripts/test.sh installs iproute2)")
    with netns.hosts(request.param, prefix="gpm") as names:
        try:
            yield names
        finally:
            for ns in names:
                netns.kill_all(ns)


def start(names: list[str], port: int, timeout_s: int, bad: int, fault: str,
          where: Layout) -> list[subprocess.Popen[str]]:
    """One agent per host, named by ``GPU_PREFLIGHT_NODE_NAME`` as ``where`` shuffles the names."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_")}
    procs = []
    for i, ns in enumerate(names, 1):
        extra = [f"{k}={v}" for k, v in fault_env(fault=fault).items()] if i == bad else []
        cmd = ["ip", "netns", "exec", ns, "env", "GLOO_SOCKET_IFNAME=eth0", f"GPU_PREFLIGHT_NODE_NAME={where.name(i)}",
               *extra,
               TORCHRUN, f"--nnodes={len(names)}", "--nproc_per_node=1", "--rdzv_backend=c10d",
               f"--rdzv_endpoint=10.250.0.1:{port}", "--rdzv_id=gpm", f"--rdzv_conf=is_host={str(i == 1).lower()}",
               f"--local_addr=10.250.0.{i}", "-m", "gpu_preflight", "run", "--format", "json", "--timeout-s",
               str(timeout_s), "--check", "network.*", "--check", "nccl.*", "--check", "cluster.*"]
        procs.append(spawn(cmd, env, start_new_session=True))
    return procs


def wait_stopped(proc: subprocess.Popen[str], within: float) -> list[int]:
    end = time.monotonic() + within
    while time.monotonic() < end:
        stopped = netns.stopped_below(proc.pid)
        if stopped:
            return stopped
        if proc.poll() is not None:
            _, err = output(proc)
            raise AssertionError(f"the faulted agent ended (code {proc.returncode}) before its stage:\n{err[-3000:]}")
        time.sleep(0.2)
    raise AssertionError(f"the faulted rank never reached its stage in {within:.0f} s")


def finish(procs: list[subprocess.Popen[str]], names: list[str], within: float) -> list[tuple[int | None, str, str]]:
    """Every agent's exit code and output; anything still running in its host at ``within`` is
    killed (code None)."""
    end = time.monotonic() + within
    out: list[tuple[int | None, str, str]] = []
    for p, ns in zip(procs, names, strict=True):
        try:
            code: int | None = p.wait(timeout=max(end - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            code = None
            netns.kill_all(ns)
            p.wait(timeout=30)
        out.append((code, *output(p)))
    return out


@pytest.mark.parametrize(("matrix_hosts", "case"), MATRIX, indirect=["matrix_hosts"],
                         ids=[f"{n}hosts-{case}" for n, case in MATRIX])
def test_failure_matrix_names_the_bad_host_only(matrix_hosts: list[str], case: str) -> None:
    n = len(matrix_hosts)
    bad = 1 if (case, n) == ("stopped_mid_run", 2) else n
    port = 29820 + MATRIX.index((n, case))
    t0 = time.monotonic()
    where = layout(n)
    procs = start(matrix_hosts, port, MATRIX_TIMEOUT_S, bad, FAULTS[case], where)
    healthy = [p for i, p in enumerate(procs, 1) if i != bad]
    if case != "killed_before_group":
        stopped = wait_stopped(procs[bad - 1], within=120)
        if case == "link_cut_mid_run":
            netns.link_down("gpm", bad)
            for pid in stopped:
                os.kill(pid, signal.SIGCONT)
    good = [ns for i, ns in enumerate(matrix_hosts, 1) if i != bad]
    results = dict(zip(healthy, finish(healthy, good, within=240), strict=True))
    elapsed = time.monotonic() - t0
    if case == "stopped_mid_run":  # a stopped worker never ends by itself: the operator kills it
        for pid in netns.stopped_below(procs[bad - 1].pid):
            os.kill(pid, signal.SIGKILL)
    if case == "link_cut_mid_run":  # the cable is back: the cut-off agent can learn the job is over
        netns.link_up("gpm", bad)
    bad_code, _, bad_err = finish([procs[bad - 1]], [matrix_hosts[bad - 1]], within=90)[0]
    reports = [out for code, out, _ in results.values() if out.strip()]
    assert len(reports) == 1, [err[-3000:] for _, _, err in results.values()] + [bad_err[-2000:]]
    report = json.loads(reports[0])
    assert report["cluster_summary"]["overall_status"] == "FAIL"
    assert [code for code, _, _ in results.values()] == [1] * (n - 1)  # torchrun: 1 for any failed worker
    for _, _, err in results.values():  # torchrun's summary: our verdict line, the worker's code, no SIGTERM
        assert "gpu-preflight FAIL (exit 2)" in err and "exitcode  : 2" in err and "SIGTERM" not in err, err[-3000:]
    assert bad_code not in (0, None), bad_err[-2000:]  # the bad host's agent ended too, it did not hang
    names = {where.name(bad), f"10.250.0.{bad}"}  # the name it gave, or the rendezvous' address for it
    missing = [f for f in report["findings"] if f["check_id"] == "cluster.completeness"]
    assert [f["status"] for f in missing] == ["FAIL"], missing
    assert missing[0]["subject"].split("/")[0] in names, missing
    flagged = {f["subject"].split("/")[0] for f in report["findings"] if f["status"] in ("WARN", "FAIL", "ERROR")}
    assert flagged - {"group all", "cluster"} <= names, report["findings"]
    assert elapsed < 60 + MATRIX_TIMEOUT_S * 2 + 30, elapsed  # start-up of n agents on 2 cores + timeout + grace
