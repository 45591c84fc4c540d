"""Numeric flags, environment values and unusable inputs: one line and exit 3, never a silent default.

``type=float`` used to take ``nan``, ``inf``, ``-1`` and ``1e308`` for timeouts, intervals and
fractions (a check that never fires, a server that never answers); a garbage
``GPU_PREFLIGHT_TIMEOUT_S`` was ignored; a bad ``--host`` or a damaged history database ended
in a traceback.
"""

from __future__ import annotations

import argparse
import math
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gpu_preflight.cli import run_cmd
from gpu_preflight.cli.argtypes import count, env_number, fraction, host, number, port, seconds
from gpu_preflight.cli.main import build_parser, main
from gpu_preflight.config import ConfigError


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one stderr line of a command that must stop with exit 3 at argument parsing."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 3, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(("parse", "good", "bad"), [
    (seconds(), ["0.001", "5", "86400", " 30 "], ["0", "-1", "nan", "inf", "-inf", "1e308", "86400.001", "", "x"]),
    (seconds(3600), ["3600"], ["3600.5", "NaN"]),
    (fraction(), ["0", "1", "0.5"], ["-0.01", "1.01", "nan", "inf"]),
    (fraction(above=True), ["1", "1e-9"], ["0", "-0"]),
    (number(0, 10), ["0", "10"], ["10.0001", "-1e-12"]),
    (count(1, 100), ["1", "100", "007"], ["0", "101", "-1", "1.5", "1e2", "nan", "9" * 5000]),
    (port, ["0", "65535"], ["65536", "-1", "80.0"]),
])
def test_numeric_types_accept_their_range_only(parse: Callable[[str], float], good: list[str], bad: list[str]) -> None:
    for text in good:
        value = parse(text)
        assert math.isfinite(value)
    for text in bad:
        with pytest.raises(argparse.ArgumentTypeError, match=r"^must be a (finite|whole) number in [\[(]"):
            parse(text)


def test_host_type() -> None:
    for good, expected in [("", ""), ("0.0.0.0", "0.0.0.0"), ("::", "::"), ("[::1]", "::1"),
                           ("node-3.example.com", "node-3.example.com"), ("localhost.", "localhost.")]:
        assert host(good) == expected
    for bad in ["bad host!", "a\nb", "-lead", "trail-", "a..b", "host:80", "x" * 64, "h/x"]:
        with pytest.raises(argparse.ArgumentTypeError, match="must be an IP address or a host name"):
            host(bad)


@pytest.mark.parametrize(("argv", "fragment"), [
    (["run", "--timeout-s", "nan"], "argument --timeout-s: must be a finite number in (0, 86400] s, got 'nan'"),
    (["run", "--timeout-s", "-1"], "argument --timeout-s: must be a finite number in (0, 86400] s, got '-1'"),
    (["run", "--timeout-s", "inf"], "got 'inf'"),
    (["run", "--timeout-s", "1e308"], "got '1e308'"),
    (["run", "--expect-gpus", "-2"], "argument --expect-gpus: must be a whole number in [0, 256] GPUs"),
    (["snapshot", "--timeout-s", "0"], "argument --timeout-s: must be a finite number in (0, 3600] s"),
    (["serve", "--timeout", "inf"], "argument --timeout: must be a finite number in (0, 86400] s, got 'inf'"),
    (["serve", "--interval", "nan"], "argument --interval: must be a finite number"),
    (["serve", "--port", "70000"], "argument --port: must be a whole number in [0, 65535], got '70000'"),
    (["serve", "--max-connections", "0"], "argument --max-connections: must be a whole number in [1, 1024]"),
    (["serve", "--query", "--host", "bad host!"], "argument --host: must be an IP address or a host name"),
    (["history", "runs", "--last", "-1"], "argument --last: must be a whole number in [1, 1000000], got '-1'"),
    (["history", "prune", "--older-than-days", "nan"], "argument --older-than-days: must be a finite number"),
    (["baseline", "capture", "--from-history", "--fraction", "2"], "argument --fraction: must be a finite number "
                                                                   "in (0, 1], got '2'"),
    (["localize", "simulate", "--nodes", "1"], "argument --nodes: must be a whole number in [2, 1000000]"),
    (["localize", "simulate", "--nodes", "8", "--noise", "nan"], "argument --noise: must be a finite number"),
    (["localize", "simulate", "--nodes", "8", "--slow-factor", "0"], "argument --slow-factor"),
    (["slurm", "healthcheck", "--max-result-age-s", "-5"], "argument --max-result-age-s: must be a finite number"),
    (["k8s", "label", "r.json", "--max-taint-fraction", "inf"], "argument --max-taint-fraction"),
])
def test_bad_numeric_flags_are_one_line_and_exit_3(argv: list[str], fragment: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert fragment in usage_error(argv, capsys)


def test_timeout_from_the_environment_is_checked_and_used(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser("run").parse_args(["run", "--node-only"])
    monkeypatch.setenv("GPU_PREFLIGHT_TIMEOUT_S", "7.5")
    from_env = run_cmd.run_request(args).run
    assert (from_env.probe_timeout_s, from_env.collective_timeout_s) == (7.5, 7.5)  # the limits --timeout-s sets
    flagged = build_parser("run").parse_args(["run", "--timeout-s", "3"])
    from_flag = run_cmd.run_request(flagged).run  # the flag wins over the environment
    assert (from_flag.probe_timeout_s, from_flag.collective_timeout_s, from_flag.run_budget_s) == (3.0, 3.0, None)
    for raw in ("garbage", "nan", "-1", "inf", "0", "1e308"):
        monkeypatch.setenv("GPU_PREFLIGHT_TIMEOUT_S", raw)
        assert main(["run", "--node-only", "--no-history", "--check", "system.cpu"]) == 3
        err = capsys.readouterr().err
        assert err == (f"gpu-preflight: configuration error: GPU_PREFLIGHT_TIMEOUT_S={raw}: "
                       "must be a finite number in (0, 86400] s\n")


def test_env_number_unset_or_blank_is_none() -> None:
    assert env_number("X_T", seconds(), {}) is None
    assert env_number("X_T", seconds(), {"X_T": "  "}) is None
    assert env_number("X_T", seconds(), {"X_T": "2"}) == 2.0
    with pytest.raises(ConfigError, match=r"^X_T=-2: must be a finite number in \(0, 86400\] s$"):
        env_number("X_T", seconds(), {"X_T": "-2"})


def test_settings_out_of_range_exit_3_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--node-only", "--no-history", "--set", "gpu.temp_margin_c=nan"]) == 3
    assert capsys.readouterr().err == ("gpu-preflight: configuration error: --set gpu.temp_margin_c=nan: "
                                       "must be a finite number in [0, 50] °C\n")


def test_utf16_config_and_profile_are_named_not_a_traceback(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site.toml"
    site.write_bytes("[gpu]\ntemp_margin_c = 3\n".encode("utf-16"))
    profile = tmp_path / "mine.toml"
    profile.write_bytes('[profile]\nname = "mine"\n'.encode("utf-16"))
    assert main(["run", "--node-only", "--no-history", "--config", str(site)]) == 3
    assert capsys.readouterr().err == (f"gpu-preflight: configuration error: {site}: config file is UTF-16 text; "
                                       "save it as UTF-8\n")
    assert main(["run", "--node-only", "--no-history", "--profile", str(profile)]) == 3
    assert capsys.readouterr().err == (f"gpu-preflight: configuration error: {profile}: profile is UTF-16 text; "
                                       "save it as UTF-8\n")


def test_query_of_a_bad_host_is_no_answer_not_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    from gpu_preflight.cli.serve_cmd import EXIT_NO_ANSWER, query

    assert query("bad host!", 9470, 1.0) == EXIT_NO_ANSWER  # the library call, past the argparse type
    out = capsys.readouterr().out
    assert out.startswith("no answer from http://bad host!:9470/readyz: ") and out.count("\n") == 1


def damaged_history(tmp_path: Path) -> list[Path]:
    """A text file, random bytes behind a valid SQLite header, and a real history with its pages overwritten."""
    from gpu_preflight.history import HistoryStore

    text = tmp_path / "text.sqlite"
    text.write_text("not a database\n")
    header = tmp_path / "header.sqlite"
    header.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 16)
    real = tmp_path / "real.sqlite"
    HistoryStore(real).close()
    data = bytearray(real.read_bytes())
    data[100:] = b"\xa5" * (len(data) - 100)  # keep the file header, damage the schema and every table page
    real.write_bytes(bytes(data))
    return [text, header, real]


@pytest.mark.parametrize("command", [["history", "runs"], ["history", "trends"], ["history", "prune",
                                                                                   "--older-than-days", "1"],
                                     ["baseline", "capture", "--from-history"]])
def test_damaged_history_database_is_one_line_exit_3(tmp_path: Path, command: list[str],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    for db in damaged_history(tmp_path):
        assert main([*command, "--db", str(db)]) == 3
        err = capsys.readouterr().err
        assert err.startswith(f"gpu-preflight: history database {db}: ") and err.count("\n") == 1, err
        assert "damaged or not a gpu-preflight history" in err
        with pytest.raises(sqlite3.DatabaseError):  # the database really is unusable to SQLite itself
            sqlite3.connect(db).execute("SELECT * FROM sqlite_master").fetchall()


def test_serve_query_with_bad_host_in_a_real_process() -> None:
    """The installed entry point, as Slurm's HealthCheckProgram would run it."""
    done = subprocess.run([sys.executable, "-m", "gpu_preflight", "serve", "--query", "--host", "bad host!"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 3
    assert done.stderr.count("\n") == 1 and "argument --host: must be an IP address or a host name" in done.stderr
