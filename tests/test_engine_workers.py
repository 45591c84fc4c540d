"""A monitor's kept threads (engine.WorkerPool) judge as a one-shot run does, and fail as closed.

The same crash, hang, silence and failed-probe cases as tests/test_engine.py, run through a
pool: the same ERROR codes and summaries. A hung probe is still cut off at its deadline and
named, the probes queued behind it are still read, and its thread is left behind, not reused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gpu_preflight import Status, registry, run_checks
from gpu_preflight.engine import WorkerPool
from gpu_preflight.model import Finding
from gpu_preflight.registry import CheckContext, ProbeContext, check, probe

from .test_engine import _temp_checks, only

HUNG = threading.Event()
CASES = ["test.crash", "test.hang", "test.silent", "test.needs_boom", "test.needs_slow"]


@pytest.fixture
def temp_checks() -> Iterator[None]:
    with registry.CHECKS.scoped(), registry.PROBES.scoped():
        @probe("aa_hang")
        def hang_first(ctx: ProbeContext) -> None:
            HUNG.wait(30)

        @probe("zz_read")
        def read_after(ctx: ProbeContext) -> str:
            return threading.current_thread().name

        @check("test.after_hang", needs=("aa_hang", "zz_read"))
        def after_hang(ctx: CheckContext) -> list[Finding]:
            """Needs a hung probe and one queued behind it."""
            return [Finding("test.after_hang", Status.PASS, ctx.host, "ok", "fine")]

        @check("test.read", needs=("zz_read",))
        def read(ctx: CheckContext) -> list[Finding]:
            """Needs a probe that answers."""
            return [Finding("test.read", Status.PASS, ctx.host, "ok", "fine")]

        HUNG.clear()
        yield from _temp_checks()
        HUNG.set()


def outcome(node: Any) -> list[tuple[str, Status, str, str]]:
    return sorted((f.check_id, f.status, f.code, f.summary) for f in node.findings)


def test_pool_judges_every_failure_as_a_one_shot_run(temp_checks: None) -> None:
    pool = WorkerPool("test-worker")
    one_shot = run_checks(include=CASES, timeout_s=0.5, environ={})
    t0 = time.monotonic()
    kept = run_checks(include=CASES, timeout_s=0.5, environ={}, workers=pool)
    assert time.monotonic() - t0 < 5
    assert outcome(kept) == outcome(one_shot)
    assert {f.code for f in kept.findings} == {"check_crashed", "check_timeout", "no_result", "probe_failed"}
    assert all(f.status is Status.ERROR for f in kept.findings)


def test_hung_probe_is_named_at_its_deadline_and_the_probes_behind_it_are_read(temp_checks: None) -> None:
    pool = WorkerPool("test-worker")
    t0 = time.monotonic()
    node = run_checks(include=["test.after_hang", "test.read"], timeout_s=1.0, environ={}, workers=pool)
    elapsed = time.monotonic() - t0
    assert 1.0 <= elapsed < 3
    f = only(node, "test.after_hang")
    assert f.status is Status.ERROR and f.code == "probe_failed"
    assert "probe aa_hang did not finish within 1 s" in f.summary
    assert only(node, "test.read").status is Status.PASS
    assert node.facts["zz_read"].startswith("test-worker-")  # read on a kept thread, not a fresh one
    hung_on = [t for t in threading.enumerate() if t.name.startswith("test-worker-") and t.is_alive()]
    assert len(hung_on) >= 2  # the hung thread, left behind, and the one that took over
    again = run_checks(include=["test.read"], timeout_s=1.0, environ={}, workers=pool)
    assert only(again, "test.read").status is Status.PASS  # the hung thread is not handed a new job


def test_pool_starts_no_thread_per_run(temp_checks: None) -> None:
    pool = WorkerPool("test-worker")
    for _ in range(20):
        node = run_checks(include=["test.read", "test.silent"], timeout_s=5.0, environ={}, workers=pool)
        assert only(node, "test.read").status is Status.PASS
    assert pool.started <= 3  # the probe lane and the checks' worker, reused run after run
    pool.close()


def test_hung_check_abandons_its_kept_thread(temp_checks: None) -> None:
    pool = WorkerPool("test-worker")
    node = run_checks(include=["test.hang", "test.silent", "test.read"], timeout_s=0.5, environ={}, workers=pool)
    codes = {f.check_id: f.code for f in node.findings}
    assert codes == {"test.hang": "check_timeout", "test.silent": "no_result", "test.read": "ok"}
    before = pool.started
    run_checks(include=["test.read"], timeout_s=0.5, environ={}, workers=pool)
    assert pool.started >= before  # never the hung one again: a kept idle thread or a new one


def test_a_long_last_probe_is_waited_for_not_polled(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last probe of the lane running past the hand-over time has nobody to hand over to:
    the caller sleeps until it ends. It used to wake at once, again and again (a spin that
    cost a monitor with a slow NVML read a whole core for the rest of that read)."""
    from gpu_preflight import engine

    monkeypatch.setattr(engine, "HANDOVER_S", 0.02)
    with registry.CHECKS.scoped(), registry.PROBES.scoped():
        @probe("slow_last")
        def slow_last(ctx: ProbeContext) -> str:
            time.sleep(0.4)
            return "done"

        @check("test.slow_last", needs=("slow_last",))
        def slow(ctx: CheckContext) -> list[Finding]:
            """Needs a probe slower than the hand-over time."""
            return [Finding("test.slow_last", Status.PASS, ctx.host, "ok", "fine")]

        pool = WorkerPool("test-worker")
        cpu0, t0 = time.thread_time(), time.monotonic()
        node = run_checks(include=["test.slow_last"], timeout_s=5.0, environ={}, workers=pool)
        cpu, elapsed = time.thread_time() - cpu0, time.monotonic() - t0
        pool.close()
    assert only(node, "test.slow_last").status is Status.PASS and elapsed >= 0.4
    assert cpu < 0.1, f"the caller used {cpu:.2f} s of CPU waiting {elapsed:.2f} s"
