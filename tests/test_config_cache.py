"""A monitor's ConfigCache: a config is reused only while nothing it was built from changed.

Edits to the site file (even same-size ones that put the old file times back), the
``GPU_PREFLIGHT_`` environment, the overrides and the Xid policy file all apply at the next
resolve; a config that does not build raises at every resolve, never a kept config.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import msgspec
import pytest

from gpu_preflight import engine
from gpu_preflight.config import ConfigError
from gpu_preflight.config.xid_policy import SHIPPED_POLICY
from gpu_preflight.engine import CONFIG_CACHE, ConfigCache, RunOptions, _resolve_config

OLD = time.time() - 3600.0


@pytest.fixture(autouse=True)
def settled_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files count as settled as soon as written (the test of the settling time sets its own)."""
    monkeypatch.setattr(engine, "SETTLED_S", 0.0)


def write(path: Path, text: str) -> None:
    """Write as an editor would, a clock tick after the last write, putting back the old file
    times (as ``cp -p`` or a restored backup does): the change time still moves."""
    time.sleep(0.03)
    path.write_text(text)
    os.utime(path, (OLD, OLD))


def ticks(options: RunOptions) -> int:
    return _resolve_config(options, None)[0].gpu.nvml_settings_refresh_ticks


@pytest.fixture
def site(tmp_path: Path) -> Path:
    path = tmp_path / "site.toml"
    write(path, "[gpu]\nnvml_settings_refresh_ticks = 5\n")
    return path


def options(site: Path, cache: ConfigCache, **kw: object) -> RunOptions:
    return RunOptions(config_file=str(site), environ=kw.pop("environ", {}),  # type: ignore[arg-type]
                      state={CONFIG_CACHE: cache}, **kw)  # type: ignore[arg-type]


def test_an_unchanged_config_is_reused(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = ConfigCache()
    opts = options(site, cache)
    first, sources = _resolve_config(opts, None)
    again, sources_again = _resolve_config(opts, None)
    assert again is first and sources_again == sources == ["defaults", str(site)]
    monkeypatch.setattr(os, "stat", lambda *_a, **_k: (_ for _ in ()).throw(OSError("gone")))
    assert _resolve_config(opts, None)[0] is not first  # an unreadable file is read (and reported) anew


def test_edits_apply_at_the_next_resolve(site: Path) -> None:
    cache = ConfigCache()
    environ: dict[str, str] = {}
    opts = options(site, cache, environ=environ)
    assert ticks(opts) == 5
    write(site, "[gpu]\nnvml_settings_refresh_ticks = 7\n")  # same size, same (old) times: ctime moved
    assert ticks(opts) == 7
    environ["GPU_PREFLIGHT_GPU__NVML_SETTINGS_REFRESH_TICKS"] = "9"
    assert ticks(opts) == 9
    opts = msgspec.structs.replace(opts, overrides=("gpu.nvml_settings_refresh_ticks=3",))  # the request is frozen
    assert ticks(opts) == 3
    other = site.with_name("other.toml")
    write(other, "[gpu]\nnvml_settings_refresh_ticks = 2\n")
    other.replace(site)  # an editor that saves by rename: a new inode
    opts = msgspec.structs.replace(opts, overrides=())
    environ.clear()
    assert ticks(opts) == 2


def test_a_broken_config_raises_at_every_resolve_and_its_fix_applies(site: Path) -> None:
    cache = ConfigCache()
    opts = options(site, cache)
    assert ticks(opts) == 5
    write(site, "[gpu]\nnvml_settings_refresh_ticks = 0\n")
    for _ in range(3):
        with pytest.raises(ConfigError):
            ticks(opts)
    write(site, "[gpu]\nnvml_settings_refresh_ticks = 8\n")
    assert ticks(opts) == 8
    site.unlink()
    with pytest.raises(ConfigError):
        ticks(opts)


def test_an_edited_xid_policy_file_is_read_again(site: Path, tmp_path: Path) -> None:
    policy = tmp_path / "xid.toml"
    write(policy, SHIPPED_POLICY.read_text())
    write(site, f"[xid]\npolicy_file = {str(policy)!r}\n")
    cache = ConfigCache()
    opts = options(site, cache)
    first = _resolve_config(opts, None)[0]
    assert _resolve_config(opts, None)[0] is first
    write(policy, "this is [not toml\n")
    for _ in range(2):
        with pytest.raises(ConfigError, match="xid"):
            _resolve_config(opts, None)
    policy.unlink()
    with pytest.raises(ConfigError, match="cannot read Xid policy"):
        _resolve_config(opts, None)


def test_no_cache_without_a_monitor(site: Path) -> None:
    opts = RunOptions(config_file=str(site), environ={})
    assert _resolve_config(opts, None)[0] is not _resolve_config(opts, None)[0]


def test_a_file_changed_within_the_settling_time_is_read_at_every_use(
        site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two same-size edits within one file-time tick leave the same stamp: such a file is never kept."""
    monkeypatch.setattr(engine, "SETTLED_S", 60.0)
    cache = ConfigCache()
    opts = options(site, cache)
    assert _resolve_config(opts, None)[0] is not _resolve_config(opts, None)[0]
    for value in (6, 4, 7):
        site.write_text(f"[gpu]\nnvml_settings_refresh_ticks = {value}\n")  # no pause: maybe one tick
        assert ticks(opts) == value


def test_a_live_monitor_reports_a_broken_site_file_at_every_tick_and_its_fix_at_the_next(site: Path) -> None:
    from gpu_preflight.server.monitor import Monitor

    monitor = Monitor(RunOptions(config_file=str(site), environ={}, probe_timeout_s=20.0), 1.0)
    try:
        assert isinstance(monitor.options.state, dict) and isinstance(monitor.options.state[CONFIG_CACHE], ConfigCache)
        first = monitor.tick()
        assert first.error is None and first.report is not None
        write(site, "[gpu]\nnvml_settings_refresh_ticks = 0\n")
        for _ in range(2):
            snap = monitor.tick()
            assert snap.report is None and snap.error is not None and "ConfigError" in snap.error
        write(site, "[gpu]\nnvml_settings_refresh_ticks = 6\n")
        fixed = monitor.tick()
        assert fixed.error is None and fixed.report is not None
    finally:
        monitor.stop()
