"""Small command-line traps: a snapshot redirected into a file that stays empty, a GPU id the
history has never seen. Real CLI processes; NVML is the real pynvml against the stub library."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.history import HistoryStore, extract

from .conftest import REPO
from .history_data import cluster_run, gpus
from .nvml_stub.stub import stub_env, write_stub_data

NO_NVML = {**{k: v for k, v in os.environ.items() if not k.startswith(("GPU_PREFLIGHT_", "FAKE_NVML_"))},
           "LD_LIBRARY_PATH": "/nonexistent"}


def gp(*args: str, env: dict[str, str] | None = None,
       stdout: Any = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpu_preflight", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=120, env=env or NO_NVML, cwd=REPO)


def test_a_failed_snapshot_into_a_shell_redirection_says_the_file_is_empty_and_what_to_use(tmp_path: Path) -> None:
    target = tmp_path / "node.json"
    with open(target, "w") as fh:  # what `gpu-preflight snapshot > node.json` does before we run
        out = gp("snapshot", stdout=fh)
    assert out.returncode == 3 and target.read_text() == ""
    (line,) = out.stderr.splitlines()
    assert "cannot snapshot" in line and "nothing written" in line
    assert f"{target} is left empty by the shell's redirection: use --output FILE" in line


def test_a_failed_snapshot_with_output_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    target = tmp_path / "node.json"
    target.write_text('{"earlier": "snapshot"}')
    out = gp("snapshot", "--output", str(target))
    assert out.returncode == 3 and out.stdout == ""
    (line,) = out.stderr.splitlines()
    assert "nothing written" in line and "--output" not in line  # it was used: no advice to use it
    assert target.read_text() == '{"earlier": "snapshot"}'
    assert not (tmp_path / "absent.json").exists()
    assert gp("snapshot", "--output", str(tmp_path / "absent.json")).returncode == 3
    assert not (tmp_path / "absent.json").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["node.json"]


def test_snapshot_output_writes_a_complete_file_that_replays(stub_lib: Path, tmp_path: Path,
                                                            h200_dump: dict[str, Any]) -> None:
    data = tmp_path / "nvml.txt"
    write_stub_data(h200_dump, data)
    target = tmp_path / "snaps" / "node.json"
    out = gp("snapshot", "--output", str(target), env=stub_env(stub_lib, data))
    assert out.returncode == 0, out.stderr
    assert out.stdout == "" and out.stderr.strip() == f"gpu-preflight: snapshot written to {target}"
    dump = json.loads(target.read_text())
    assert dump["devices"][0]["nvmlDeviceGetName"] == {"ok": "NVIDIA H200"}
    assert [p.name for p in target.parent.iterdir()] == ["node.json"]  # no temporary left beside it
    replay = gp("run", "--replay", str(target), "--check", "gpu.inventory.*", "--format", "json", "--no-history")
    assert replay.returncode in (0, 1), replay.stderr
    assert json.loads(replay.stdout)["cluster_summary"]["overall_status"] in ("PASS", "WARN")


def test_snapshot_output_refuses_an_unwritable_place_in_one_line(stub_lib: Path, tmp_path: Path,
                                                                 h200_dump: dict[str, Any]) -> None:
    data = tmp_path / "nvml.txt"
    write_stub_data(h200_dump, data)
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = gp("snapshot", "--output", str(blocker / "node.json"), env=stub_env(stub_lib, data))
    assert out.returncode == 3 and out.stdout == ""
    (line,) = out.stderr.splitlines()
    assert line.startswith(f"gpu-preflight: cannot write the snapshot to {blocker / 'node.json'}: ")


@pytest.fixture
def history(tmp_path: Path) -> tuple[str, str]:
    """A history with two GPUs on one host; returns (database, one GPU's UUID)."""
    db = tmp_path / "history.sqlite"
    known = gpus("ab")
    with HistoryStore(db) as store:
        store.record(extract(ClusterReport.of(cluster_run({"h0": known}))), "c1")
    return str(db), known[0].uuid


def test_history_gpu_known_is_found(history: tuple[str, str]) -> None:
    db, uuid = history
    out = gp("history", "gpu", uuid[:12], "--db", db)
    assert out.returncode == 0 and "1 run(s) on 1 host(s): h0" in out.stdout


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_history_gpu_unknown_exits_3_with_the_nearest_ids(history: tuple[str, str], fmt: str) -> None:
    db, uuid = history
    typo = uuid[:8] + "f" + uuid[9:16]  # one character wrong in a prefix
    out = gp("history", "gpu", typo, "--db", db, "--format", fmt)
    assert out.returncode == 3
    (line,) = out.stderr.splitlines()
    assert line.startswith(f"gpu-preflight: no GPU {typo!r} in the history; did you mean ")
    assert uuid in line
    assert (json.loads(out.stdout) == []) if fmt == "json" else (out.stdout == "")
    far = gp("history", "gpu", "zzzz-nothing-like-it", "--db", db)
    assert far.returncode == 3 and far.stderr.strip() == "gpu-preflight: no GPU 'zzzz-nothing-like-it' in the history"


def test_localize_on_one_node_says_why_and_empties_the_exclude_file(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The self-launched run in test_progress_pty covers the whole path; here the one-line cases."""
    from gpu_preflight.run import ONE_NODE, LocaliseOptions
    from gpu_preflight.run import localize_not_run as _localize_not_run

    stale = tmp_path / "exclude.txt"
    stale.write_text("gpu-0417\n")
    args = LocaliseOptions("quick", exclude_file=str(stale), exclude_style="hostlist")
    assert _localize_not_run(args, ONE_NODE, empty_exclude=True) is True
    assert stale.read_text() == ""
    assert capsys.readouterr().err == (f"gpu-preflight: --localize not run: {ONE_NODE}; empty exclude list written "
                                       f"to {stale}\n")
    blocked = LocaliseOptions("quick", exclude_file=str(stale / "x.txt"), exclude_style="lines")
    assert _localize_not_run(blocked, ONE_NODE, empty_exclude=True) is False  # the run exits 3
    (line,) = capsys.readouterr().err.splitlines()
    assert f"exclude list not written to {stale / 'x.txt'}: " in line
    stale.write_text("gpu-0417\n")
    assert _localize_not_run(args, "the process group did not form") is True
    assert stale.read_text() == "gpu-0417\n"  # not known to be empty: left as it was, and said why
    assert capsys.readouterr().err == "gpu-preflight: --localize not run: the process group did not form\n"
