"""``gpu-preflight localize simulate`` as a user runs it: a real process, stdout/stderr split, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ENV = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_")}
# Until cli/main.py registers the command, the module's own entry point runs it; the
# arguments after it are exactly those of `gpu-preflight`.
ENTRY = ["-m", "gpu_preflight"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *ENTRY, "localize", "simulate", *args], capture_output=True, text=True,
                          timeout=120, env=ENV)


def test_json_names_the_bad_node_and_nothing_else() -> None:
    out = cli("--nodes", "256", "--bad", "1", "--noise", "0.1", "--seed", "7", "--format", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["rounds_to_find"] <= 2 and data["rounds"] >= 2
    assert len(data["found"]) == 1 and data["false_positives"] == [] and data["missed"] == []
    assert data["exclude_hostlist"] == data["found"][0]
    assert data["suspects"][0]["node"] == data["found"][0]
    assert data["localization"]["exclude_nodes"] == data["found"]


def test_slow_link_is_reported_and_not_excluded(tmp_path: Path) -> None:
    target = tmp_path / "exclude.txt"
    out = cli("--nodes", "16", "--bad", "0", "--slow-link", "3,11", "--format", "json", "--exclude-file", str(target))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["links_found"] == [["node0003", "node0011"]] and data["exclude_hostlist"] == ""
    assert target.read_text() == ""


def test_console_goes_to_stderr_and_exclude_file_is_written(tmp_path: Path) -> None:
    target = tmp_path / "exclude.hostlist"
    out = cli("--nodes", "64", "--bad", "3", "--fault", "mixed", "--seed", "2", "--mode", "full",
              "--exclude-file", str(target), "--exclude-style", "hostlist")
    assert out.returncode == 0, out.stderr
    assert out.stdout == ""
    assert "found" in out.stderr and "false_positives     0" in out.stderr
    line = target.read_text().strip()
    assert line.startswith("node") and line in out.stderr


def test_a_wrong_answer_exits_one_and_bad_arguments_exit_two() -> None:
    # Two nodes and no floor: one figure judged against itself cannot convict anyone.
    miss = cli("--nodes", "2", "--bad", "1", "--format", "json")
    assert miss.returncode == 1 and json.loads(miss.stdout)["missed"]
    floored = json.loads(cli("--nodes", "2", "--bad", "1", "--floor-gbps", "30", "--format", "json").stdout)
    assert floored["exclude_hostlist"] == ""  # one of the two is healthy: say so, exclude neither
    assert floored["localization"]["undecided_nodes"] == ["node0000", "node0001"]
    assert cli("--nodes", "8", "--cover-passes", "0").returncode == 3
    bad = cli("--nodes", "8", "--slow-link", "3-4")
    assert bad.returncode == 3 and "A,B" in bad.stderr
    assert cli("--nodes", "4", "--bad", "9").returncode == 3
    assert cli("--nodes", "4", "--mode", "bogus").returncode == 3


def test_a_cluster_too_large_to_simulate_is_a_one_line_error() -> None:
    out = cli("--nodes", "100000000")
    assert out.returncode == 3 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and "1000000" in out.stderr.replace(",", "")


def test_progress_goes_to_stderr_in_few_lines_and_quiet_silences_it() -> None:
    out = cli("--nodes", "64", "--bad", "2", "--mode", "full", "--seed", "4", "--format", "json")
    assert out.returncode == 0, out.stderr
    json.loads(out.stdout)  # stdout holds the JSON object alone
    lines = out.stderr.splitlines()
    assert lines and all(line.startswith("gpu-preflight localize: round ") for line in lines)
    assert 2 <= len(lines) <= 22, lines  # 63 rounds: about twenty lines, not one per round
    assert "64/64 nodes resolved" in lines[-1]
    quiet = cli("--nodes", "64", "--bad", "2", "--mode", "full", "--seed", "4", "--format", "json", "--quiet")
    assert quiet.returncode == 0 and quiet.stderr == "" and json.loads(quiet.stdout) == json.loads(out.stdout)


def test_a_forced_bar_never_reaches_json_stdout() -> None:
    out = subprocess.run([sys.executable, *ENTRY, "localize", "simulate", "--nodes", "128", "--bad", "1",
                          "--mode", "full", "--format", "json"], capture_output=True, text=True, timeout=120,
                         env={**ENV, "GPU_PREFLIGHT_PROGRESS": "1"})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["missed"] == []
    assert "gpu-preflight localize: round" not in out.stderr  # a bar, not log lines
    off = subprocess.run([sys.executable, *ENTRY, "localize", "simulate", "--nodes", "16", "--format", "json"],
                         capture_output=True, text=True, timeout=120, env={**ENV, "GPU_PREFLIGHT_PROGRESS": "0"})
    assert off.returncode == 0 and off.stderr == ""
