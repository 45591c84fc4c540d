"""Heartbeats judged on the reader's clock: a live rank whose wall clock is far off is not dead,
and its skew is measured and gathered (issue 28 item 6).

The multi-process tests run real ranks' heartbeats in subprocesses against a real c10d
``TCPStore`` hosted here; a rank's wall clock is moved by shifting ``time.time`` in its
process before it starts, as a host whose NTP broke would show it. The reader's clock in the
unit tests is a value the test moves on, so no test waits out a stale time it does not need.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from gpu_preflight.backends.launcher.topology import Launcher, Topology
from gpu_preflight.distributed.gather import collect, gather, post_node_bundle
from gpu_preflight.distributed.liveness import STAMP_SLACK_S, Beat, Beats, beat_interval, stale_after
from gpu_preflight.distributed.store import PREFIX, STALE_S, Heartbeat, form_group

from .test_gather import Clock, open_store
from .torch_extra import torch_or_skip

dist = torch_or_skip("torch.distributed")


@pytest.fixture
def store() -> Iterator[Any]:
    yield from open_store()


def one_node(rank: int, world: int = 2) -> Topology:
    return Topology(launcher=Launcher.TORCHRUN, world_size=world, rank=rank, local_rank=rank, local_world_size=world,
                    node_rank=0, num_nodes=1, hostname="h0")


RANK = """
import sys, time
real = time.time
offset = float(sys.argv[3])
time.time = lambda: real() + offset  # this host's clock is off by `offset` seconds
from datetime import timedelta
import torch.distributed as dist
from gpu_preflight.distributed.store import PREFIX, Heartbeat
rank = int(sys.argv[2])
store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), is_master=False, timeout=timedelta(seconds=30))
beat = Heartbeat(store, rank)
beat.start()
end = time.monotonic() + 20
while not beat.published and time.monotonic() < end:  # its skew measured against rank 0's beats
    time.sleep(0.1)
store.set(f"{PREFIX}/payload/{rank}", '{"rank": %d}' % rank)
print("posted", flush=True)
time.sleep(600)
"""


def start_rank(store: Any, rank: int, offset_s: float) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK")}
    return subprocess.Popen([sys.executable, "-c", RANK, str(store.port), str(rank), str(offset_s)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def test_a_live_rank_whose_clock_is_30_s_behind_is_gathered_and_its_skew_reported(store: Any) -> None:
    """It used to be named "stopped answering (last heartbeat 30 s ago)" and the run FAILed."""
    ours = Heartbeat(store, 0)
    ours.start()
    late = start_rank(store, 1, -30.0)
    try:
        store.set(f"{PREFIX}/payload/0", json.dumps({"rank": 0}))
        post_node_bundle(store, one_node(0), time.monotonic() + 60)
        got = gather(store, one_node(0), time.monotonic() + 60)
    finally:
        ours.stop.set()
        late.kill()
        late.wait()
    assert sorted(got["payloads"]) == [0, 1] and got["missing"] == {}
    low, high = got["clock_skew"][1]  # rank 1's clock minus rank 0's
    # about 30 s behind: the bracket is a beat interval wide, and a loaded machine delays a stamp on its way
    assert -35.0 < low <= high < -25.0


def test_a_killed_rank_is_still_named_and_a_skewed_live_one_is_not(store: Any) -> None:
    ours = Heartbeat(store, 0)
    ours.start()
    ranks = {1: start_rank(store, 1, -45.0), 2: start_rank(store, 2, 0.0)}
    try:
        store.wait([f"{PREFIX}/beat/2"], timedelta(seconds=30))
        ranks[2].send_signal(signal.SIGKILL)  # dead before it posts anything
        ranks[2].wait()
        texts, missing = collect(store, [1, 2], time.monotonic() + 60)
    finally:
        ours.stop.set()
        for p in ranks.values():
            p.kill()
            p.wait()
    assert list(texts) == [1]
    assert list(missing) == [2] and missing[2].startswith("stopped answering (no heartbeat for ")


def test_beats_that_change_are_alive_whatever_their_wall_clock() -> None:
    clock, wall = Clock(), Clock(1_000.0)
    beats = Beats(clock=clock, wall=wall)
    for seq in range(1, 40):  # a rank an hour behind, beating every second for 39 s
        beats.observe(7, Beat(seq, wall.now - 3600.0, 1.0).text(), wall.now, wall.now)
        clock.now += 1.0
        wall.now += 1.0
        assert not beats.silent(7)
    clock.now += STALE_S  # then it stops: silent once its beat stood still longer than the stale time
    assert beats.silent(7) and beats.quiet_s(7) == pytest.approx(STALE_S + 1.0)
    low, high = beats.skew(7) or (0.0, 0.0)
    assert low <= -3600.0 <= high and high - low <= 1.0 + STAMP_SLACK_S


def test_a_rank_seen_once_is_not_silent_and_a_never_seen_one_is_unknown() -> None:
    clock = Clock()
    beats = Beats(clock=clock, wall=Clock(50.0))
    beats.observe(3, "1 0.000 1", 50.0, 50.0)  # its wall clock says 50 s old: that alone proves nothing
    assert not beats.silent(3) and beats.skew(3) is None
    assert not beats.silent(4) and beats.quiet_s(4) is None
    clock.now = STALE_S + 0.1
    assert beats.silent(3)


def test_the_skew_bracket_narrows_and_restarts_when_the_writers_clock_jumps() -> None:
    beats = Beats(clock=Clock(), wall=Clock())
    beats.observe(1, Beat(1, 105.0, 1.0).text(), 100.0, 100.0)
    beats.observe(1, Beat(2, 106.0, 1.0).text(), 100.8, 101.0)  # written in (100.0, 101.0]: skew in [5, 6]
    assert beats.skew(1) == pytest.approx((5.0, 6.0 + STAMP_SLACK_S))
    beats.observe(1, Beat(3, 107.3, 1.0).text(), 101.9, 102.0)  # written in (100.8, 102.0]: [5.3, 6.5]
    assert beats.skew(1) == pytest.approx((5.3, 6.0 + STAMP_SLACK_S))
    beats.observe(1, Beat(4, 50.0, 1.0).text(), 102.5, 103.0)  # its clock stepped back (NTP came back)
    assert beats.skew(1) == pytest.approx((50.0 - 103.0, 50.0 - 101.9 + STAMP_SLACK_S))  # after read 3 began


def test_an_old_style_beat_still_reads() -> None:
    assert Beat.parse("1712345678.5") == Beat(0, 1712345678.5, 1.0)
    assert Beat.parse("3 10.5 4") == Beat(3, 10.5, 4.0)
    assert Beat.parse("garbage here") is None


def test_the_interval_grows_with_the_job_so_the_store_takes_a_bounded_write_rate() -> None:
    assert beat_interval(1) == beat_interval(2000) == 1.0
    assert beat_interval(8000) == 4.0 and beat_interval(16000) == 8.0
    assert stale_after(1.0) == STALE_S and stale_after(4.0) == 12.0 and stale_after(8.0) == 24.0
    for world in (1000, 8000, 16000, 80000):
        assert world / beat_interval(world) <= 2000.0


def test_formation_names_the_absent_from_the_arrivals_not_a_scan(store: Any) -> None:
    """Ranks 0 and 2 of 4 arrive: rank 0 gives up at the timeout, names 1 and 3 from the one
    arrivals key, and rank 2 follows the same decision."""
    import threading

    mate = dist.TCPStore("127.0.0.1", store.port, is_master=False, timeout=timedelta(seconds=30))
    seen: list[Any] = []
    thread = threading.Thread(target=lambda: seen.append(form_group(mate, one_node(2, 4), 5.0)))
    thread.start()
    store.wait([f"{PREFIX}/arrivals"], timedelta(seconds=30))
    why, absent = form_group(store, one_node(0, 4), 0.5)
    thread.join(30)
    assert absent == (1, 3) and why is not None and "2 rank(s) did not arrive" in why
    assert [a for _, a in seen] == [absent]
