"""Configuration: layering, validation with precise locations, profiles, defaults."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from gpu_preflight.config import ConfigError, build_config, find_profile, match_profile, shipped_profiles
from gpu_preflight.config.describe import defaults_json, defaults_toml
from gpu_preflight.config.loader import read_file
from gpu_preflight.config.schema import Config


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_defaults_without_layers() -> None:
    config, sources = build_config(environ={})
    assert config == Config()
    assert sources == ["defaults"]


def test_layer_order_profile_site_env_cli(tmp_path: Path) -> None:
    site = write(tmp_path, "site.toml", "[gpu]\ntemp_margin_c = 7\npcie_replay_warn = 5\n")
    profile = find_profile("h100-sxm")
    config, sources = build_config(
        profile=profile, config_file=site,
        environ={"GPU_PREFLIGHT_GPU__PCIE_REPLAY_WARN": "9", "GPU_PREFLIGHT_SYSTEM__NOFILE_MIN": "10"},
        overrides=["gpu.temp_margin_c=3"],
    )
    assert config.gpu.nvlink_expected_links == 18          # profile
    assert config.gpu.pcie_replay_warn == 9                # env beats site
    assert config.gpu.temp_margin_c == 3.0                 # CLI beats site
    assert config.system.nofile_min == 10
    assert sources[0] == "defaults" and sources[-1] == "command line" and "environment" in sources


def test_yaml_site_file(tmp_path: Path) -> None:
    site = write(tmp_path, "site.yaml", "gpu:\n  expected_count: 8\n  allowed_compute_modes: [default]\n")
    config, _ = build_config(config_file=site, environ={})
    assert config.gpu.expected_count == 8
    assert config.gpu.allowed_compute_modes == ["default"]


@pytest.mark.parametrize(
    ("name", "text", "key", "line", "fragment"),
    [
        ("bad.toml", "[gpu]\nexpected_count = 8\ntemp_margn_c = 3\n", "gpu.temp_margn_c", 3,
         "did you mean 'temp_margin_c'"),
        ("bad.toml", "[gpu]\n\nexpected_count = \"eight\"\n", "gpu.expected_count", 3, "expected an integer"),
        ("bad.toml", "[gpus]\nexpected_count = 8\n", "gpus", 1, "unknown section"),
        ("bad.toml", "[gpu]\nmig_mode = \"maybe\"\n", "gpu.mig_mode", 2, "expected one of"),
        ("bad.yaml", "gpu:\n  ecc_mode: enabled\n  expect_persistence_mode: 3\n", "gpu.expect_persistence_mode", 3,
         "expected true or false"),
        ("bad.yaml", "system:\n  disk_paths: /data\n", "system.disk_paths", 2, "expected a list"),
    ],
)
def test_invalid_values_name_file_key_and_line(tmp_path: Path, name: str, text: str, key: str, line: int,
                                               fragment: str) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(ConfigError) as info:
        read_file(path)
    err = info.value
    assert err.source == str(path) and err.key == key and err.line == line
    assert fragment in str(err) and f"{path}:{line}" in str(err)


@pytest.mark.parametrize(("name", "text", "line"), [("broken.toml", "[gpu\nx=1\n", 1),
                                                    ("broken.yaml", "gpu:\n  a: [1,\n", 3)])
def test_syntax_errors_have_lines(tmp_path: Path, name: str, text: str, line: int) -> None:
    with pytest.raises(ConfigError) as info:
        read_file(write(tmp_path, name, text))
    assert info.value.line == line


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        read_file(tmp_path / "absent.toml")


def test_bad_environment_and_override_values() -> None:
    with pytest.raises(ConfigError, match=r"environment: gpu\.expected_count"):
        build_config(environ={"GPU_PREFLIGHT_GPU__EXPECTED_COUNT": "many"})
    with pytest.raises(ConfigError, match=r"SECTION\.KEY=VALUE"):
        build_config(environ={}, overrides=["expected_count=3"])


@pytest.mark.parametrize(
    ("gpu_name", "profile"),
    [("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA H100 PCIe", "h100-pcie"), ("NVIDIA H100 NVL", "h100-pcie"),
     ("NVIDIA H200", "h200"), ("NVIDIA A100-SXM4-40GB", "a100-40gb"), ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
     ("NVIDIA A100 80GB PCIe", "a100-80gb"), ("NVIDIA A10G", "a10g"), ("NVIDIA L40S", "l40s"),
     ("NVIDIA B200", "b200")],
)
def test_profiles_match_nvml_names(gpu_name: str, profile: str) -> None:
    matched = match_profile([gpu_name])
    assert matched is not None and matched.name == profile


def test_unknown_gpu_has_no_profile() -> None:
    assert match_profile(["NVIDIA GeForce RTX 4090"]) is None


def test_every_shipped_profile_is_valid_and_distinct() -> None:
    names = [p.name for p in shipped_profiles()]
    assert len(names) == len(set(names)) >= 8
    for profile in shipped_profiles():
        config, _ = build_config(profile=profile, environ={})
        assert config.gpu.pcie_expected_gen in (4, 5)


def test_unknown_profile_name() -> None:
    with pytest.raises(ConfigError, match="unknown profile 'h999'"):
        find_profile("h999")


def test_site_profile_file(tmp_path: Path) -> None:
    path = write(tmp_path, "mine.toml", "[profile]\nname = \"mine\"\nmatch = ['X1']\n[gpu]\nexpected_count = 4\n")
    profile = find_profile(str(path))
    assert profile.name == "mine" and profile.match_length("NVIDIA X1") == 2
    bad = write(tmp_path, "bad.toml", "[profile]\nname = \"bad\"\nmatch = ['(']\n")
    with pytest.raises(ConfigError, match="bad regular expression"):
        find_profile(str(bad))


def test_defaults_document_every_field_and_round_trip() -> None:
    described = defaults_json()
    for section in described.values():
        for name, meta in section.items():
            assert meta["doc"], f"{name} has no documentation"
    text = defaults_toml()
    parsed = tomllib.loads(text)
    assert parsed["gpu"]["temp_margin_c"] == 5.0
    assert "expected_count" not in parsed["gpu"]  # unset values are commented out
    config, _ = build_config(environ={}, config_file=None)
    site = {s: v for s, v in parsed.items()}
    assert site["system"]["disk_paths"] == config.system.disk_paths
