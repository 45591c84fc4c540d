"""The two-level gather (node leaders bundle their node's payloads for rank 0) on a real c10d TCPStore.

Ranks are played by this process writing what the runner writes (hello, heartbeat,
payload); the store, the bundling and rank 0's gather are the real ones. A dead leader
must not hide its node's surviving ranks, and a dead rank under a live leader is named.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import msgspec
import pytest

from gpu_preflight.backends.launcher.topology import Launcher, Topology
from gpu_preflight.distributed.gather import gather, names, post_node_bundle
from gpu_preflight.distributed.liveness import Beats
from gpu_preflight.distributed.payload import Hello
from gpu_preflight.distributed.store import PREFIX, STALE_S, local_pids
from gpu_preflight.records.columns import unpack

from .torch_extra import torch_or_skip

dist = torch_or_skip("torch.distributed")

PER_NODE, NODES = 2, 2


def open_store() -> Iterator[Any]:
    """A real c10d TCPStore on a free loopback port, closed afterwards."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    st = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=10))
    yield st
    del st


@pytest.fixture
def store() -> Iterator[Any]:
    yield from open_store()


def topo(rank: int) -> Topology:
    node, local = divmod(rank, PER_NODE)
    return Topology(launcher=Launcher.TORCHRUN, world_size=PER_NODE * NODES, rank=rank, local_rank=local,
                    local_world_size=PER_NODE, node_rank=node, num_nodes=NODES, hostname=f"h{node}")


class Clock:
    """A reader's monotonic clock that the test moves on (no test waits out a stale time)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def seen_still(store: Any, ranks: list[int]) -> Beats:
    """Rank 0's view of the heartbeats when these ranks' beats have stood still for 3 x ``STALE_S``
    (their beats read once, then that long passes on the reader's clock)."""
    clock = Clock()
    beats = Beats(clock=clock)
    beats.read(store, ranks, PREFIX)
    clock.now = 3 * STALE_S
    return beats


def hello(t: Topology) -> str:
    """A rank's hello as the runner says it (a made-up process id)."""
    return Hello(hostname=str(t.hostname), node_name=t.node_name, node_rank=t.node_rank, local_rank=t.local_rank,
                 pid=10_000 + t.rank).to_json()


def rank_posts(store: Any, rank: int, *, payload: bool = True) -> None:
    node = rank // PER_NODE
    store.set(f"{PREFIX}/hello/{rank}", hello(topo(rank)))
    store.set(f"{PREFIX}/beat/{rank}", f"1 {time.time():.3f} 1")
    if payload:
        gemm = [{"dtype": "bf16", "n": 8192, "tflops": 600.0 + rank, "correct": True, "rel_error": 1e-3,
                 "error": None}]
        store.set(f"{PREFIX}/payload/{rank}", json.dumps({"rank": rank, "node_rank": node, "gemm": gemm}))


def test_every_rank_arrives_through_its_node_bundle(store: Any) -> None:
    for r in range(PER_NODE * NODES):
        rank_posts(store, r)
    post_node_bundle(store, topo(2), time.monotonic() + 5)
    post_node_bundle(store, topo(0), time.monotonic() + 5)
    assert not store.check([f"{PREFIX}/payload/3"])  # bundled: the store keeps one copy
    got = gather(store, topo(0), time.monotonic() + 5)
    assert sorted(got["payloads"]) == [0, 1, 2, 3] and got["missing"] == {}
    assert got["payloads"][3] == {"rank": 3, "node_rank": 1}  # its GEMM result travels in the node's columns
    gemm = unpack(got["columns"]).gemm["bf16"]
    assert gemm.rank == [0, 1, 2, 3] and gemm.tflops == [600.0, 601.0, 602.0, 603.0]


def test_a_dead_leader_does_not_hide_its_nodes_other_ranks(store: Any) -> None:
    for r in (0, 1, 3):
        rank_posts(store, r)
    rank_posts(store, 2, payload=False)  # node 1's leader died before bundling
    post_node_bundle(store, topo(0), time.monotonic() + 5)
    start = time.monotonic()
    got = gather(store, topo(0), time.monotonic() + 30, beats=seen_still(store, [2]))
    assert time.monotonic() - start < 5  # the heartbeat that stood still is noticed, not the deadline waited out
    assert sorted(got["payloads"]) == [0, 1, 3]
    assert "gemm" in got["payloads"][3]  # read directly: rank 0 puts it in columns itself (ClusterFacts.columns)
    assert list(got["missing"]) == [2] and "rank 2 on h1 stopped answering" in got["missing"][2]


def test_a_dead_rank_under_a_live_leader_is_named_in_the_bundle(store: Any) -> None:
    for r in (0, 1, 2):
        rank_posts(store, r)
    rank_posts(store, 3, payload=False)
    store.set(f"{PREFIX}/progress/3", "all_reduce@all")
    post_node_bundle(store, topo(2), time.monotonic() + 5, beats=seen_still(store, [3]))
    post_node_bundle(store, topo(0), time.monotonic() + 5)
    got = gather(store, topo(0), time.monotonic() + 5)
    assert sorted(got["payloads"]) == [0, 1, 2]
    assert got["missing"][3].startswith("rank 3 on h1 stopped answering")
    assert got["missing"][3].endswith("last stage all_reduce@all")


def test_a_node_that_never_bundles_is_read_rank_by_rank_at_the_deadline(store: Any) -> None:
    for r in range(PER_NODE * NODES):
        rank_posts(store, r)  # node 1's leader is alive but never bundles (hung after posting)
    post_node_bundle(store, topo(0), time.monotonic() + 5)
    got = gather(store, topo(0), time.monotonic() + 1)
    assert sorted(got["payloads"]) == [0, 1, 2, 3] and got["missing"] == {}


def test_a_node_that_never_joined_is_named_from_the_launchers_host_list(store: Any) -> None:
    """Ranks that never registered (rank 0 gave up waiting for them) are missing at once, not
    after the deadline, and named from the launcher's view: here Slurm's host list."""
    for r in (0, 1):
        rank_posts(store, r)
    slurm = msgspec.structs.replace(topo(0), launcher=Launcher.SLURM, hosts=("gpu-001", "gpu-002"))
    post_node_bundle(store, slurm, time.monotonic() + 5, absent=(2, 3))
    start = time.monotonic()
    got = gather(store, slurm, time.monotonic() + 30, absent=(2, 3))
    assert time.monotonic() - start < 5
    assert sorted(got["payloads"]) == [0, 1] and sorted(got["missing"]) == [2, 3]
    assert got["missing"][2].startswith("rank 2 on gpu-002 never joined the job")
    assert got["names"][3] == "gpu-002"


def test_unreadable_payloads_and_bundles_name_their_ranks_with_the_key_path(store: Any) -> None:
    """A payload that is not a payload (rank 1's node_rank a word) is named by its leader; a bundle
    that is not a bundle (node 1's rank keys not numbers) names each of its node's ranks at rank 0.
    Both say where the text went wrong; the gather goes on and the rest of the job counts."""
    for r in range(PER_NODE * NODES):
        rank_posts(store, r)
    store.set(f"{PREFIX}/payload/1", json.dumps({"rank": 1, "node_rank": "zero"}))
    store.set(f"{PREFIX}/node/1", json.dumps({"payloads": {"two": {"rank": 2}}, "missing": {}}))
    store.append(f"{PREFIX}/bundled", "1,")
    post_node_bundle(store, topo(0), time.monotonic() + 5)
    got = gather(store, topo(0), time.monotonic() + 5)
    assert sorted(got["payloads"]) == [0] and sorted(got["missing"]) == [1, 2, 3]
    assert got["missing"][1].startswith("rank 1 on h0 sent a payload that could not be read")
    assert "$.node_rank" in got["missing"][1]
    for r in (2, 3):
        assert got["missing"][r].startswith(f"rank {r} on h1 was in its node leader's bundle, which could not be read")
        assert "`key` in `$.payloads`" in got["missing"][r]


def test_a_hello_is_written_as_before_and_an_older_ranks_hello_reads() -> None:
    """The text every earlier version wrote (``json.dumps`` of these keys in this order) is what a
    hello still is on the wire, so ranks of two versions in one job read each other's."""
    older = json.dumps({"hostname": "h1", "node_name": "n1", "node_rank": 1, "local_rank": 0, "pid": 4242})
    said = Hello(hostname="h1", node_name="n1", node_rank=1, local_rank=0, pid=4242)
    assert said.to_json() == older and Hello.from_json(older) == said


MALFORMED = ["not json", '["elsewhere", "elsewhere"]',
             json.dumps({"hostname": "elsewhere", "node_name": 7, "node_rank": 1, "local_rank": 1, "pid": 1}),
             json.dumps({"hostname": "elsewhere", "node_name": "elsewhere"})]  # no pid, no ranks


@pytest.mark.parametrize("malformed", MALFORMED)
def test_a_malformed_hello_counts_as_none_said(store: Any, malformed: str) -> None:
    """Rank 3 left a hello that is not one: it is named from its node-mate's hello, and from the
    launcher's host list once its node-mate's is malformed too; its process is not waited for."""
    for r in range(PER_NODE * NODES):
        rank_posts(store, r)
    store.set(f"{PREFIX}/hello/3", malformed)
    assert names(store, topo(0), [3]) == {3: "h1"}
    assert local_pids(store, topo(2), [2, 3]) == [10_002]
    store.set(f"{PREFIX}/hello/2", malformed)
    slurm = msgspec.structs.replace(topo(0), launcher=Launcher.SLURM, hosts=("gpu-001", "gpu-002"))
    assert names(store, slurm, [3]) == {3: "gpu-002"}
    assert local_pids(store, topo(2), [2, 3]) == []
