"""Progress on stderr: a rich bar on a terminal, log lines per stage elsewhere, nothing with --quiet.

The watcher tests play ranks by writing what the runner writes (hello, heartbeat, steps and
phase counters) into a real c10d TCPStore; the watcher and the views are the real ones."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from gpu_preflight import progress as progress_mod
from gpu_preflight.backends.launcher.topology import Launcher, Topology
from gpu_preflight.distributed import watch as watch_mod
from gpu_preflight.distributed.liveness import Beats
from gpu_preflight.distributed.payload import Hello
from gpu_preflight.distributed.plan import Plan, steps_for
from gpu_preflight.distributed.stages import Marks
from gpu_preflight.distributed.store import PREFIX, STALE_S, get_text
from gpu_preflight.distributed.watch import JobWatch
from gpu_preflight.progress import ENV, StageState, progress, should_show, stage_view, view_mode

from .torch_extra import torch_or_skip


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_gets_a_bar_with_the_current_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    out = Tty()
    with progress("collectives", total=3, stream=out) as bar:
        for op in ("all_reduce", "all_gather", "broadcast"):
            bar.advance(f"{op} on all")
    text = out.getvalue()
    assert "collectives" in text and "broadcast on all" in text and "3/3" in text
    assert "\x1b[" in text  # drawn with terminal control codes (rich)


def test_spinner_without_a_total(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    out = Tty()
    with progress("memory test", stream=out) as bar:
        bar.advance("pattern 0xAA")
    assert "memory test: pattern 0xAA" in out.getvalue()


def test_pipes_and_logs_get_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    out = io.StringIO()
    with progress("collectives", total=2, stream=out) as bar:
        bar.advance("x")
        bar.advance("y")
    assert out.getvalue() == ""
    tty = Tty()
    with progress("collectives", total=1, stream=tty, enabled=False) as bar:  # rank != 0
        bar.advance()
    assert tty.getvalue() == ""


@pytest.mark.parametrize("value, tty, shown", [("0", True, False), ("off", True, False), ("1", False, True),
                                               ("yes", False, True), ("", True, True), ("", False, False)])
def test_environment_overrides_the_guess(monkeypatch: pytest.MonkeyPatch, value: str, tty: bool,
                                         shown: bool) -> None:
    monkeypatch.setenv(ENV, value)
    stream = Tty() if tty else io.StringIO()
    assert should_show(stream) is shown
    with progress("sweep", total=1, stream=stream) as bar:
        bar.advance("done")
    assert bool(stream.getvalue()) is shown


def test_quiet_path_does_not_import_rich() -> None:
    code = ("import io, sys\nfrom gpu_preflight.progress import progress\n"
            "with progress('x', total=2, stream=io.StringIO()) as bar:\n    bar.advance('y')\n"
            "print('rich' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# --- the stages of a distributed run: views, and what the watcher reads from a real store ---

CONTROL = ("\x1b", "\r")


class Recorder:
    """A view that keeps what it was shown."""

    def __init__(self) -> None:
        self.states: list[StageState] = []

    def show(self, state: StageState) -> None:
        self.states.append(state)

    def close(self) -> None:
        return None


@pytest.mark.parametrize(("env", "tty", "quiet", "mode"), [
    ("", True, False, "bar"), ("", False, False, "log"), ("", True, True, "off"), ("", False, True, "off"),
    ("0", True, False, "off"), ("0", False, False, "off"), ("1", False, False, "bar"), ("1", True, True, "off")])
def test_view_mode_follows_terminal_quiet_and_environment(monkeypatch: pytest.MonkeyPatch, env: str, tty: bool,
                                                          quiet: bool, mode: str) -> None:
    monkeypatch.setenv(ENV, env)
    assert view_mode(Tty() if tty else io.StringIO(), quiet=quiet) == mode


def test_log_view_writes_one_line_per_stage_and_one_when_a_wait_drags_on(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    view = stage_view(out, mode="log")
    for state in [StageState("rendezvous"), StageState("rendezvous", waiting="waiting for 1 of 2 ranks: rank 1"),
                  StageState("GEMM", "fp32", 2, 13), StageState("collectives", "all_reduce on all", 4, 13),
                  StageState("collectives", "all_gather on all", 5, 13, "waiting for 1 of 2 ranks: rank 1")]:
        view.show(state)
    monkeypatch.setattr(progress_mod, "STILL_WAITING_S", 0.0)
    for _ in range(3):  # a stage that waits long says on whom, once
        view.show(StageState("collectives", "all_gather on all", 5, 13, "waiting for 1 of 2 ranks: rank 1"))
    view.show(StageState("gather"))
    view.close()
    lines = out.getvalue().splitlines()
    assert [line.split(" at ")[0] for line in lines] == [
        "gpu-preflight: stage rendezvous", "gpu-preflight: stage GEMM", "gpu-preflight: stage collectives",
        "gpu-preflight: stage collectives still waiting for 1 of 2 ranks: rank 1", "gpu-preflight: stage gather"]
    assert all(line.endswith(" s") for line in lines)
    assert not any(c in out.getvalue() for c in CONTROL)


def test_log_view_dates_a_stage_from_when_it_began() -> None:
    out = io.StringIO()
    view = stage_view(out, mode="log")
    view.show(StageState("starting 2 workers"))
    view.show(StageState("GEMM", since=time.time() + 3600))  # a clock ahead: never later than now
    view.show(StageState("gather", since=time.time() - 3600))  # nor before the view began
    assert [line.rsplit(" at ", 1)[1] for line in out.getvalue().splitlines()] == ["0.0 s"] * 3


def test_bar_view_draws_stage_step_count_and_wait_then_clears(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    out = Tty()
    view = stage_view(out)
    view.show(StageState("collectives", "all_reduce on all", 4, 13, "waiting for 2 of 16 ranks: host7, host9"))
    view.close()
    text = out.getvalue()
    assert "collectives [4/13]: all_reduce on all" in text and "waiting for 2 of 16 ranks: host7, host9" in text
    assert "\x1b[" in text and "━" in text
    assert text.endswith("\x1b[2K")  # transient: the line is erased, the verdict prints on a clean screen


@pytest.fixture
def store() -> Iterator[Any]:
    dist = torch_or_skip("torch.distributed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    st = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=10))
    yield st
    MARKS.clear()
    del st


PLAN = Plan(sizes=[1024], iters=1, warmup=0, gemm_dtypes=["fp32"], gemm_n=64, gemm_iters=1, gemm_seconds=None,
            memory=False, train_steps=1)


def shape(world: int, per_node: int, rank: int = 0) -> Topology:
    node, local = divmod(rank, per_node)
    return Topology(launcher=Launcher.TORCHRUN, world_size=world, rank=rank, local_rank=local,
                    local_world_size=per_node, node_rank=node, num_nodes=world // per_node, hostname=f"host{node}")


MARKS: dict[tuple[int, int], Marks] = {}  # one rank's counters live as long as the rank


def play(store: Any, topo: Topology, steps: list[str], *, beat_age_s: float = 0.0, per_node: bool = False) -> None:
    """What the runner writes for one rank: hello, heartbeat, each step and its phase counters."""
    store.set(f"{PREFIX}/hello/{topo.rank}", Hello(hostname=str(topo.hostname), node_name=topo.node_name,
                                                   node_rank=topo.node_rank, local_rank=topo.local_rank,
                                                   pid=10_000 + topo.rank).to_json())
    store.set(f"{PREFIX}/beat/{topo.rank}", str(time.time() - beat_age_s))
    marks = MARKS.setdefault((id(store), topo.rank), Marks(store, topo.node_rank, per_node=per_node, rank=topo.rank))
    for step in steps:
        store.set(f"{PREFIX}/progress/{topo.rank}", step)
        marks.enter(step)


UP_TO_ALL_REDUCE = ["arrive", "stack", "gemm", "train", "all_reduce@all"]


def test_watch_names_the_hosts_the_reporting_rank_waits_for(store: Any) -> None:
    world = 16
    store.set(f"{PREFIX}/steps", json.dumps(steps_for(PLAN, shape(world, 1))))
    for r in range(world):
        play(store, shape(world, 1, r), UP_TO_ALL_REDUCE[:3] if r in (7, 9) else UP_TO_ALL_REDUCE)
    view = Recorder()
    now = JobWatch(store, shape(world, 1), view).tick()[-1]
    assert (now.stage, now.step, now.done, now.total) == ("collectives", "all_reduce on all", 4, 15)
    assert now.waiting == "waiting for 2 of 16 ranks: host7, host9"
    assert [s.stage for s in view.states] == ["rendezvous", "software stack", "GEMM", "training smoke",
                                              "collectives"]


def test_watch_names_a_silent_rank_at_the_same_step_on_one_node(store: Any) -> None:
    for r in range(4):
        play(store, shape(4, 4, r), UP_TO_ALL_REDUCE)
    watch = JobWatch(store, shape(4, 4), Recorder())
    clock = [0.0]  # the watcher's monotonic clock: it saw rank 3's beat 3 x STALE_S ago, unchanged since
    watch.beats = Beats(clock=lambda: clock[0])
    watch.beats.read(store, [3], PREFIX)
    clock[0] = 3 * STALE_S
    now = watch.tick()[-1]
    assert now.waiting == f"waiting for 1 of 4 ranks: rank 3 (silent {3 * STALE_S:.0f} s at collectives)"


def test_watch_at_scale_counts_then_names_late_nodes_one_read_each(store: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch_mod, "SCAN_RANKS", 4)  # the per-node counters, as above 256 ranks
    world, per_node = 16, 4
    for r in range(world):
        late = r == 9 or r // per_node == 3
        play(store, shape(world, per_node, r), ["arrive", "stack", "gemm", "train"] if late else [*UP_TO_ALL_REDUCE,
             "ddp", "done"], per_node=True)
    reads: list[str] = []
    watched = JobWatch(store, shape(world, per_node), Recorder())
    real_get = get_text

    def counted(st: Any, key: str) -> str | None:
        reads.append(key)
        return real_get(st, key)

    monkeypatch.setattr(watch_mod, "get_text", counted)
    now = watched.tick()[-1]
    assert now.stage == "gather"
    assert now.waiting == "waiting for 5 of 16 ranks: host2, host3"
    assert not [k for k in reads if "/progress/" in k and not k.endswith("/progress/0")]  # no per-rank scan


def test_watch_hands_every_stage_to_the_view_once_in_order(store: Any) -> None:
    topo = shape(2, 2)
    play(store, shape(2, 2, 1), UP_TO_ALL_REDUCE)
    view = Recorder()
    watched = JobWatch(store, topo, view, before="starting 2 workers")
    assert watched.tick()[-1].stage == "starting 2 workers"
    play(store, topo, ["arrive", "stack"])
    watched.tick()
    play(store, topo, ["gemm fp32", "train", "all_reduce@all", "all_gather@all", "ddp", "done"])
    watched.tick()
    watched.tick()
    out = io.StringIO()
    log = stage_view(out, mode="log")
    for state in view.states:
        log.show(state)
    assert [line.split(" at ")[0].removeprefix("gpu-preflight: stage ") for line in out.getvalue().splitlines()] == [
        "starting 2 workers", "rendezvous", "software stack", "GEMM", "training smoke", "collectives",
        "DDP training", "gather"]


def test_watch_follows_localisation_rounds_and_their_tests(store: Any) -> None:
    from gpu_preflight.distributed.localize_rounds import LOC

    topo = shape(8, 2)
    for r in range(8):
        play(store, shape(8, 2, r), [*UP_TO_ALL_REDUCE, "ddp", "done"] + (["localize"] if r == 0 else []))
    pair = {"kind": "pair", "purpose": "cover", "rails": []}
    store.set(f"{LOC}/plan/1", json.dumps({"index": 1, "timeout_s": 5, "tests": [
        {"test_id": "a", "members": [0, 1], **pair}, {"test_id": "b", "members": [2, 3], **pair}]}))
    store.set(f"{LOC}/plan/2", json.dumps({"index": 2, "timeout_s": 5, "tests": [
        {"test_id": "c", "members": [0, 2], **pair}, {"test_id": "d", "members": [1, 3], **pair}]}))
    store.set(f"{LOC}/result/2/c", json.dumps({"status": "ok"}))
    states = JobWatch(store, topo, Recorder()).tick()
    assert [s.stage for s in states][-3:] == ["gather", "localisation round 1", "localisation round 2"]
    assert states[-1].waiting == "waiting for 1 of 2 tests: host1-host3"


def test_stopping_the_watch_still_hands_over_the_stages_since_its_last_tick(store: Any) -> None:
    """A gather and a report can take less than a tick: rank 0 stops the watch right after them."""
    topo = shape(2, 2)
    play(store, shape(2, 2, 1), [*UP_TO_ALL_REDUCE, "ddp", "done"])
    view = Recorder()
    watched = JobWatch(store, topo, view).start()
    play(store, topo, UP_TO_ALL_REDUCE)
    deadline = time.monotonic() + 10
    while not any(s.stage == "collectives" for s in view.states) and time.monotonic() < deadline:
        time.sleep(0.05)
    watched.halt.set()  # no more ticks: what follows is seen only by stop()
    assert watched.thread is not None
    watched.thread.join(5)
    watched.halt.clear()
    play(store, topo, ["ddp", "done", "report"])
    watched.stop()
    stages = list(dict.fromkeys(s.stage for s in view.states))
    assert stages[-3:] == ["DDP training", "gather", "report"]
    shown = len(view.states)
    watched.stop()  # twice: nothing more
    assert len(view.states) == shown
