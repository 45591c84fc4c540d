"""``localize simulate`` takes its rules from the ``[localize]`` section; its flags override them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_preflight.cli.localize_cmd import main
from gpu_preflight.localize.model import LocalizeConfig

BASE = ["localize", "simulate", "--nodes", "16", "--bad", "1", "--quiet", "--format", "json"]


def simulate(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    main([*BASE, *extra])
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    return out


def config_of(*extra: str) -> LocalizeConfig:
    from gpu_preflight.cli.localize_cmd import simulated_config
    from gpu_preflight.cli.main import build_parser

    return simulated_config(build_parser("localize").parse_args([*BASE, *extra]))


def test_the_defaults_are_the_models() -> None:
    assert config_of() == LocalizeConfig()
    assert config_of("--mode", "full", "--rails", "2", "--floor-gbps", "5") == LocalizeConfig(
        mode="full", rails=2, floor_gbps=5.0)


def test_a_setting_changes_the_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    plain = simulate(capsys)
    stricter = simulate(capsys, "--set", "localize.repeat_k=4")
    assert config_of("--set", "localize.repeat_k=4").repeat_k == 4
    assert plain["found"] == stricter["found"] == ["node0003"]
    assert isinstance(plain["rounds"], int) and isinstance(stricter["rounds"], int)
    assert stricter["rounds"] > plain["rounds"]


def test_a_site_file_sets_the_rules(tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text("[localize]\nfail_ratio = 0.75\ncover_passes = 3\npairing = \"random\"\n")
    got = config_of("--config", str(site))
    assert (got.fail_ratio, got.cover_passes, got.pairing) == (0.75, 3, "random")


def test_a_flag_overrides_the_setting() -> None:
    assert config_of("--set", "localize.cover_passes=3", "--cover-passes", "2").cover_passes == 2
    assert config_of("--set", "localize.cover_passes=3").cover_passes == 3


def test_a_bad_setting_is_one_line_and_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--set", "localize.repeat_k=0"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "localize.repeat_k" in err


def test_checks_explain_shows_the_localize_settings_in_force(capsys: pytest.CaptureFixture[str]) -> None:
    from gpu_preflight.cli.main import main as cli
    from gpu_preflight.config.fields import setting_fields
    from gpu_preflight.config.localize import LocalizeSettings

    assert cli(["checks", "explain", "localize.suspect", "--set", "localize.repeat_k=3"]) == 0
    out = capsys.readouterr().out
    assert all(f"localize.{f.name} " in out for f in setting_fields(LocalizeSettings))
    assert [line.split("=")[1].split()[0] for line in out.splitlines() if "localize.repeat_k " in line] == ["3"]
