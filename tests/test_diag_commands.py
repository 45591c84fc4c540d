"""The tool runner: argv, PATH and configured directories, exit status, output, timeouts that kill."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gpu_preflight.backends.commands import find_tool, run_tool

from .diag_tools import hang, replay, tool


def env_with(bindir: Path) -> dict[str, str]:
    return {**os.environ, "PATH": f"{bindir}:{os.environ.get('PATH', '')}"}


def test_output_and_exit_status_of_a_replayed_corpus_file(tmp_path: Path, corpus: Path) -> None:
    source = corpus / "libfabric/cscs-fi_info-p-cxi-not-working-61.txt"
    replay(tmp_path, "fi_info", source, rc=61, stderr="fi_getinfo: -61")
    result = run_tool(["fi_info", "-p", "cxi"], 10, environ=env_with(tmp_path))
    assert result.rc == 61 and result.ran and result.problem() is None
    assert result.stdout == source.read_text() and result.stderr == "fi_getinfo: -61\n"
    assert result.argv == [str(tmp_path / "fi_info"), "-p", "cxi"]
    assert result.output.endswith("fi_getinfo: -61\n") and result.last_line() == "fi_getinfo: -61"


def test_missing_tool_is_a_result_naming_where_it_looked(tmp_path: Path) -> None:
    result = run_tool(["dcgmi", "diag"], 5, extra_dirs=[str(tmp_path)], environ={"PATH": str(tmp_path)})
    assert result.missing and result.rc is None and not result.ran
    assert result.problem() == f"dcgmi not found (looked in {tmp_path}, PATH)"


def test_configured_directory_wins_over_path(tmp_path: Path) -> None:
    tool(tmp_path / "opt", "all_reduce_perf", "echo opt")
    tool(tmp_path / "bin", "all_reduce_perf", "echo path")
    env = {"PATH": str(tmp_path / "bin")}
    assert find_tool("all_reduce_perf", [str(tmp_path / "opt")], env) == str(tmp_path / "opt" / "all_reduce_perf")
    assert run_tool(["all_reduce_perf"], 5, environ=env).stdout == "path\n"
    assert run_tool(["all_reduce_perf"], 5, extra_dirs=[str(tmp_path / "opt")], environ=env).stdout == "opt\n"


def test_non_executable_file_is_not_a_tool(tmp_path: Path) -> None:
    (tmp_path / "lspci").write_text("#!/bin/sh\necho hi\n")
    assert find_tool("lspci", [str(tmp_path)], {"PATH": str(tmp_path)}) is None


def test_no_shell_interprets_the_arguments(tmp_path: Path) -> None:
    tool(tmp_path, "echoargs", 'for a in "$@"; do echo "[$a]"; done')
    result = run_tool(["echoargs", "a b", "$(id)", ";", "*"], 5, environ=env_with(tmp_path))
    assert result.stdout.splitlines() == ["[a b]", "[$(id)]", "[;]", "[*]"]


def test_a_hung_tool_is_killed_with_its_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    hang(tmp_path, "dcgmi", pidfile)
    t0 = time.monotonic()
    result = run_tool(["dcgmi", "diag", "-r", "1"], 1.0, environ=env_with(tmp_path))
    assert time.monotonic() - t0 < 8
    assert result.timed_out and result.rc is None and result.stdout == "started\n"
    assert result.problem() == f"`{tmp_path / 'dcgmi'} diag -r 1` did not finish within 1 s and was killed"
    child = int(pidfile.read_text())
    for _ in range(50):
        if not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the hung tool's child {child} survived the timeout")


def test_a_tool_that_cannot_start_is_reported(tmp_path: Path) -> None:
    tool(tmp_path, "ibstat", "true")
    (tmp_path / "ibstat").write_bytes(b"\x7fELF-not-really")
    (tmp_path / "ibstat").chmod(0o755)
    result = run_tool(["ibstat"], 5, environ=env_with(tmp_path))
    assert not result.ran and not result.missing and result.error
    assert "could not be started" in (result.problem() or "")
