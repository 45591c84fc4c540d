"""The engine's probes and checks on kept threads (gpu_preflight.deadline): a hung probe is cut
off at its deadline and named, the probes beside it are still read, its thread is left behind
and given no other job, and run after run starts no thread per run (a 1-second monitor).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gpu_preflight import Status, deadline, registry, run_checks
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


def test_hung_probe_is_named_at_its_deadline_and_the_probes_beside_it_are_read(temp_checks: None) -> None:
    t0 = time.monotonic()
    node = run_checks(include=["test.after_hang", "test.read"], timeout_s=1.0, environ={})
    elapsed = time.monotonic() - t0
    assert 1.0 <= elapsed < 3
    f = only(node, "test.after_hang")
    assert f.status is Status.ERROR and f.code == "probe_failed"
    assert "probe aa_hang did not finish within 1 s" in f.summary
    assert only(node, "test.read").status is Status.PASS
    assert node.facts["zz_read"].startswith("gp-deadline-")  # read on a kept thread
    hung = {k.name for k in deadline._KEPT if k.busy_since is not None}
    assert hung  # the hung probe's thread, left behind
    again = run_checks(include=["test.read"], timeout_s=1.0, environ={})
    assert only(again, "test.read").status is Status.PASS
    assert again.facts["zz_read"] not in hung  # the hung thread is not handed a new job


def test_runs_start_no_thread_per_run(temp_checks: None) -> None:
    run_checks(include=["test.read", "test.silent"], timeout_s=5.0, environ={})
    kept = len(deadline._KEPT)
    for _ in range(20):
        node = run_checks(include=["test.read", "test.silent"], timeout_s=5.0, environ={})
        assert only(node, "test.read").status is Status.PASS
    assert len(deadline._KEPT) == kept  # the same kept threads, run after run


def test_hung_check_is_named_and_its_thread_takes_no_other_job(temp_checks: None) -> None:
    node = run_checks(include=["test.hang", "test.silent", "test.read"], timeout_s=0.5, environ={})
    codes = {f.check_id: f.code for f in node.findings}
    assert codes == {"test.hang": "check_timeout", "test.silent": "no_result", "test.read": "ok"}
    (hung,) = [f for f in node.findings if f.check_id == "test.hang"]
    assert hung.summary == "check test.hang did not finish within 0.5 s"
    busy = [k for k in deadline._KEPT if k.busy_since is not None]
    assert busy  # still running the hung check
    assert all(k.submit(lambda: None) is None for k in busy)
