"""The ``[localize]`` config section: shown by ``config defaults``, set by a site file, turned into
the pure localiser's plain settings with the GPU or the CPU values."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from gpu_preflight.config import ConfigError, build_config
from gpu_preflight.config.fields import setting_fields
from gpu_preflight.config.localize import LocalizeSettings, localize_settings
from gpu_preflight.distributed.localize_rounds import on_cpu
from gpu_preflight.localize.model import LocalizeConfig
from gpu_preflight.localize.settings import localize_config
from gpu_preflight.localize.simulate import Scenario, simulate

from .conftest import REPO


def test_gpu_defaults_are_the_localisers_own() -> None:
    """The section's GPU values and the pure model's defaults cannot drift apart."""
    assert localize_config() == LocalizeConfig()


def test_cpu_values_replace_the_three_judging_settings() -> None:
    gpu, cpu = localize_config(), localize_config(cpu=True)
    changed = {f.name for f in msgspec.structs.fields(LocalizeConfig) if getattr(gpu, f.name) != getattr(cpu, f.name)}
    assert changed == {"slow_fraction", "assumed_noise", "latency_factor"}
    assert (cpu.slow_fraction, cpu.assumed_noise, cpu.latency_factor) == (0.5, 0.3, 4.0)
    assert on_cpu(LocalizeConfig()) == cpu


def test_run_values_and_k_of_n() -> None:
    s = LocalizeSettings(repeat_k=3, clear_after=2)
    c = localize_config(s, mode="full", floor_gbps=5.0, test_timeout_s=12.0)
    assert (c.mode, c.floor_gbps, c.test_timeout_s, c.repeat_k, c.repeat_n, c.clear_after) == (
        "full", 5.0, 12.0, 3, 4, 2)


def test_a_site_file_sets_them(tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text("[localize]\nslow_fraction_cpu = 0.9\nmax_extra_rounds = 3\npairing = 'random'\n")
    config, _ = build_config(config_file=site, environ={})
    s = localize_settings(config)
    assert (s.slow_fraction_cpu, s.max_extra_rounds, s.pairing, s.slow_fraction_gpu) == (0.9, 3, "random", 0.25)
    with pytest.raises(ConfigError, match=r"localize\.pairing"):
        build_config(environ={}, overrides=["localize.pairing=pairs"])


def test_the_settings_change_the_verdict() -> None:
    """A node at 20 % of its peers' speed is excluded on CPU workers with the defaults (slow below a
    quarter), and not when the site says only a tenth of the typical speed is slow."""
    sc = Scenario(6, slow={4: 0.2}, noise=0.05)
    assert simulate(sc, localize_config(cpu=True)).outcome.excluded == [4]
    lenient = localize_config(LocalizeSettings(slow_fraction_cpu=0.9), cpu=True)
    assert simulate(sc, lenient).outcome.excluded == []


def test_config_defaults_shows_the_section() -> None:
    out = subprocess.run([sys.executable, "-m", "gpu_preflight", "config", "defaults", "--format", "json"],
                         capture_output=True, text=True, timeout=60, cwd=REPO, check=True)
    section = json.loads(out.stdout)["localize"]
    assert {f.name for f in setting_fields(LocalizeSettings)} == set(section)
    assert section["slow_fraction_cpu"]["default"] == 0.5 and section["assumed_noise_gpu"]["default"] == 0.1
