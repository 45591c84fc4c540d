"""The one way to run callables with deadlines (gpu_preflight.deadline): kept threads, jobs in
turn with a hand-over, side by side, the overdue abandoned (and their threads given no other
job), a stuck call refused, a call collected later.

Each timing test has a counterpart that shows the behaviour is not an accident of timing.
"""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight import deadline
from gpu_preflight.deadline import Job, Later, OneAtATime, Overdue, Stuck, Timeout, call, run_all
from gpu_preflight.kept_thread import KeptThread

from .test_node_live import findings, node_env, run_cli


def test_a_call_returns_its_value_or_raises_its_error_on_a_kept_thread() -> None:
    idents = [call(threading.get_ident, 5.0, "t") for _ in range(5)]
    assert len(set(idents)) == 1 and idents[0] != threading.get_ident()  # one thread, kept from call to call
    with pytest.raises(ZeroDivisionError):
        call(lambda: 1 // 0, 5.0, "t")
    assert call(threading.get_ident, 5.0, "t") == idents[0]  # an error does not cost the thread


def test_an_overdue_call_is_a_timeout_and_its_thread_takes_no_other_job() -> None:
    release = threading.Event()
    started = time.monotonic()
    with pytest.raises(Overdue, match=r"^hung did not finish within 0\.2 s$") as exc:
        call(lambda: (release.wait(30), threading.get_ident())[1], 0.2, "hung")
    assert isinstance(exc.value, Timeout) and 0.2 <= time.monotonic() - started < 2.0
    stuck = [k for k in deadline._KEPT if k.busy_since is not None]
    assert stuck, "the abandoned call still holds its kept thread"
    others = {call(threading.get_ident, 5.0, "t") for _ in range(3)}
    assert not others & {t.ident for t in threading.enumerate() if t.name == stuck[0].name}
    assert not exc.value.returned.is_set()
    release.set()
    assert exc.value.returned.wait(5.0)  # told once the abandoned call returned after all


def test_jobs_run_in_turn_on_one_thread() -> None:
    spans: list[tuple[float, float, int]] = []

    def noted() -> None:
        t0 = time.monotonic()
        time.sleep(0.02)
        spans.append((t0, time.monotonic(), threading.get_ident()))

    assert run_all([Job(f"j{i}", noted, 5.0) for i in range(4)]) == [None] * 4
    assert len({ident for *_, ident in spans}) == 1
    assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(spans))


def test_a_slow_job_hands_the_queue_over_and_its_thread_stops_after_it() -> None:
    seen: dict[str, tuple[float, float, int]] = {}
    t0 = time.monotonic()

    def noted(name: str, seconds: float) -> Job[str]:
        def run() -> str:
            begun = time.monotonic() - t0
            time.sleep(seconds)
            seen[name] = (begun, time.monotonic() - t0, threading.get_ident())
            return name
        return Job(name, run, 5.0)

    got = run_all([noted("slow", 0.28), noted("a", 0.08), noted("b", 0.08), noted("c", 0.08)], handover_s=0.15)
    assert got == ["slow", "a", "b", "c"]
    assert 0.15 <= seen["a"][0] < 0.27, seen  # handed over at 0.15 s, not after the slow job's 0.28 s
    # the slow job's thread, free again while b runs, does not start c beside it: one lane at a time
    assert seen["c"][0] >= seen["b"][1] and seen["a"][2] == seen["b"][2] == seen["c"][2] != seen["slow"][2], seen


def test_without_a_hand_over_the_slow_job_holds_the_queue() -> None:
    """The counterpart: a hand-over time longer than the slow job leaves the queue waiting for it."""
    started: dict[str, float] = {}
    t0 = time.monotonic()

    def note(name: str, seconds: float) -> None:
        started[name] = time.monotonic() - t0
        time.sleep(seconds)

    run_all([Job("slow", lambda: note("slow", 0.4), 5.0), Job("a", lambda: note("a", 0.0), 5.0)], handover_s=5.0)
    assert started["a"] >= 0.4, started


def test_a_hung_job_is_overdue_at_its_limit_and_the_jobs_behind_it_answer() -> None:
    release = threading.Event()
    t0 = time.monotonic()
    got = run_all([Job("probe hung", lambda: release.wait(30), 0.5), Job("probe ok", lambda: 1, 0.5),
                   Job("probe boom", lambda: 1 // 0, 0.5)])
    elapsed = time.monotonic() - t0
    release.set()
    assert 0.5 <= elapsed < 2.0, elapsed
    assert isinstance(got[0], Overdue) and str(got[0]) == "probe hung did not finish within 0.5 s"
    assert got[1] == 1 and isinstance(got[2], ZeroDivisionError)


def test_side_by_side_starts_every_job_at_once_and_limits_count_from_the_call() -> None:
    t0 = time.monotonic()
    got = run_all([Job(f"j{i}", lambda: (time.sleep(0.3), time.monotonic() - t0)[1], 5.0) for i in range(4)]
                  + [Job("late", lambda: time.sleep(5), 0.4)], side_by_side=True)
    elapsed = time.monotonic() - t0
    assert all(isinstance(done, float) and done < 0.6 for done in got[:4]), got  # not 4 x 0.3 s
    assert isinstance(got[4], Overdue) and elapsed < 1.5


def test_a_long_last_job_is_waited_for_not_polled() -> None:
    """The last job running past the hand-over time has nobody to hand over to: the caller
    sleeps until it ends (a caller that woke again and again cost a monitor a core)."""
    cpu0, t0 = time.thread_time(), time.monotonic()
    assert run_all([Job("slow", lambda: time.sleep(0.4), 5.0)], handover_s=0.01) == [None]
    cpu, elapsed = time.thread_time() - cpu0, time.monotonic() - t0
    assert elapsed >= 0.4 and cpu < 0.05, f"the caller used {cpu:.3f} s of CPU waiting {elapsed:.2f} s"


def test_one_at_a_time_refuses_a_call_while_an_abandoned_one_runs() -> None:
    calls = OneAtATime("t-stuck")
    assert calls(lambda: 42, 5.0) == 42 and calls.stuck_for() is None
    release = threading.Event()
    with pytest.raises(Overdue, match=r"t-stuck did not finish within 0\.2 s"):
        calls(release.wait, 0.2)
    age = calls.stuck_for()
    assert age is not None and age >= 0.2
    ran: list[int] = []
    with pytest.raises(Stuck, match="has not returned"):
        calls(lambda: ran.append(1), 5.0)
    assert ran == []  # refused, not queued behind the stuck call
    release.set()
    end = time.monotonic() + 5.0
    while calls.stuck_for() is not None and time.monotonic() < end:
        time.sleep(0.01)
    assert calls(lambda: "again", 5.0) == "again"


def test_a_call_collected_later_counts_its_deadline_from_the_collection() -> None:
    later = Later(lambda: (time.sleep(0.3), "done")[1], "node checks")
    assert later.running()
    time.sleep(0.4)  # the caller's own work, longer than the limit below
    assert not later.running() and later.result(0.1) == "done"
    hung = Later(lambda: time.sleep(5), "stuck")
    with pytest.raises(Overdue, match=r"^stuck did not finish within 0\.1 s$"):
        hung.result(0.1)
    with pytest.raises(KeyError):
        Later(lambda: {}["x"], "crash").result(5.0)


def test_calls_racing_a_kept_threads_idle_end_are_all_served(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deadline, "_KEPT", [KeptThread("t-race", idle_s=0.001)])
    for _ in range(200):
        assert call(lambda: 1, 5.0, "t") == 1
        time.sleep(0.001)


def test_the_program_exits_at_its_deadline_while_a_probe_is_stuck_in_a_c_call(
        stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    """nvmlInit hangs for ten minutes in the stub library (in C, where no Python code runs):
    the run names the probe at its 2 s deadline and the process exits with the ERROR code at
    once, the stuck thread left to the process's end (a daemon: the interpreter's exit does
    not wait for it)."""
    env = node_env(stub_lib, tmp_path, h200_dump, FAKE_NVML_HANG="sys:nvmlInitWithFlags:600")
    out, elapsed = run_cli(env, "--check", "gpu.nvml", "--timeout-s", "2")
    assert "nvmlInitWithFlags hangs for 600 s" in out.stderr  # the call really was stuck
    assert out.returncode == 3 and 2.0 <= elapsed < 6.0, (out.returncode, elapsed, out.stderr)
    (f,) = findings(out, "gpu.nvml")
    assert (f["status"], f["code"]) == ("ERROR", "probe_failed")
    assert f["summary"] == "could not gather what this check needs: probe gpu did not finish within 2 s"
