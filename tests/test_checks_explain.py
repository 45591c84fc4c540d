"""``checks explain``: the thresholds a check's documentation names, with the values a run would
use; near misses for an unknown id; help text on every option."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from gpu_preflight.cli.main import build_parser, main
from gpu_preflight.config import Config
from gpu_preflight.config.references import format_value, named_settings
from gpu_preflight.config.schema import SECTIONS
from gpu_preflight.registry import all_checks


def explain(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["checks", "explain", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_thresholds_with_their_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = explain(capsys, "gpu.thermal")
    assert code == 0 and err == ""
    assert "Thresholds (current values from: defaults):" in out
    assert re.search(r"^  gpu\.temp_margin_c   = 5 C$", out, re.M)  # names aligned on the longest
    assert re.search(r"^  gpu\.temp_warn_c     = \(unset\)$", out, re.M)
    assert "within this many degrees" in out  # each setting's meaning, from its field


def test_values_follow_set_config_and_profile(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text("[system]\nshm_fail_mib = 512\n")
    code, out, _ = explain(capsys, "system.shm", "--config", str(site), "--set", "system.shm_warn_mib=2048")
    assert code == 0
    assert "  system.shm_fail_mib = 512 MiB  (default: 256 MiB)" in out
    assert "  system.shm_warn_mib = 2048 MiB  (default: 1024 MiB)" in out
    assert f"current values from: defaults, {site}, command line" in out
    code, out, _ = explain(capsys, "load.clocks", "--profile", "h100-sxm")
    assert code == 0 and "  load.expected_gemm_sm_mhz     = 1300 MHz  (default: unset)" in out


def test_environment_counts_too(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_PREFLIGHT_GPU__TEMP_MARGIN_C", "9")
    code, out, _ = explain(capsys, "gpu.thermal")
    assert code == 0 and "  gpu.temp_margin_c   = 9 C  (default: 5 C)" in out and "environment" in out


@pytest.mark.parametrize(("wanted", "suggested"), [
    ("gpu.themal", "did you mean gpu.thermal"),
    ("gpu.ecc", "did you mean gpu.ecc.errors, gpu.ecc.mode?"),
    ("sytem.shm", "did you mean system.shm"),
])
def test_unknown_id_suggests_and_exits_3(capsys: pytest.CaptureFixture[str], wanted: str, suggested: str) -> None:
    code, out, err = explain(capsys, wanted)
    assert code == 3 and out == ""
    assert err.startswith(f"gpu-preflight: no check {wanted!r}; {suggested}") and err.count("\n") == 1


def test_nothing_close_names_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = explain(capsys, "zzz")
    assert code == 3 and err == "gpu-preflight: no check 'zzz' ('gpu-preflight checks list' lists every check)\n"


def test_bad_override_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = explain(capsys, "gpu.thermal", "--set", "gpu.nope=1")
    assert code == 3 and "configuration error" in err


def test_every_setting_a_check_names_exists() -> None:
    """A ``section.key`` in a check's docs that is neither a setting nor a check id is a stale name."""
    checks = {c.id for c in all_checks()}
    config = Config()
    for spec in all_checks():
        found = {n.name for n in named_settings(spec.doc, config)}
        for section, key in re.findall(r"``([a-z][a-z0-9_]*)\.([a-z][a-z0-9_.]*)``", spec.doc):
            name = f"{section}.{key}"
            if section in SECTIONS or hasattr(config, section):
                assert name in found or name in checks, f"{spec.id} names {name}: no such setting or check"


@pytest.mark.parametrize(("value", "unit", "text"), [
    (None, "C", "(unset)"), (True, None, "true"), (0.05, "ratio", "0.05 ratio"), (256, "MiB", "256 MiB"),
    ("a b", None, '"a b"'), ({"79": "FAIL"}, None, '{ "79" = "FAIL" }'), (["H100", "H200"], None, '["H100", "H200"]'),
])
def test_format_value(value: object, unit: str | None, text: str) -> None:
    assert format_value(value, unit) == text


def _actions(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions(sub, (*path, name))
        elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            yield path, action


def test_options_have_help() -> None:
    missing = [f"{' '.join(path)} {'/'.join(a.option_strings) or a.dest}" for path, a in _actions(build_parser())
               if not a.help and path[0] not in ("history", "baseline")]
    assert missing == []
    named = {(path, tuple(a.option_strings) or a.dest): a.help for path, a in _actions(build_parser())}
    render = ("report", "render")
    for key in [(("snapshot",), ("--timeout-s",)), (render, "path"), (render, ("--format",)),
                (render, ("--verbose", "-v")), (("checks", "explain"), "id"), (("history", "runs"), ("--last",))]:
        assert named[key], key
