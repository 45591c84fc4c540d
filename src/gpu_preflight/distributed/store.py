"""The job's key-value store: the keys, the heartbeat, the waits and the formation of the group.

Results and liveness travel through the c10d key-value store, not through collectives: a
broken process group (a dead or stopped peer) cannot stop the gather. Everything here
talks to the store through :class:`KVStore`, the handful of calls the job uses, so the
gather and the heartbeat read the same against torch's ``TCPStore`` and against anything
else that offers them.
"""

from __future__ import annotations

import json
import os
import random
import socket
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Protocol, cast

from ..backends.launcher.rendezvous_view import node_addresses
from ..backends.launcher.topology import Launcher, Topology
from .leave import write_error_file
from .liveness import HEARTBEAT_S as HEARTBEAT_S
from .liveness import STALE_S as STALE_S  # the shortest silence that makes a rank dead (longer in large jobs)
from .liveness import Beat, Beats, beat_interval, tracker
from .payload import Hello, WireError
from .stages import PREFIX as PREFIX  # every key of the job lives under it

__all__ = ["CLOCK_KEY", "HEARTBEAT_S", "PREFIX", "RDZV_NAMES_KEY", "REPORTER_KEY", "STALE_S", "Heartbeat", "KVStore",
           "clock_skews", "connect_store", "form_group", "get_text", "hello_of", "local_pids", "silent", "wait_count",
           "wait_key"]

REPORTER_KEY = f"{PREFIX}/reporter"
RDZV_NAMES_KEY = f"{PREFIX}/rendezvous_names"  # node rank -> host, as torchrun's rendezvous saw the job
CLOCK_KEY = f"{PREFIX}/clock_skew"  # "<rank> <low> <high>" lines: each rank's clock minus rank 0's, bracketed
ARRIVALS_KEY = f"{PREFIX}/arrivals"  # "<rank>," for each rank that arrived, in order
ARRIVED_ALL_KEY = f"{PREFIX}/arrived_all"  # set by the rank whose arrival completed the job
SKEW_BRACKETS = (3, 8)  # a rank publishes its clock skew after this many changes of rank 0's beat, and again after


class KVStore(Protocol):
    """The calls of c10d's ``Store`` the job makes (``TCPStore`` has them all)."""

    def set(self, key: str, value: str) -> None: ...

    def get(self, key: str) -> bytes: ...

    def check(self, keys: list[str]) -> bool: ...

    def add(self, key: str, amount: int) -> int: ...

    def wait(self, keys: list[str], timeout: timedelta) -> None: ...

    def compare_set(self, key: str, expected_value: str, desired_value: str) -> bytes: ...

    def delete_key(self, key: str) -> bool: ...

    def multi_get(self, keys: list[str]) -> list[bytes]: ...

    def append(self, key: str, value: str) -> None: ...


def get_text(store: KVStore, key: str) -> str | None:
    """The key's value, or None when it is not set or the store cannot be read."""
    try:
        if store.check([key]):
            return bytes(store.get(key)).decode()
    except Exception:  # noqa: S110 - a store hiccup reads as "no information"
        pass
    return None


def silent(store: KVStore, rank: int) -> bool:
    """This process has seen the rank's heartbeat stand still too long (:mod:`.liveness`: by its
    own monotonic clock, never by comparing the rank's wall clock with ours). A rank that never
    beat, or that this process reads for the first time, is not silent yet."""
    beats = tracker(store)
    beats.read(store, [rank], PREFIX)
    return beats.silent(rank)


def wait_key(store: KVStore, key: str, deadline: float, give_up: Callable[[], bool] | None = None,
             wake_s: float = 2.0) -> bool:
    """Wait for ``key`` until ``deadline`` (monotonic), asking ``give_up()`` every ``wake_s`` seconds.

    The store notifies waiters, so thousands of ranks waiting cost the store's host nothing
    until the key is set; the periodic wake-up lets them notice a silent peer.
    """
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            store.wait([key], timedelta(seconds=min(wake_s, left)))
            return True
        except Exception:  # noqa: S110 - a timed-out wait: look at the peer, then wait again
            pass
        if give_up is not None and give_up():
            return False


def wait_count(store: KVStore, key: str, target: int, deadline: float) -> None:
    """Wait until the counter ``key`` reaches ``target`` (or the deadline, or the store is gone)."""
    while target > 0 and time.monotonic() < deadline:
        try:
            if int(store.add(key, 0)) >= target:
                return
        except Exception:
            return
        time.sleep(0.05)


def hello_of(store: KVStore, rank: int) -> Hello | None:
    """The rank's hello (:class:`~.payload.Hello`), or None when it said none or what it said does
    not read as one: a malformed hello is no information, as a missing one is."""
    text = get_text(store, f"{PREFIX}/hello/{rank}")
    if not text:
        return None
    try:
        return Hello.from_json(text)
    except WireError:
        return None


def local_pids(store: KVStore, topo: Topology, ranks: list[int]) -> list[int]:
    """Process ids of these ranks that run on this host (their hello says so)."""
    here = topo.hostname or socket.gethostname()
    return [hello.pid for r in ranks if (hello := hello_of(store, r)) is not None and hello.hostname == here]


class Heartbeat:
    """A thread that stamps ``beat/<rank>`` in the store while the rank lives (:class:`~.liveness.Beat`).

    Every second up to 2,000 ranks, less often above (:func:`~.liveness.beat_interval`), each
    wait drawn between 0.75 and 1.25 intervals: the store's host takes a bounded number of
    writes a second, spread rather than in bursts. The first beat is written before
    :meth:`start` returns, so a rank that arrived has a beat to read. Ranks other than 0
    also read rank 0's beat for their first few beats and publish their clock's skew against
    it (:data:`CLOCK_KEY`), which the reporting rank reports.

    The store client has no timeout on sending: a rank whose link is cut blocks in it for
    as long as TCP retries (many minutes). A second thread watches the stamps and ends the
    process (exit 3, with the reason for the launcher) when none got through for
    ``lost_after_s``: the rest of the job has named it by then.

    ``world_size``: the job's, for the interval (default: ``WORLD_SIZE`` from the launcher).
    """

    def __init__(self, store: KVStore, rank: int, lost_after_s: float = 0.0, where: str = "",
                 world_size: int | None = None) -> None:
        self.store, self.rank, self.lost_after_s, self.where = store, rank, lost_after_s, where
        self.interval = beat_interval(world_size if world_size is not None else _env_world_size())
        self.seq = 0
        self.rank0 = Beats()
        self.published: set[int] = set()
        self.stop = threading.Event()
        self.last_ok = time.monotonic()
        self.thread = threading.Thread(target=self._run, name="gp-heartbeat", daemon=True)
        self.watch = threading.Thread(target=self._watch, name="gp-store-watch", daemon=True)

    def start(self) -> None:
        if self.rank == 0:  # every rank's clock skew is measured against these stamps: never held behind a wait
            self.store = own_connection(self.store)
        self.last_ok = time.monotonic()
        self.beat()
        self.thread.start()
        if self.lost_after_s > 0:
            self.watch.start()

    def beat(self) -> None:
        """Write the next beat; then, on a rank other than 0 still measuring, read rank 0's."""
        self.seq += 1
        self.store.set(f"{PREFIX}/beat/{self.rank}", Beat(self.seq, time.time(), self.interval).text())
        self.last_ok = time.monotonic()
        seen = self.rank0.seen.get(0)
        if self.rank == 0 or (seen is not None and seen.brackets >= SKEW_BRACKETS[-1]):
            return
        self.rank0.read(self.store, [0], PREFIX)
        seen = self.rank0.seen.get(0)
        if seen is not None and seen.skew is not None and seen.brackets in SKEW_BRACKETS \
                and seen.brackets not in self.published:
            self.published.add(seen.brackets)
            low, high = seen.skew  # rank 0's clock minus ours
            self.store.append(CLOCK_KEY, f"{self.rank} {-high:.3f} {-low:.3f}\n")

    def _run(self) -> None:
        jitter = random.Random(self.rank)  # noqa: S311 - spreading writes, not security
        while not self.stop.wait(self.interval * jitter.uniform(0.75, 1.25)):
            try:
                self.beat()
            except Exception:  # the store host may be gone at the very end of the run
                return

    def _watch(self) -> None:
        while not self.stop.wait(1.0):
            silent_s = time.monotonic() - self.last_ok
            if silent_s > self.lost_after_s:
                line = (f"gpu-preflight: rank {self.rank} on {self.where} lost the job's store "
                        f"(no answer for {silent_s:.0f} s); the other ranks report without it")
                print(line, file=sys.stderr, flush=True)
                write_error_file(line, 3)
                os._exit(3)  # the main thread is blocked in the store client's send (C++): nothing else ends it


def own_connection(store: Any) -> Any:
    """A connection of its own to the same ``TCPStore`` server (the store itself for any other
    store, or when no connection can be made: the caller then shares it, as before).

    Why: a ``TCPStore`` client answers one call at a time, and a rank's waits (rank 0's group
    formation and gather wait up to a second per call) hold every other thread's call behind
    them. The progress watch and rank 0's heartbeat (whose stamps every rank measures its clock
    against) must not be held: a beat stamped, then written 3 s later, reads as a 3 s clock skew."""
    try:
        # optional: torch comes with the [torch] extra, not with a node-only install
        import torch.distributed as dist

        if isinstance(store, dist.TCPStore):  # type: ignore[attr-defined]
            return dist.TCPStore(  # type: ignore[attr-defined]
                store.host, store.port, is_master=False, wait_for_workers=False,
                timeout=store.timeout, use_libuv=store.libuvBackend)  # type: ignore[attr-defined]
    except Exception:  # noqa: S110 - no second connection: share the one we have
        pass
    return store


def _env_world_size() -> int:
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def clock_skews(store: KVStore) -> dict[int, tuple[float, float]]:
    """Each rank's clock minus rank 0's as the ranks published it (:data:`CLOCK_KEY`), the latest per rank."""
    out: dict[int, tuple[float, float]] = {}
    for line in (get_text(store, CLOCK_KEY) or "").splitlines():
        try:
            rank, low, high = line.split()
            out[int(rank)] = (float(low), float(high))
        except ValueError:
            continue
    return out


def connect_store(topo: Topology, timeout_s: float) -> KVStore:
    """The job's key-value store: hosted by an agent (torchrun's, or our supervisor's) where the
    launcher says so (``TORCHELASTIC_USE_AGENT_STORE``), else by rank 0 itself.

    Connecting before the process group lets every rank register its arrival, so a rank that
    never arrives is named instead of failing everyone's ``init_process_group``.
    """
    # optional: torch comes with the [torch] extra, not with a node-only install
    import torch.distributed as dist

    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    return cast(KVStore, dist.TCPStore(  # type: ignore[attr-defined]
        topo.master_addr or "127.0.0.1", topo.master_port or 29500, is_master=topo.rank == 0 and not agent,
        wait_for_workers=False, timeout=timedelta(seconds=timeout_s)))


def arrive(store: KVStore, topo: Topology) -> None:
    """Register this rank's arrival; the last rank to arrive says so (:data:`ARRIVED_ALL_KEY`), so
    rank 0 waits on one key instead of counting."""
    store.append(ARRIVALS_KEY, f"{topo.rank},")
    if int(store.add(f"{PREFIX}/arrived", 1)) >= topo.world_size:
        store.set(ARRIVED_ALL_KEY, "1")


def form_group(store: KVStore, topo: Topology, timeout_s: float) -> tuple[str | None, tuple[int, ...]]:
    """Arrival, then rank 0's decision: ``(None, ())`` when every rank arrived within the timeout,
    else why the process group is not formed and the ranks that never arrived.

    Everyone follows one decision in the store, so a late rank cannot form a group the
    others have given up on.
    """
    key = f"{PREFIX}/formation"
    arrive(store, topo)
    wake = 2 * beat_interval(topo.world_size)  # thousands of ranks waiting wake no more often than they beat
    if topo.rank == 0:
        deadline = time.monotonic() + timeout_s
        if topo.launcher is Launcher.TORCHRUN and topo.num_nodes > 1:  # read now: agents that fail soon leave it

            store.set(RDZV_NAMES_KEY, json.dumps(node_addresses()))
        everyone = wait_key(store, ARRIVED_ALL_KEY, deadline)
        absent = [] if everyone else sorted(set(range(topo.world_size)) - arrived(store))
        store.set(key, json.dumps(absent))
    elif not wait_key(store, key, time.monotonic() + timeout_s + STALE_S, lambda: silent(store, 0), wake):
        never = () if store.check([f"{PREFIX}/hello/0"]) else (0,)
        return "process group not formed: rank 0 " + ("never arrived" if never else "went silent"), never
    absent = json.loads(bytes(store.get(key)).decode())
    if absent:
        shown = ", ".join(map(str, absent[:20])) + (" …" if len(absent) > 20 else "")
        return (f"process group not formed: {len(absent)} rank(s) did not arrive within {timeout_s:g} s "
                f"(ranks {shown})", tuple(absent))
    return None, ()


def arrived(store: KVStore) -> set[int]:
    """The ranks that arrived so far, from the one arrivals key (no read per rank)."""
    return {int(r) for r in (get_text(store, ARRIVALS_KEY) or "").split(",") if r.strip().isdigit()}
