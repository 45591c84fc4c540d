"""A node run's probes run one after another, and a probe that waits lets the others go on.

Run side by side, the probes traded the GIL at every ctypes call and cost a node check CPU
for nothing; in turn, a probe that waits (a tool, a sampling window, a stalled NVML call)
would hold up those behind it. So: one lane, the probes declared ``waits`` first, and each
wait said (:func:`gpu_preflight.waiting.waiting`) hands the queue to another thread at once.
Each test here has a counterpart that shows the behaviour is not an accident of timing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight import Status, engine, registry, run_checks
from gpu_preflight.backends.commands import run_tool
from gpu_preflight.backends.system import read_system
from gpu_preflight.model import Finding
from gpu_preflight.registry import CheckContext, ProbeContext, check, probe
from gpu_preflight.waiting import reported_to, waiting

from .test_node_live import node_env

Probe = tuple[str, float, float, int]  # name, started, ended (monotonic), thread


@pytest.fixture
def lane(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Probe]]:
    """Four probes that note when and where they ran, under a hand-over time long enough that
    only a said wait (or the end of a probe) starts the next one."""
    monkeypatch.setattr(engine, "HANDOVER_S", 5.0)
    seen: list[Probe] = []

    def noted(name: str, body: Any) -> Any:
        def run(ctx: ProbeContext) -> str:
            t0 = time.monotonic()
            body()
            seen.append((name, t0, time.monotonic(), threading.get_ident()))
            return name
        return run

    def busy() -> None:
        end = time.monotonic() + 0.05
        while time.monotonic() < end:
            pass

    def says_it_waits() -> None:
        waiting()
        time.sleep(0.3)

    with registry.CHECKS.scoped(), registry.PROBES.scoped():
        probe("lane_a")(noted("lane_a", busy))
        probe("lane_b")(noted("lane_b", busy))
        probe("lane_0_quiet")(noted("lane_0_quiet", lambda: time.sleep(0.6)))  # waits without saying so
        probe("lane_z_waits", waits=True)(noted("lane_z_waits", says_it_waits))
        for name in ("lane_a", "lane_b", "lane_0_quiet", "lane_z_waits"):
            check(f"test.{name}", needs=(name,))(_passing(f"test.{name}"))
        yield seen


def _passing(check_id: str) -> Any:
    def judged(ctx: CheckContext) -> list[Finding]:
        """Passes once its probe answered."""
        return [Finding(check_id, Status.PASS, ctx.host, "ok", "fine")]
    return judged


def _run(*names: str) -> Any:
    node = run_checks(include=[f"test.{n}" for n in names], timeout_s=10.0, environ={})
    assert all(f.status is Status.PASS for f in node.findings), node.findings
    return node


def test_a_one_shot_run_reads_its_probes_one_at_a_time(lane: list[Probe]) -> None:
    _run("lane_a", "lane_b")
    (a, _, a1, a_thread), (b, b0, _, b_thread) = sorted(lane, key=lambda p: p[1])
    assert (a, b) == ("lane_a", "lane_b")
    assert b0 >= a1 and a_thread == b_thread  # in turn, on one thread: no GIL traded between them


def test_a_probe_that_says_it_waits_lets_the_queue_go_on(lane: list[Probe]) -> None:
    t0 = time.monotonic()
    _run("lane_z_waits", "lane_a")
    started = {name: begun - t0 for name, begun, _, _ in lane}
    assert started["lane_z_waits"] < started["lane_a"] < 0.2, started  # declared waits: first; said: not waited for
    assert {thread for *_, thread in lane} != {lane[0][3]}  # the queue went on on another thread


def test_a_probe_that_waits_without_saying_so_holds_the_queue(lane: list[Probe]) -> None:
    """The counterpart: the hand-over time (5 s here) is all that would move the queue on."""
    t0 = time.monotonic()
    _run("lane_0_quiet", "lane_a")
    started = {name: begun - t0 for name, begun, _, _ in lane}
    assert started["lane_a"] >= 0.6, started


def test_the_lane_that_handed_over_stops_when_its_probe_ends(lane: list[Probe]) -> None:
    """One lane takes the queue at a time: the waiting probe's lane, free again at 0.3 s, does
    not start the next probe beside the one the new lane is still running (to 0.6 s)."""
    t0 = time.monotonic()
    _run("lane_z_waits", "lane_0_quiet", "lane_a")
    by_name = {name: (begun - t0, ended - t0, thread) for name, begun, ended, thread in lane}
    assert by_name["lane_a"][0] >= by_name["lane_0_quiet"][1], by_name
    assert by_name["lane_a"][2] == by_name["lane_0_quiet"][2] != by_name["lane_z_waits"][2]


def test_waits_is_declared_by_the_probes_that_run_tools_or_sample() -> None:
    registry.discover("node")
    waits = sorted(name for name, spec in registry.PROBES.items() if spec.waits)
    assert waits == ["dcgm", "fabric", "infiniband", "nccl_tests", "pcie", "system"]


def test_waiting_calls_only_this_threads_hook_and_restores_the_outer_one() -> None:
    waiting()  # nobody asked: nothing happens
    calls: list[str] = []
    with reported_to(lambda: calls.append("outer")):
        with reported_to(lambda: calls.append("inner")):
            waiting()
            other = threading.Thread(target=waiting)
            other.start()
            other.join()
        waiting()
    waiting()
    assert calls == ["inner", "outer"]


def test_running_a_tool_says_it_waits(tmp_path: Path) -> None:
    calls: list[str] = []
    with reported_to(lambda: calls.append("tool")):
        assert run_tool(["true"], 5.0).rc == 0
        assert calls == ["tool"]
        assert run_tool([str(tmp_path / "no-such-tool")], 5.0).missing
    assert calls == ["tool"]  # a missing tool is not waited for


def test_the_cpu_sampling_window_says_it_waits() -> None:
    calls: list[str] = []
    with reported_to(lambda: calls.append("sample")):
        read_system([])
    assert calls == ["sample"]


STALL = """
import json, sys
from gpu_preflight.backends.nvml import collect
from gpu_preflight.waiting import reported_to
said = []
with reported_to(lambda: said.append(1)):
    dump = collect(device_timeout_s=30, call_timeout_s=5)
print(json.dumps({"said": len(said), "read": sum("field_values" in d for d in dump["devices"])}), flush=True)
"""


@pytest.mark.parametrize(("slow", "says"), [("", False), ("2:nvmlDeviceGetTemperature:0.3", True)])
def test_a_stalled_nvml_call_says_it_waits(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any],
                                           slow: str, says: bool) -> None:
    env = node_env(stub_lib, tmp_path, h200_dump, **({"FAKE_NVML_SLOW": slow} if slow else {}))
    proc = subprocess.run([sys.executable, "-c", STALL], env=env, capture_output=True, text=True, timeout=60)
    out = json.loads(proc.stdout)
    assert out["read"] == 8 and (out["said"] > 0) is says, out
