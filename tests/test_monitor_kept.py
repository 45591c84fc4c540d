"""What a monitor keeps between ticks besides NVML: the NCCL plugin search, the fabric
environment, the CPU counters and the disks' mount points — each still seeing a change."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpu_preflight.backends import procfs, system
from gpu_preflight.backends.fabric import FabricCache, fabric_environment, find_ofi_plugin
from gpu_preflight.backends.system import HOST_SAMPLER, HostSampler, read_system
from gpu_preflight.config import build_config
from gpu_preflight.model import NA
from gpu_preflight.probes.system import system_probe

from .diag_tools import context_from


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_plugin_search_is_kept_for_the_refresh_period(tmp_path: Path) -> None:
    clock = Clock()
    cache = FabricCache(300.0, clock)
    env = {"LD_LIBRARY_PATH": str(tmp_path)}
    first = cache.plugin([], env)
    assert first == find_ofi_plugin([], env) and not first.installed
    (tmp_path / "libnccl-net.so").write_bytes(b"")
    clock.now += 299.0
    assert not cache.plugin([], env).installed and cache.searches == 1  # kept: installed meanwhile
    clock.now += 1.0
    found = cache.plugin([], env)
    assert found.installed and found.path == str(tmp_path / "libnccl-net.so") and cache.searches == 2
    found.searched.append("edited by a caller")
    assert cache.plugin([], env) == find_ofi_plugin([], env)  # each caller gets its own copy


def test_the_plugin_is_looked_for_again_when_its_inputs_change(tmp_path: Path) -> None:
    cache = FabricCache(300.0, Clock())
    (tmp_path / "libnccl-net-ofi.so").write_bytes(b"")
    env = {"LD_LIBRARY_PATH": str(tmp_path)}
    assert cache.plugin([], env).path == str(tmp_path / "libnccl-net-ofi.so")
    env["NCCL_NET_PLUGIN"] = "none"
    assert not cache.plugin([], env).installed
    del env["NCCL_NET_PLUGIN"]
    env["LD_LIBRARY_PATH"] = "/nonexistent"
    assert not cache.plugin([], env).installed
    assert cache.plugin([str(tmp_path)], env).installed  # other directories
    assert cache.searches == 4


def test_the_fabric_environment_is_redacted_again_only_when_it_changes() -> None:
    cache = FabricCache(300.0, Clock())
    env = {"FI_PROVIDER": "efa", "NCCL_SOCKET_IFNAME": "eth0", "UNRELATED": "x"}
    first = cache.environment(env)
    assert first == fabric_environment(env) == {"FI_PROVIDER": "efa", "NCCL_SOCKET_IFNAME": "eth0"}
    first["FI_PROVIDER"] = "edited"
    assert cache.environment(env)["FI_PROVIDER"] == "efa"
    env["FI_PROVIDER"] = "tcp"
    env["LD_LIBRARY_PATH"] = "https://user:hunter2@example.com/lib"
    assert cache.environment(env) == fabric_environment(env)
    assert "hunter2" not in str(cache.environment(env))


def test_a_monitor_measures_cpu_since_its_last_reading_without_sleeping(monkeypatch: pytest.MonkeyPatch) -> None:
    naps: list[float] = []
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        naps.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    sampler = HostSampler()
    first = read_system(["/"], processes=list, sampler=sampler)
    assert len(naps) == 1 and naps[0] > 0  # the first reading has no earlier one: a sample as in a one-shot run
    assert sampler.last is not None
    real_sleep(0.05)
    second = read_system(["/"], processes=list, sampler=sampler)
    assert len(naps) == 1  # the previous reading is 50 ms old: no sample to sleep through
    for facts in (first, second):
        assert isinstance(facts.cpu_percent, float) and 0.0 <= facts.cpu_percent <= 100.0
    assert read_system(["/"], processes=list).cpu_percent is not None  # a one-shot run: unchanged


def test_a_kept_cpu_reading_is_dropped_when_the_counters_cannot_be_read(monkeypatch: pytest.MonkeyPatch) -> None:
    sampler = HostSampler()
    read_system(["/"], processes=list, sampler=sampler)
    def unreadable() -> procfs.CpuTicks:
        raise OSError("no /proc/stat")

    monkeypatch.setattr(procfs, "cpu_ticks", unreadable)
    facts = read_system(["/"], processes=list, sampler=sampler)
    assert isinstance(facts.cpu_percent, NA) and "no /proc/stat" in facts.cpu_percent.reason
    assert sampler.last is None


def test_mount_points_are_kept_per_file_system_and_refreshed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    resolved: list[str] = []
    real = system._mountpoint

    def counted(path: str) -> str:
        resolved.append(path)
        return real(path)

    monkeypatch.setattr(system, "_mountpoint", counted)
    sampler = HostSampler()
    assert sampler.mountpoint(str(tmp_path)) == real(str(tmp_path))
    assert sampler.mountpoint(str(tmp_path)) == real(str(tmp_path))
    assert resolved == [str(tmp_path)]
    monkeypatch.setattr(system, "_device", lambda p: -1)
    sampler.mountpoint(str(tmp_path))  # another device under the path: something was mounted
    assert len(resolved) == 2
    monkeypatch.undo()
    stale = HostSampler(refresh_s=0.0)
    stale.mountpoint("/")
    stale.mountpoint("/")
    assert stale.mountpoint("/") == "/"


def test_the_system_probe_uses_a_monitors_sampler() -> None:
    sampler = HostSampler()
    ctx = context_from(build_config(environ={})[0], {HOST_SAMPLER: sampler}, 30.0)
    facts = system_probe(ctx)
    assert sampler.last is not None and facts.disks and facts.disks[0].mountpoint == "/"


def test_a_ticks_metrics_are_rendered_at_the_first_scrape_and_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_preflight.model import CheckResult, Finding, NodeReport, Status
    from gpu_preflight.server import metrics
    from gpu_preflight.server.state import Snapshot

    report = NodeReport(hostname="h", timestamp="t", results=[
        CheckResult("system.cpu", "CPU", [Finding("system.cpu", Status.WARN, "h", "busy", "busy")], 0.25)])
    rendered: list[int] = []
    real = metrics.tick_metrics

    def counted(*args: object) -> str:
        rendered.append(1)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(metrics, "tick_metrics", counted)
    snap = Snapshot(tick=7, finished_at=1700000000.5, finished_mono=10.0, duration_s=0.125, report=report,
                    error=None, gpu=None, runs_total=7, run_failures_total=2)
    assert rendered == []
    text = snap.metrics
    assert text == real(report, None, 7, 2, 0.125, 1700000000.5) and snap.metrics is text and rendered == [1]
    assert "gpu_preflight_runs_total 7\n" in text and "gpu_preflight_run_failures_total 2\n" in text
    assert 'gpu_preflight_check_status{check="system.cpu",status="warn"} 1' in text
