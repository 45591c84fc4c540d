"""Hosts in network namespaces for multi-node tests (10.250.0.0/24, nothing leaves the box).

A bridge lives in its own namespace ``<prefix>sw``; host i is namespace ``<prefix>n<i>``
with ``eth0`` = 10.250.0.i/24. Links can be capped with ``tc tbf`` on both sides or cut.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30)


@contextmanager
def hosts(n: int, prefix: str = "gp") -> Iterator[list[str]]:
    sw = f"{prefix}sw"
    names = [f"{prefix}n{i}" for i in range(1, n + 1)]
    teardown(prefix, n)
    sh("ip", "netns", "add", sw)
    sh("ip", "-n", sw, "link", "add", "br0", "type", "bridge")
    sh("ip", "-n", sw, "link", "set", "br0", "up")
    sh("ip", "-n", sw, "link", "set", "lo", "up")
    for i, ns in enumerate(names, 1):
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", f"{prefix}v{i}", "netns", ns, "type", "veth", "peer", "name", f"{prefix}b{i}",
           "netns", sw)
        sh("ip", "-n", sw, "link", "set", f"{prefix}b{i}", "master", "br0")
        sh("ip", "-n", sw, "link", "set", f"{prefix}b{i}", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "link", "set", f"{prefix}v{i}", "name", "eth0")
        sh("ip", "-n", ns, "addr", "add", f"10.250.0.{i}/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
    try:
        yield names
    finally:
        teardown(prefix, n)


def teardown(prefix: str, n: int) -> None:
    for ns in [f"{prefix}n{i}" for i in range(1, n + 1)] + [f"{prefix}sw"]:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def cap(prefix: str, host: int, rate: str = "100mbit") -> None:
    """Cap host ``host``'s link in both directions with a token bucket."""
    sh("ip", "netns", "exec", f"{prefix}n{host}", "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", rate,
       "burst", "256kb", "latency", "50ms")
    sh("ip", "netns", "exec", f"{prefix}sw", "tc", "qdisc", "add", "dev", f"{prefix}b{host}", "root", "tbf", "rate",
       rate, "burst", "256kb", "latency", "50ms")


def link_down(prefix: str, host: int) -> None:
    """Cut host ``host``'s link (the switch side too, as a pulled cable would)."""
    sh("ip", "-n", f"{prefix}n{host}", "link", "set", "eth0", "down")
    sh("ip", "-n", f"{prefix}sw", "link", "set", f"{prefix}b{host}", "down")


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children first), read from /proc."""
    import os

    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def stopped_below(pid: int) -> list[int]:
    """Processes below ``pid`` that are stopped (SIGSTOP: state ``T``)."""
    out = []
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/stat") as fh:
                if fh.read().rpartition(")")[2].split()[0] == "T":
                    out.append(p)
        except OSError:
            continue
    return out


def kill_all(ns: str) -> None:
    """SIGKILL every process left in namespace ``ns`` (workers outlive an agent that died)."""
    import os
    import signal

    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=30).stdout
    for pid in out.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            continue


def link_up(prefix: str, host: int) -> None:
    """Reconnect a host cut with :func:`link_down`."""
    sh("ip", "-n", f"{prefix}sw", "link", "set", f"{prefix}b{host}", "up")
    sh("ip", "-n", f"{prefix}n{host}", "link", "set", "eth0", "up")
