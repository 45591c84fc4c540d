"""Can every node find and reach the others? Name lookups and TCP connects, measured by the node leaders.

A new cluster often fails here before any GPU is touched: a node's name is missing from DNS
or from the other nodes' ``/etc/hosts``, it resolves to a stale address, or a firewall or
security group drops the ports NCCL's and gloo's sockets open. No SSH is needed: the ranks
are already on every node. Each node leader (local rank 0), once it knows who it is
(:mod:`.identity`):

1. opens a short-lived TCP listener (``diagnostics.connectivity_port``; 0, the default, takes
   an ephemeral port, as NCCL's and gloo's own listeners do) that answers each connection
   with a one-line banner naming its node, and advertises its address (the source address
   toward the job's store), port, names and banner token in the store
   (``<prefix>/connectivity/node/<n>``); the last to advertise sets ``.../all``;
2. in the background, while the workloads run, waits for the others' adverts (polling one
   key, never a blocking store wait: the store client serialises calls, and a long wait
   would hold up this rank's heartbeat) and, under torchrun, for the rendezvous' names;
3. measures each sampled peer (:func:`peers_of`: every other node up to
   :data:`ALL_PEERS_UP_TO` nodes, above that :data:`RING` ring neighbours plus random ones, up
   to :data:`SAMPLE` peers, so a node's cost stays bounded at 10,000 nodes while every node is
   still probed by at least :data:`RING` others): the forward lookup of the peer's name
   (``getaddrinfo``), the reverse lookup of its address (``getnameinfo``, name required),
   the TCP connect to its listener with the banner read, and, where the name led to an
   address other than the advertised one, a connect to that address too (does the name
   reach the right node?). Every step runs at once on its own thread
   (:func:`gpu_preflight.deadline.run_all`), each bounded by ``diagnostics.connectivity_timeout_s``,
   so 63 peers cost one timeout, not 63; plus one connect to the job's store (the rendezvous
   port every rank used).

The name looked up is the one the launcher uses for the peer: its own name where it is in
the job's host list (``SLURM_JOB_NODELIST``, ``SM_HOSTS``: what ``srun`` recipes put in
``MASTER_ADDR`` and SageMaker resolves), else the name torchrun's rendezvous holds for it
(``--local-addr`` or the agent's FQDN), else its host name. The block travels in the leader's
payload (``connectivity``); :mod:`gpu_preflight.records.connectivity` reads it and
``cluster.connectivity`` judges it. A step that could not be taken says so (``error``,
``not_run``) and is reported as not measured, never as a pass.
"""

from __future__ import annotations

import contextlib
import json
import random
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from ..backends.launcher.topology import Launcher
from ..deadline import Job, Later, Overdue, run_all
from .liveness import read_values
from .store import PREFIX, RDZV_NAMES_KEY, get_text

if TYPE_CHECKING:
    from ..backends.launcher.topology import Topology
    from ..config.diagnostics import DiagnosticsConfig
    from .store import KVStore

__all__ = ["ALL_PEERS_UP_TO", "RING", "SAMPLE", "Probe", "launch_name", "peers_of", "start"]

ALL_PEERS_UP_TO = 64  # up to this many nodes every node probes every other
RING = 3  # above it: the next RING nodes (so every node is probed by at least RING others) ...
SAMPLE = 16  # ... plus random peers, up to this many in all
BANNER = "gpu-preflight-connectivity"
KEY = f"{PREFIX}/connectivity"


def peers_of(node: int, num_nodes: int) -> list[int]:
    """The nodes ``node`` probes: all others up to :data:`ALL_PEERS_UP_TO` nodes; above, the
    :data:`RING` next ones and random others (seeded by node and size, so a rerun of the same
    job shape probes the same pairs) up to :data:`SAMPLE`."""
    if num_nodes <= ALL_PEERS_UP_TO:
        return [j for j in range(num_nodes) if j != node]
    chosen = [(node + k) % num_nodes for k in range(1, RING + 1)]
    rng = random.Random(f"{node}/{num_nodes}")  # noqa: S311 - spreading probes, not security
    taken = {node, *chosen}
    while len(chosen) < SAMPLE:
        j = rng.randrange(num_nodes)
        if j not in taken:
            taken.add(j)
            chosen.append(j)
    return chosen


def launch_name(advert: Mapping[str, Any], rendezvous: Mapping[int, str]) -> tuple[str | None, str]:
    """``(name, where it came from)``: the name the job's launcher uses for the advertising node."""
    if advert.get("listed") and advert.get("name"):
        return str(advert["name"]), "host list"
    node = advert.get("node")
    if isinstance(node, int) and rendezvous.get(node):
        return str(rendezvous[node]), "rendezvous"
    return (str(advert["hostname"]), "host name") if advert.get("hostname") else (None, "none")


class Listener:
    """A TCP listener that answers every connection with ``<BANNER> <node> <token>`` and closes it,
    on its own daemon thread, until :meth:`close` or ``lifetime_s`` (peers probe within the
    formation timeout plus a few lookups of each other's start)."""

    def __init__(self, port: int, node: int, token: str, family: int, lifetime_s: float) -> None:
        self.banner = f"{BANNER} {node} {token}\n".encode()
        self.stop = threading.Event()
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", port))  # noqa: S104 - peers connect
            self.sock.listen(128)
            self.sock.settimeout(0.5)
        except OSError:
            self.sock.close()
            raise
        self.port = int(self.sock.getsockname()[1])
        self.until = time.monotonic() + lifetime_s
        threading.Thread(target=self._serve, name="gp-connectivity", daemon=True).start()

    def _serve(self) -> None:
        with self.sock:
            while not self.stop.is_set() and time.monotonic() < self.until:
                try:
                    conn, _ = self.sock.accept()
                except TimeoutError:
                    continue
                except OSError:
                    return
                with contextlib.suppress(OSError), conn:
                    conn.settimeout(1.0)
                    conn.sendall(self.banner)

    def close(self) -> None:
        self.stop.set()


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 3)


def _gai_outcome(exc: BaseException) -> str:
    """``unresolved`` for the resolver's own answers (no such name, no answer); ``error`` for anything else."""
    return "unresolved" if isinstance(exc, socket.gaierror) else "error"


def forward(name: str) -> dict[str, Any]:
    """The addresses ``name`` resolves to here (``getaddrinfo``, as a launcher calls it), timed."""
    t0 = time.perf_counter()
    try:
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        return {"outcome": _gai_outcome(exc), "ms": _ms(t0), "error": f"{type(exc).__name__}: {exc}"}
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    return {"outcome": "ok", "ms": _ms(t0), "addresses": addresses}


def reverse(address: str) -> dict[str, Any]:
    """The name ``address`` maps back to (``getnameinfo`` with a name required), timed; ``none`` when
    the resolver has no name for it."""
    t0 = time.perf_counter()
    try:
        host, _ = socket.getnameinfo((address, 0), socket.NI_NAMEREQD)
    except (OSError, UnicodeError) as exc:
        word = "none" if isinstance(exc, socket.gaierror) else "error"
        return {"outcome": word, "ms": _ms(t0), "of": address, "error": f"{type(exc).__name__}: {exc}"}
    return {"outcome": "ok", "ms": _ms(t0), "of": address, "name": host}


def connect(address: str, port: int, timeout_s: float, tokens: Mapping[str, int]) -> dict[str, Any]:
    """A TCP connect to ``address:port``, timed, then the listener's banner read: ``node`` is the
    node that answered (by its token in ``tokens``), None where no banner came."""
    target = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    t0 = time.perf_counter()
    try:
        sock = socket.create_connection((address, port), timeout=timeout_s)
    except ConnectionRefusedError as exc:
        return {"outcome": "refused", "ms": _ms(t0), "target": target, "error": str(exc)}
    except TimeoutError:
        return {"outcome": "timeout", "ms": _ms(t0), "target": target,
                "error": f"no answer within {timeout_s:g} s (dropped)"}
    except OSError as exc:
        return {"outcome": "unreachable", "ms": _ms(t0), "target": target, "error": f"{type(exc).__name__}: {exc}"}
    ms = _ms(t0)
    node = None
    with contextlib.suppress(OSError), sock:
        sock.settimeout(min(timeout_s, 2.0))
        words = sock.recv(256).decode(errors="replace").split()
        if len(words) == 3 and words[0] == BANNER:
            node = tokens.get(words[2], int(words[1]) if words[1].isdigit() else None)
    return {"outcome": "ok", "ms": ms, "target": target, "node": node}


def _timed_out(job: str, limit_s: float) -> dict[str, Any]:
    return {"outcome": "timeout", "ms": None, "error": f"no answer within {limit_s:g} s ({job})"}


Step = tuple[Any, str, Callable[[], dict[str, Any]]]  # (peer or None, step name, the call)


def _run(jobs: list[Step], limit_s: float) -> list[tuple[Any, str, dict[str, Any]]]:
    """Every ``(key, step, fn)`` at once, each bounded by ``limit_s``: its record, a timeout, or
    ``error`` with what it raised."""
    got = run_all([Job(f"{step} {key}", fn, limit_s) for key, step, fn in jobs], side_by_side=True)
    out = []
    for (key, step, _), value in zip(jobs, got, strict=True):
        if isinstance(value, Overdue):
            record = _timed_out(step, limit_s)
        elif isinstance(value, BaseException):
            record = {"outcome": "error", "ms": None, "error": f"{type(value).__name__}: {value}"}
        else:
            record = value
        out.append((key, step, record))
    return out


def _adverts(store: KVStore, topo: Topology, wanted: list[int], deadline: float) -> tuple[
        dict[int, dict[str, Any]], dict[int, str]]:
    """The adverts of ``wanted`` nodes (those posted by ``deadline``) and, under torchrun, the
    rendezvous' names. One key is polled, four times a second (less often above 500 nodes)."""
    poll = max(0.25, topo.num_nodes / 2000)  # 10,000 leaders poll the store's host 2,000 times a second at most
    torchrun = topo.launcher is Launcher.TORCHRUN
    while time.monotonic() < deadline:
        if get_text(store, f"{KEY}/all") is not None and (not torchrun or get_text(store, RDZV_NAMES_KEY)):
            break
        time.sleep(poll)
    texts = read_values(store, [f"{KEY}/node/{j}" for j in wanted])
    found = {j: json.loads(t) for j, t in zip(wanted, texts, strict=True) if t}
    rdzv: dict[int, str] = {}
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        rdzv = {int(n): str(a) for n, a in json.loads(get_text(store, RDZV_NAMES_KEY) or "{}").items()}
    return found, rdzv


def _loopback(address: str | None) -> bool:
    return bool(address) and (str(address).startswith("127.") or address == "::1")


def measure(store: KVStore, topo: Topology, me: dict[str, Any], timeout_s: float, wait_s: float) -> dict[str, Any]:
    """This node's probes of its peers (the ``connectivity`` block, see the module's docstring)."""
    wanted = peers_of(topo.node_rank, topo.num_nodes)
    found, rdzv = _adverts(store, topo, wanted, time.monotonic() + wait_s)
    tokens = {str(a.get("token")): j for j, a in found.items() if a.get("token")}
    probes: dict[int, dict[str, Any]] = {}
    jobs: list[Step] = []
    for j in wanted:
        advert = found.get(j)
        if advert is None:
            why: dict[str, Any] = {"outcome": "not_run", "error": f"node {j} advertised nothing within {wait_s:g} s"}
            probes[j] = {"peer": j, "forward": why, "reverse": why, "connect": why}
            continue
        name, source = launch_name(advert, rdzv)
        address, port = advert.get("address"), advert.get("port")
        probes[j] = {"peer": j, "name": name, "source": source, "address": address, "port": port}
        if name:
            jobs.append((j, "forward", partial(forward, name)))
        else:
            probes[j]["forward"] = {"outcome": "not_run", "error": "the node advertised no name"}
        if address and _loopback(address):
            probes[j]["reverse"] = {"outcome": "skipped", "of": address}  # two agents on one host
        elif address:
            jobs.append((j, "reverse", partial(reverse, str(address))))
        else:
            probes[j]["reverse"] = {"outcome": "not_run", "error": "the node advertised no address"}
        if address and port:
            jobs.append((j, "connect", partial(connect, str(address), int(port), timeout_s, tokens)))
        else:
            reason = advert.get("error") or "the node advertised no address"
            probes[j]["connect"] = {"outcome": "not_run", "error": f"no listener to connect to: {reason}"}
    rendezvous = None
    if topo.master_addr and topo.master_port:
        jobs.append((None, "rendezvous", partial(connect, str(topo.master_addr), int(topo.master_port), timeout_s, {})))
    for key, step, record in _run(jobs, timeout_s + 2.0):
        if key is None:
            rendezvous = record
        else:
            probes[key][step] = record
    via: list[Step] = []
    for j, p in probes.items():  # the name led elsewhere: does that address reach the node?
        fwd, port = p.get("forward") or {}, p.get("port")
        if fwd.get("outcome") == "ok" and port and p.get("address") not in fwd.get("addresses", ()) \
                and not _loopback(p.get("address")):
            via.append((j, "via_name", partial(connect, str(fwd["addresses"][0]), int(port), timeout_s, tokens)))
    for key, step, record in _run(via, timeout_s + 2.0):
        probes[key][step] = record
    return {"node": topo.node_rank, "self": me, "sampled": topo.num_nodes > ALL_PEERS_UP_TO, "peers": len(wanted),
            "timeout_s": timeout_s, "rendezvous": rendezvous, "probes": [probes[j] for j in wanted]}


class Probe:
    """A node leader's running measurement: its listener and the background job; :meth:`result`
    is the block for the payload."""

    def __init__(self, me: dict[str, Any], listener: Listener | None, later: Later[dict[str, Any]] | None,
                 until: float, error: str | None = None) -> None:
        self.me, self.listener, self.later, self.until, self.error = me, listener, later, until, error

    def result(self) -> dict[str, Any]:
        """The block, waiting until the measurement's own bound at most; one saying why where it failed."""
        error = self.error
        if self.later is not None:
            try:
                return self.later.result(max(1.0, self.until - time.monotonic()))
            except Exception as exc:  # overdue or broken: nothing of it is a measurement
                error = f"{type(exc).__name__}: {exc}"
        return {"node": self.me.get("node"), "self": self.me, "probes": [],
                "error": f"connectivity not measured: {error}"}


def start(store: KVStore, topo: Topology, identity: Mapping[str, Any], cfg: DiagnosticsConfig,
          wait_s: float) -> Probe | None:
    """On a node leader of a multi-node job: open the listener, advertise, measure in the background.
    ``wait_s``: how long to wait for the other nodes' adverts (the job's formation timeout)."""
    if topo.num_nodes < 2 or topo.local_rank != 0:
        return None
    timeout_s = float(cfg.connectivity_timeout_s)
    address = identity.get("address")
    token = secrets.token_hex(8)
    me: dict[str, Any] = {"node": topo.node_rank, "name": identity.get("name"), "hostname": identity.get("hostname"),
                          "fqdn": identity.get("fqdn"), "listed": identity.get("name") in topo.hosts,
                          "address": address, "token": token}
    me["lookup"], me["source"] = launch_name(me, {})
    listener = None
    try:
        family = socket.AF_INET6 if address and ":" in str(address) else socket.AF_INET
        listener = Listener(int(cfg.connectivity_port), topo.node_rank, token, family,
                            lifetime_s=3 * wait_s + 10 * timeout_s + 60)
        me["port"] = listener.port
    except OSError as exc:
        me["port"], me["listen_error"] = None, f"cannot listen on port {cfg.connectivity_port}: {exc}"
    advert = {**me, "error": me.get("listen_error")}
    try:
        store.set(f"{KEY}/node/{topo.node_rank}", json.dumps(advert))
        if int(store.add(f"{KEY}/count", 1)) >= topo.num_nodes:
            store.set(f"{KEY}/all", "1")
    except Exception as exc:  # the store went away: say so in the block rather than fail the rank
        if listener is not None:
            listener.close()
        return Probe(me, None, None, time.monotonic(), f"could not advertise through the job's store: "
                                                       f"{type(exc).__name__}: {exc}")
    until = time.monotonic() + wait_s + 2 * (timeout_s + 2.0) + 5.0
    later = Later(lambda: measure(store, topo, me, timeout_s, wait_s), "connectivity")
    return Probe(me, listener, later, until)

