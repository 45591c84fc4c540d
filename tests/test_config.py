"""Configuration: layering, validation with precise locations, profiles, defaults."""

from __future__ import annotations

import math
import tomllib
import typing
from pathlib import Path

import pytest

from gpu_preflight.config import ConfigError, build_config, find_profile, match_profile, shipped_profiles
from gpu_preflight.config.describe import defaults_json, defaults_toml
from gpu_preflight.config.fields import ValueRange, setting_fields
from gpu_preflight.config.loader import field_range, read_file
from gpu_preflight.config.schema import SECTIONS, Config


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
    with pytest.raises(ConfigError, match=r"^GPU_PREFLIGHT_GPU__EXPECTED_COUNT=many: expected an integer"):
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


def numeric_fields() -> list[tuple[str, str, ValueRange, bool]]:
    """(section, key, range, is a table of numbers) for every numeric setting of every section."""
    out = []
    for section, cls in SECTIONS.items():
        hints = typing.get_type_hints(cls)
        for f in setting_fields(cls):
            bounds = field_range(f, hints[f.name])
            if bounds is not None:
                out.append((section, f.name, bounds, typing.get_origin(hints[f.name]) is dict))
    return out


def as_toml(value: float, integer: bool) -> str:
    if integer:
        return str(int(value))
    return repr(float(value)) if math.isfinite(value) else ("nan" if math.isnan(value) else "inf")


def test_every_numeric_setting_has_a_range_holding_its_default() -> None:
    found = numeric_fields()
    assert len(found) > 90  # every section's thresholds, timeouts and counts
    defaults = Config()
    for section, key, bounds, table in found:
        value = getattr(getattr(defaults, section), key)
        values = list(value.values()) if table else [value]
        for v in values:
            assert v is None or bounds.problem(v) is None, (section, key, v, bounds.describe())
        assert bounds.high < 1e15 and bounds.low >= 0, (section, key)


@pytest.mark.parametrize(("section", "key", "bounds", "table"), numeric_fields(),
                         ids=[f"{s}.{k}" for s, k, _, _ in numeric_fields()])
def test_every_numeric_setting_refuses_values_outside_its_range(section: str, key: str, bounds: ValueRange,
                                                                 table: bool) -> None:
    """At both bounds accepted; just outside, non-finite, negative and absurdly large refused."""
    def value(v: float) -> str:
        return f"{{x = {as_toml(v, bounds.integer)}}}" if table else as_toml(v, bounds.integer)

    step = 1 if bounds.integer else max(abs(bounds.high) * 1e-9, 1e-9)
    good = [bounds.high] + ([] if bounds.low_open else [bounds.low])
    if bounds.low_open:
        good.append(bounds.low + step)
    for v in good:
        build_config(environ={}, overrides=[f"{section}.{key}={value(v)}"])
    bad = [bounds.high + step, bounds.low if bounds.low_open else bounds.low - step, -1.0, 1e23]
    if not bounds.integer:
        bad += [math.nan, math.inf, -math.inf, 1e308]
    for v in bad:
        with pytest.raises(ConfigError) as info:
            build_config(environ={}, overrides=[f"{section}.{key}={value(v)}"])
        message = str(info.value)
        assert message.startswith(f"--set {section}.{key}=")
        expected = f"'x' must be {bounds.describe()}" if table else f"must be {bounds.describe()}"
        assert message.endswith(f": {expected}"), message


def test_range_error_names_the_source_and_the_range(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        build_config(environ={}, overrides=["gpu.temp_margin_c=nan"])
    assert str(info.value) == "--set gpu.temp_margin_c=nan: must be a finite number in [0, 50] °C"
    with pytest.raises(ConfigError) as info:
        build_config(environ={"GPU_PREFLIGHT_GPU__REMAPPED_UNCORRECTABLE_ROWS_WARN": "100000000000000000000000"})
    assert str(info.value) == ("GPU_PREFLIGHT_GPU__REMAPPED_UNCORRECTABLE_ROWS_WARN=100000000000000000000000: "
                               "must be a whole number in [0, 10000] rows")
    site = write(tmp_path, "site.toml", "[gpu]\nexpected_count = 8\n\n[system]\nshm_fail_mib = -inf\n")
    with pytest.raises(ConfigError) as info:
        build_config(environ={}, config_file=site)
    assert str(info.value) == f"{site}:5: system.shm_fail_mib: must be a finite number in [0, 67108864] MiB"
    yaml_site = write(tmp_path, "site.yaml", "slurm:\n  max_drain_fraction: .nan\n")
    with pytest.raises(ConfigError, match=r"site\.yaml:2: slurm\.max_drain_fraction: must be a finite number "
                                          r"in \[0, 1\] ratio$"):
        build_config(environ={}, config_file=yaml_site)
    profile = write(tmp_path, "mine.toml", "[profile]\nname = \"mine\"\n[perf]\ngemm_bf16_tflops = 0\n")
    with pytest.raises(ConfigError, match=r"mine\.toml\):4: perf\.gemm_bf16_tflops: must be a finite number "
                                          r"in \(0, 100000\] TFLOP/s"):
        find_profile(str(profile))
    with pytest.raises(ConfigError, match=r"^--set diagnostics\.ib_counters_warn_above=\{symbol_error = -1\}: "
                                          r"'symbol_error' must be a whole number"):
        build_config(environ={}, overrides=["diagnostics.ib_counters_warn_above={symbol_error = -1}"])
    with pytest.raises(ConfigError, match=r"^--set gpu\.temp_margin_c=10{56}\.\.\.: expected a number, "
                                          r"got an integer of 400 digits$"):
        build_config(environ={}, overrides=["gpu.temp_margin_c=1" + "0" * 399])


def test_defaults_print_the_ranges_the_loader_enforces() -> None:
    described = defaults_json()
    assert described["gpu"]["temp_margin_c"]["range"] == {
        "min": 0, "max": 50, "min_exclusive": False, "integer": False, "text": "a finite number in [0, 50] °C"}
    assert described["diagnostics"]["tool_timeout_s"]["range"]["text"] == "a finite number in (0, 3600] s"
    assert "range" not in described["gpu"]["mig_mode"]
    text = defaults_toml()
    assert "# valid: a finite number in [0, 50] °C\ntemp_margin_c = 5.0\n" in text
    assert "# valid: each value: a whole number in [0, 1000000000000]\nib_counters_fail_above" in text
    for section, key, _, _ in numeric_fields():
        assert "range" in described[section][key], (section, key)


def test_one_settings_type_is_what_get_type_hints_says() -> None:
    """The loader evaluates only the annotations a layer names; each must be the one
    typing.get_type_hints gives for the whole section."""
    import typing

    from gpu_preflight.config.loader import _hint
    from gpu_preflight.config.schema import SECTIONS

    for cls in SECTIONS.values():
        hints = typing.get_type_hints(cls)
        assert {name: _hint(cls, name) for name in hints} == hints, cls.__name__
    with pytest.raises(KeyError):
        _hint(next(iter(SECTIONS.values())), "no_such_setting")
