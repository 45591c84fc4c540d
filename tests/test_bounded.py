"""BoundedCall: one kept thread, a deadline per call, a stuck call refused, never two in flight."""

from __future__ import annotations

import threading
import time

import pytest

from gpu_preflight.health.bounded import BoundedCall, Stuck, Timeout


def test_calls_return_their_value_or_raise_their_error_on_one_kept_thread() -> None:
    call = BoundedCall("t-kept")
    idents = [call(threading.get_ident, 5.0) for _ in range(5)]
    assert len(set(idents)) == 1 and idents[0] != threading.get_ident()
    with pytest.raises(ZeroDivisionError):
        call(lambda: 1 // 0, 5.0)
    assert call(lambda: 42, 5.0) == 42
    assert call(threading.get_ident, 5.0) == idents[0]  # an error does not cost the thread
    assert call.stuck_for() is None


def test_an_overrun_is_a_timeout_and_the_next_call_is_refused_until_it_returns() -> None:
    call = BoundedCall("t-stuck")
    release = threading.Event()
    started = time.monotonic()
    with pytest.raises(Timeout, match=r"t-stuck did not finish within 0\.2 s") as exc:
        call(release.wait, 0.2)
    assert not isinstance(exc.value, Stuck) and time.monotonic() - started < 2.0
    age = call.stuck_for()
    assert age is not None and age >= 0.2
    ran: list[int] = []
    with pytest.raises(Stuck, match="has not returned"):
        call(lambda: ran.append(1), 5.0)
    assert ran == []  # refused, not queued behind the stuck call
    release.set()
    deadline = time.monotonic() + 5.0
    while call.stuck_for() is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert call.stuck_for() is None
    assert call(lambda: "again", 5.0) == "again"


def test_an_idle_thread_ends_and_a_later_call_starts_another() -> None:
    call = BoundedCall("t-idle", idle_s=0.05)
    first = call(threading.get_ident, 5.0)
    deadline = time.monotonic() + 5.0
    while any(t.ident == first for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(t.ident == first for t in threading.enumerate())
    assert call(lambda: "fresh", 5.0) == "fresh"


def test_calls_racing_the_idle_end_are_all_served() -> None:
    call = BoundedCall("t-race", idle_s=0.001)
    for _ in range(200):
        assert call(lambda: 1, 5.0) == 1
        time.sleep(0.001)
