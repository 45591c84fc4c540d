"""A real Slurm cluster for tests: munged, slurmctld and three slurmd in network namespaces.

Everything is private to one test session, so it cannot collide with a cluster another
session (or the host) runs: munged listens on its own socket (``AuthInfo=socket=``), the
daemons live in namespaces named after this process, and state, spool, pid and log files
sit in a temporary directory. slurmctld and node1's slurmd share namespace ``<p>n1``
(10.250.0.1); node2 and node3 are 10.250.0.2 and .3. Commands that talk to slurmctld run
through :meth:`SlurmCluster.run`, which enters ``<p>n1`` with ``nsenter --net`` (``ip netns
exec`` would remount /sys and break slurmd's cgroup set-up, see test-environment.md).

HealthCheckProgram, Prolog and Epilog are configured from the start but stay inert until a
test creates their switch files (``hc-enabled``, ``prolog-enabled``, ``epilog-enabled``):
slurmd runs the health check on every node every interval, and other tests must not feel it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from gpu_preflight.integrations.slurm_nodes import SlurmNode, parse_nodes

from . import netns

TOOLS = ("munged", "munge", "slurmctld", "slurmd", "scontrol", "sinfo", "srun", "sbatch", "squeue", "nsenter", "ip")
HC_INTERVAL_S = 3
FRAGMENT = Path(__file__).resolve().parents[1] / "deploy" / "slurm" / "slurm.conf.fragment"
NODES = ("node1", "node2", "node3")


def require_tools() -> None:
    """Slurm tests fail (never skip) without the daemons: CI installs them (scripts/test.sh)."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        pytest.fail(f"Slurm tests need {', '.join(missing)}: apt-get install -y --no-install-recommends "
                    f"slurm-wlm munge slurm-client slurmctld slurmd")
    if os.geteuid() != 0:
        pytest.fail("Slurm tests need root (network namespaces, slurmd)")


def slurm_conf(d: Path, host: str) -> str:
    return f"""\
ClusterName=gpt
SlurmctldHost={host}(10.250.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge/socket
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool-%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd-%n.log
NodeName=node[1-3] NodeAddr=10.250.0.[1-3] CPUs=1 RealMemory=500
PartitionName=debug Nodes=node[1-3] Default=YES State=UP
""" + shipped_fragment(d)


def shipped_fragment(d: Path) -> str:
    """deploy/slurm/slurm.conf.fragment as shipped, pointed at this cluster's scripts.

    Every substitution must match, so the fragment cannot drift from what the tests run.
    """
    text = FRAGMENT.read_text()
    for old, new in {"/etc/slurm/gpu-preflight-healthcheck.sh": f"{d}/healthcheck.sh",
                     "/etc/slurm/prolog.d/*": f"{d}/prolog.d/*", "/etc/slurm/epilog.d/*": f"{d}/epilog.d/*",
                     "HealthCheckInterval=300": f"HealthCheckInterval={HC_INTERVAL_S}"}.items():
        assert old in text, f"{FRAGMENT} no longer has {old!r}"
        text = text.replace(old, new)
    return text


def _script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


class SlurmCluster:
    """Handles to the running cluster: paths, commands, node state."""

    def __init__(self, root: Path, prefix: str) -> None:
        self.root = root
        self.prefix = prefix
        self.conf = root / "slurm.conf"
        self.results = root / "results"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf), "SLURM_TIME_FORMAT": "standard"}

    def ns(self, i: int = 1) -> str:
        return f"/var/run/netns/{self.prefix}n{i}"

    def run(self, *argv: str, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a command in node1's namespace (where slurmctld listens) with SLURM_CONF set."""
        done = subprocess.run(["nsenter", f"--net={self.ns(1)}", *argv], capture_output=True, text=True,
                              timeout=timeout, env=self.env, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"{argv} failed ({done.returncode}): {done.stderr}{done.stdout}")
        return done

    def slurm_cmd(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """``gpu-preflight slurm ARGS`` (through its module entry point), in the cluster's network."""
        return self.run(sys.executable, "-m", "gpu_preflight.cli.slurm_cmd", *args, timeout=timeout, check=False)

    def node(self, name: str) -> SlurmNode:
        (node,) = parse_nodes(self.run("scontrol", "show", "node", name).stdout)
        return node

    def sinfo_reasons(self) -> dict[str, str]:
        """``sinfo -R``: node → reason, as an operator would read it (full width)."""
        out = self.run("sinfo", "-R", "-h", "-N", "-o", "%N|%E").stdout
        return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)

    def operator_drain(self, name: str, reason: str) -> None:
        self.run("scontrol", "update", f"NodeName={name}", "State=DRAIN", f"Reason={reason}")

    def wait_for(self, predicate: Callable[[], bool], timeout: float, what: str) -> float:
        """Seconds until ``predicate`` held; fails the test after ``timeout``."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if predicate():
                return time.monotonic() - start
            time.sleep(0.1)
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")

    def reset(self) -> None:
        """Every node idle and undrained, no results, health check and prolog off."""
        for flag in ("hc-enabled", "prolog-enabled", "epilog-enabled"):
            (self.root / flag).unlink(missing_ok=True)
        self.run("scancel", "--full", "-u", "root", check=False)
        for f in self.results.glob("*"):
            f.unlink()
        for name in NODES:
            if self.node(name).drained:
                self.run("scontrol", "update", f"NodeName={name}", "State=UNDRAIN")
        self.wait_for(lambda: all(self.node(n).base_state == "IDLE" and not self.node(n).flags for n in NODES),
                      30, "all nodes idle")

    def _pid(self, name: str) -> int | None:
        try:
            return int((self.root / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def stop(self) -> None:
        """Stop the daemons by their pid files: SIGTERM, 2 s grace, then SIGKILL; munged last.

        Signals rather than ``scontrol shutdown`` (9 s here): a slurmd that ran a job ignores SIGTERM
        for longer still, and its state is thrown away anyway.
        """
        pids = [p for p in (self._pid("slurmctld.pid"), *(self._pid(f"slurmd-{n}.pid") for n in NODES)) if p]
        for pid in pids:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + 2
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in pids:
            if _alive(pid):
                _signal(pid, signal.SIGKILL)
        munged = self._pid("munge/pid")
        if munged:
            _signal(munged, signal.SIGTERM)


def _signal(pid: int, sig: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, sig)


def _alive(pid: int) -> bool:
    """Running (zombies do not count: PID 1 on the test VMs does not reap daemons)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@contextmanager
def cluster(root: Path) -> Iterator[SlurmCluster]:
    """Start the cluster (about 2 s), yield it, and tear everything down."""
    require_tools()
    prefix = f"s{os.getpid() % 100000}"  # interface names: <prefix>v1 must fit 15 characters
    c = SlurmCluster(root, prefix)
    (root / "munge").mkdir(mode=0o700)
    (root / "state").mkdir()
    c.results.mkdir()
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    c.conf.write_text(slurm_conf(root, socket.gethostname().split(".")[0]))
    runner = f"{sys.executable} -m gpu_preflight.cli.slurm_cmd"
    _script(root / "healthcheck.sh", f"""#!/bin/sh
# HealthCheckProgram gets only SLURMD_NODENAME: SLURM_CONF and PATH must be set here.
[ -e {root}/hc-enabled ] || exit 0
export SLURM_CONF={c.conf} PATH=/usr/sbin:/usr/bin:/sbin:/bin
exec {runner} healthcheck --apply --result-file '{c.results}/{{node}}.json' >> {root}/hc-$SLURMD_NODENAME.log 2>&1
""")
    for phase in ("prolog", "epilog"):  # the switch file holds the extra arguments
        (root / f"{phase}.d").mkdir()
        _script(root / f"{phase}.d" / "50-gpu-preflight.sh", f"""#!/bin/sh
[ -e {root}/{phase}-enabled ] || exit 0
set -f
exec {runner} {phase} --apply --result-file '{c.results}/{{node}}.json' $(cat {root}/{phase}-enabled) \
  >> {root}/{phase}-$SLURMD_NODENAME.log 2>&1
""")
    with netns.hosts(3, prefix=prefix):
        try:
            subprocess.run(["munged", "--force", f"--socket={root}/munge/socket", f"--key-file={key}",
                            f"--pid-file={root}/munge/pid", f"--seed-file={root}/munge/seed",
                            f"--log-file={root}/munge/log"], check=True, capture_output=True, timeout=15)
            subprocess.run(["nsenter", f"--net={c.ns(1)}", "slurmctld", "-f", str(c.conf)], check=True,
                           capture_output=True, timeout=30, env=c.env)
            for i, name in enumerate(NODES, 1):
                subprocess.run(["nsenter", f"--net={c.ns(i)}", "slurmd", "-f", str(c.conf), "-N", name],
                               check=True, capture_output=True, timeout=30, env=c.env)
            c.wait_for(lambda: _all_idle(c), 40, "three idle nodes")
            yield c
        finally:
            c.stop()


def _all_idle(c: SlurmCluster) -> bool:
    done = c.run("sinfo", "-h", "-N", "-o", "%N %T", check=False, timeout=10)
    states = dict(line.split() for line in done.stdout.splitlines() if line.strip())
    return done.returncode == 0 and all(states.get(n) == "idle" for n in NODES)
