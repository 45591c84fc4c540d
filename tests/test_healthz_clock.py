"""``/healthz`` measures the agent's silence on the monotonic clock: a wall clock that jumps is no verdict.

Before, liveness compared the agent's last progress (its Unix time) with ``time.time()``
at each request, so for up to one sampling period after the wall clock stepped forward
(NTP, a VM resumed) a live agent answered 503, and a kubelet could restart a healthy
pod. The clocks are stepped here, never slept on.
"""

from __future__ import annotations

import http.client
import time

import pytest

from gpu_preflight.server import create_gpu_healthcheck_server
from gpu_preflight.server.monitor import AliveSampler
from gpu_preflight.server.state import AliveSample, liveness

TIMEOUT_S = 5.0


class Clocks:
    """A wall clock and a monotonic clock a test steps by hand."""

    def __init__(self) -> None:
        self.wall, self.mono = 1_700_000_000.0, 500.0

    def step(self, seconds: float, *, wall_jump: float = 0.0) -> None:
        self.mono += seconds
        self.wall += seconds + wall_jump


def alive(sample: AliveSample, clocks: Clocks) -> tuple[bool, list[str]]:
    return liveness(sample, now_mono=clocks.mono, timeout_s=TIMEOUT_S, sampler_alive=True, loop_alive=True,
                    loop_busy_for=None, tick_deadline_s=3.0)


def sampler(clocks: Clocks, progress: list[float]) -> AliveSampler:
    return AliveSampler(lambda: progress[0], 1.0, clock=lambda: clocks.wall, monotonic=lambda: clocks.mono)


@pytest.mark.parametrize("jump", [3600.0, -3600.0, 86400.0 * 365])
def test_a_wall_clock_jump_neither_kills_a_live_agent_nor_revives_a_silent_one(jump: float) -> None:
    clocks = Clocks()
    progress = [clocks.wall]
    s = sampler(clocks, progress)
    s.sample_once()
    clocks.step(0.5, wall_jump=jump)  # the jump lands between two samples
    assert alive(s.sample, clocks)[0], alive(s.sample, clocks)
    s.sample_once()  # the agent made no progress: the same value, whatever the wall clock says now
    assert alive(s.sample, clocks)[0]
    progress[0] = clocks.wall  # progress, dated by the jumped clock
    clocks.step(0.5)
    s.sample_once()
    assert alive(s.sample, clocks)[0]
    clocks.step(TIMEOUT_S + 0.1)  # then silence, measured on the monotonic clock
    s.sample_once()
    ok, reasons = alive(s.sample, clocks)
    assert not ok and reasons[0].startswith("no progress for 5.") and "timeout 5 s" in reasons[0]


def test_new_progress_is_dated_within_the_time_since_the_last_sample() -> None:
    clocks = Clocks()
    progress = [clocks.wall - 2.0]  # the first value is taken at its word: two seconds ago
    s = sampler(clocks, progress)
    assert s.sample_once().progress_mono == pytest.approx(clocks.mono - 2.0)
    clocks.step(1.0, wall_jump=-1000.0)  # a clock stepped back makes progress look 1000 s in the future
    progress[0] = clocks.wall - 0.25
    assert s.sample_once().progress_mono == pytest.approx(clocks.mono - 0.25)
    clocks.step(1.0, wall_jump=1000.0)  # stepped forward: 1000 s old by the wall, but made since the last sample
    progress[0] = clocks.wall - 1000.0
    assert s.sample_once().progress_mono == pytest.approx(clocks.mono - 1.0)


def test_a_failed_sample_keeps_the_last_progress_time() -> None:
    clocks = Clocks()
    progress = [clocks.wall]
    s = sampler(clocks, progress)
    made = s.sample_once().progress_mono
    s.callback = lambda: "not a number"  # type: ignore[assignment,return-value]
    clocks.step(1.0)
    failed = s.sample_once()
    assert failed.error and failed.progress_mono == made and not alive(failed, clocks)[0]


def test_the_server_answers_200_after_the_wall_clock_jumps_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real server and sampler: the agent's progress is fresh, then the wall clock jumps an hour."""
    started = time.time()
    server = create_gpu_healthcheck_server(lambda: started, 0, 30, enable_gpu_monitoring=False)
    server.start()
    try:
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + 3600.0)
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("GET", "/healthz")
        response = conn.getresponse()
        body = response.read()
        conn.close()
        assert response.status == 200, body
    finally:
        server.stop()
