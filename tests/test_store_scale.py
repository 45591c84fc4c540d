"""What the store at scale needed (issue 31, measured by bench/bench_store_scale.py), on a real TCPStore.

- A node leader dates a node-mate's first sighting by its stamp (same host, same clock): a rank
  killed before its leader began to collect is named at once, not a stale time later.
- The watch reads the per-node counters in one ``check`` + ``multi_get`` once a phase's counters
  exist (no read per node per scan), and over a connection of its own, so the gather's waits
  on rank 0's connection do not freeze it.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from gpu_preflight.backends.launcher.topology import Launcher, Topology
from gpu_preflight.distributed import watch as watch_mod
from gpu_preflight.distributed.gather import post_node_bundle
from gpu_preflight.distributed.liveness import FIRST_LOOK_BEATS, Beat, Beats, stale_after
from gpu_preflight.distributed.stages import Marks
from gpu_preflight.distributed.store import PREFIX, STALE_S
from gpu_preflight.distributed.watch import JobWatch
from gpu_preflight.progress import stage_view
from tests.test_gather import hello, open_store

from .torch_extra import torch_or_skip

dist = torch_or_skip("torch.distributed")


@pytest.fixture
def store() -> Iterator[Any]:
    yield from open_store()


def shape(world: int, per_node: int, rank: int = 0) -> Topology:
    node, local = divmod(rank, per_node)
    return Topology(launcher=Launcher.TORCHRUN, world_size=world, rank=rank, local_rank=local,
                    local_world_size=per_node, node_rank=node, num_nodes=world // per_node, hostname=f"host{node}")


def post(store: Any, topo: Topology, *, beat_age_s: float = 0.0, payload: bool = True) -> None:
    """One rank's hello, heartbeat (stamped ``beat_age_s`` ago) and payload, as the runner writes them."""
    r = topo.rank
    store.set(f"{PREFIX}/hello/{r}", hello(topo))
    store.set(f"{PREFIX}/beat/{r}", Beat(5, time.time() - beat_age_s, 1.0).text())
    if payload:
        store.set(f"{PREFIX}/payload/{r}", json.dumps({"rank": r, "node_rank": topo.node_rank}))


def test_a_node_mate_dead_before_its_leader_looked_is_named_at_once(store: Any) -> None:
    world, per_node = 4, 4
    for r in range(3):
        post(store, shape(world, per_node, r))
    post(store, shape(world, per_node, 3), beat_age_s=3 * STALE_S, payload=False)  # killed long ago
    start = time.monotonic()
    post_node_bundle(store, shape(world, per_node), time.monotonic() + 30)
    assert time.monotonic() - start < stale_after(1.0) / 2  # not a stale time after the leader first looked
    bundle = json.loads(bytes(store.get(f"{PREFIX}/node/0")).decode())
    assert "3" in json.dumps(bundle["missing"]) and "stopped answering" in json.dumps(bundle["missing"])


def test_only_the_readers_own_host_is_dated_by_its_stamp() -> None:
    """Another host's stamp is on another clock: its first sighting still says nothing about its age."""
    now, wall = [100.0], 1_000_000.0
    beats = Beats(clock=lambda: now[0], wall=lambda: wall, same_host={1})
    old = Beat(3, wall - 3 * STALE_S, 1.0).text()
    beats.observe(1, old, wall, wall)
    beats.observe(2, old, wall, wall)
    assert not beats.silent(1) and not beats.silent(2)  # both may still beat again ...
    now[0] += FIRST_LOOK_BEATS * 1.0 + 0.1
    assert beats.silent(1) and not beats.silent(2)  # ... our node-mate had its last intervals, the other host not
    beats.observe(1, Beat(4, wall - 3 * STALE_S + 1, 1.0).text(), wall, wall)
    assert not beats.silent(1)  # a node-mate that beats again is alive, whatever its clock says
    fresh = Beats(clock=lambda: now[0], wall=lambda: wall, same_host={1})
    fresh.observe(1, Beat(3, wall - 1.0, 1.0).text(), wall, wall)
    assert not fresh.silent(1)  # a recent stamp on our own clock is alive


class Counting:
    """The store, with its ``add`` calls counted (the watch's reads per node)."""

    def __init__(self, store: Any) -> None:
        self.store, self.adds = store, 0

    def add(self, key: str, amount: int) -> int:
        self.adds += 1
        return int(self.store.add(key, amount))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_the_watch_reads_a_phases_node_counters_in_one_go_once_they_exist(store: Any,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch_mod, "SCAN_RANKS", 4)  # the per-node counters, as above 256 ranks
    world, per_node = 24, 4
    marks = []
    for r in range(world):
        topo = shape(world, per_node, r)
        post(store, topo)
        marks.append(Marks(store, topo.node_rank, per_node=True, rank=r))
        steps = ["arrive", "stack"] if topo.node_rank in (2, 5) else ["arrive", "stack", "gemm"]
        for step in steps:
            store.set(f"{PREFIX}/progress/{r}", step)
            marks[r].enter(step)
    counted = Counting(store)
    watched = JobWatch(counted, shape(world, per_node), stage_view(mode="off"))
    assert watched.tick()[-1].waiting == "waiting for 8 of 24 ranks: host2, host5"
    first = counted.adds
    assert first >= world // per_node  # the first scan of the phase makes every node's counter exist
    watched.scanned_at = float("-inf")
    for r in range(8, 12):  # node 2 catches up
        store.set(f"{PREFIX}/progress/{r}", "gemm")
        marks[r].enter("gemm")
    assert watched.tick()[-1].waiting == "waiting for 4 of 24 ranks: host5"
    assert counted.adds - first == 1  # the job's counter only: the nodes' counters in one multi_get


def test_a_started_watch_is_not_frozen_by_a_wait_on_the_reporting_ranks_connection(store: Any) -> None:
    client = dist.TCPStore(store.host, store.port, is_master=False, wait_for_workers=False,
                           timeout=timedelta(seconds=10))
    topo = shape(2, 2)
    post(store, shape(2, 2, 1))
    store.set(f"{PREFIX}/progress/0", "arrive")
    shown: list[str] = []

    class View:
        def show(self, state: Any) -> None:
            shown.append(state.stage)

        def close(self) -> None:
            return None

    watched = JobWatch(client, topo, View()).start()
    assert watched.store is not client  # a connection of its own
    holding = threading.Thread(target=lambda: _wait_quietly(client, 6.0), daemon=True)
    holding.start()  # as the gather does: the reporting rank's connection held in a long wait
    time.sleep(0.3)
    store.set(f"{PREFIX}/progress/0", "all_reduce@all")
    deadline = time.monotonic() + 4
    while "collectives" not in shown and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "collectives" in shown
    watched.stop()
    holding.join(10)


def _wait_quietly(client: Any, seconds: float) -> None:
    with contextlib.suppress(Exception):  # the wait runs out: that is the point
        client.wait([f"{PREFIX}/never"], timedelta(seconds=seconds))


def test_a_leader_judged_silent_that_bundles_late_is_read_from_its_bundle(store: Any) -> None:
    """Seen at 16,000 simulated ranks on a loaded VM: a leader's beats fell behind, rank 0 read its
    node rank by rank and waited out its deadline for payloads the leader had bundled (and deleted)."""
    from gpu_preflight.distributed.gather import BUNDLED_KEY, gather
    from gpu_preflight.distributed.payload import NodeBundle

    world, per_node = 4, 2
    for r in range(world):
        post(store, shape(world, per_node, r), payload=r < 2)
    post_node_bundle(store, shape(world, per_node), time.monotonic() + 5)
    clock = [0.0]
    beats = Beats(clock=lambda: clock[0])
    beats.read(store, [2], PREFIX)
    clock[0] = 3 * STALE_S  # rank 0 saw leader 2's beat stand still

    def late_leader() -> None:
        time.sleep(1.5)
        texts = {r: json.dumps({"rank": r, "node_rank": 1}) for r in (2, 3)}
        store.set(f"{PREFIX}/node/1", NodeBundle.from_texts(texts, {}).to_json())
        store.append(BUNDLED_KEY, "1,")

    threading.Thread(target=late_leader, daemon=True).start()
    start = time.monotonic()
    got = gather(store, shape(world, per_node), time.monotonic() + 30, beats=beats)
    assert time.monotonic() - start < 10  # not the deadline waited out
    assert sorted(got["payloads"]) == [0, 1, 2, 3] and got["missing"] == {}
