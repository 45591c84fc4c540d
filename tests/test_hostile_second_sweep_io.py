"""Issue 28, second sweep, the input and output side: large reports, long paths, side commands' files.

* ``history import`` of a large report is linear: the node index compared every host name
  with every other (100,000 nodes: 395 s). Counted here by comparisons, not timed;
  ``bench/bench_history_import.py`` prints the times.
* What the program writes it reads back: ``report render`` and ``history import`` of a
  report written by the program's own writer, and a size bound that covers a 100,000-node
  report as the writer makes it.
* A ``--history-db`` path too long to open is a usage error before the run (exit 3), not a
  crash after the verdict.
* The Slurm health check reads its result through the bounded reader: a FIFO named as the
  result is "unknown" at once, not a hang until slurmd kills the check.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpu_preflight.boundedio import REPORT_LIMIT
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.history.extract import NodeIndex, extract
from gpu_preflight.report.write import write_report

from .conftest import H200_DUMP
from .large_report import large_report

ENV = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_")}
ENV.pop("LD_LIBRARY_PATH", None)


def gp(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpu_preflight", *args], capture_output=True, text=True,
                          timeout=300, env=ENV, cwd=cwd)


class Counted(str):
    """A host name that counts how often it is compared for equality."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        Counted.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


@pytest.mark.parametrize("nodes", [400, 4000])
def test_the_node_index_compares_host_names_a_bounded_number_of_times_per_node(nodes: int) -> None:
    report = large_report(nodes)
    for i, section in enumerate(report["nodes"].values()):
        section["node_info"] = {**section["node_info"], "hostname": Counted(f"host{i:05d}")}
    typed = ClusterReport.from_dict(report)
    Counted.compared = 0
    index = NodeIndex(typed)
    assert len(index.names) == nodes and index.names[-1] == f"host{nodes - 1:05d}"
    assert Counted.compared <= 4 * nodes, f"{Counted.compared} comparisons for {nodes} nodes"


def test_hosts_that_share_a_name_are_still_told_apart() -> None:
    report = large_report(6)
    for section in report["nodes"].values():
        section["node_info"] = {**section["node_info"], "hostname": "localhost"}
    names = NodeIndex(ClusterReport.from_dict(report)).names
    assert names == [f"n{i:05d}" for i in range(6)]  # the launcher's distinct names


def test_the_report_bound_covers_100000_nodes_as_the_writer_writes_them(tmp_path: Path) -> None:
    path = write_report(large_report(500), [], tmp_path / "r")
    per_node = path.stat().st_size / 500
    assert per_node * 100_000 <= REPORT_LIMIT, f"{per_node:.0f} bytes a node"


def test_what_the_program_writes_it_renders_and_files(tmp_path: Path) -> None:
    nodes = 3000
    report = large_report(nodes)
    path = write_report(report, [], tmp_path / "r")
    render = gp("report", "render", str(path), "--format", "md")
    assert render.returncode == 0, render.stderr
    assert "n02999" in render.stdout or str(nodes) in render.stdout
    imported = gp("history", "import", str(path), "--db", str(tmp_path / "h.sqlite"))
    assert imported.returncode == 0, imported.stderr
    assert "run #1 filed" in imported.stderr
    with sqlite3.connect(tmp_path / "h.sqlite") as con:
        assert con.execute("SELECT COUNT(DISTINCT node), COUNT(*) FROM gpus").fetchone() == (
            nodes, len(extract(ClusterReport.of(report)).gpus))


def test_a_history_db_path_too_long_to_open_is_refused_before_the_run(tmp_path: Path) -> None:
    deep = "/".join(["d" * 200] * 25) + "/history.sqlite"  # over PATH_MAX (4096)
    for args in (["run", "--replay", str(H200_DUMP), "--check", "gpu.*", "--history", "--history-db", deep],
                 ["history", "runs", "--db", deep]):
        out = gp(*args, cwd=tmp_path)
        assert out.returncode == 3, out.stderr
        assert out.stdout == "" and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
        assert "bytes long; at most" in out.stderr
    sqlite_long = str(tmp_path / ("e" * 200) / ("f" * 200) / ("g" * 200) / "history.sqlite")  # past SQLite's 512
    out = gp("run", "--replay", str(H200_DUMP), "--check", "gpu.*", "--history", "--history-db", sqlite_long)
    assert out.returncode == 3 and "at most 504 can be opened" in out.stderr


def test_a_too_long_history_path_from_the_environment_is_one_line_not_a_crash(tmp_path: Path) -> None:
    deep = str(tmp_path / "/".join(["d" * 200] * 25) / "history.sqlite")
    out = subprocess.run([sys.executable, "-m", "gpu_preflight", "history", "runs"], capture_output=True, text=True,
                         timeout=120, env={**ENV, "GPU_PREFLIGHT_HISTORY": deep})
    assert out.returncode == 3 and out.stderr.count("\n") == 1 and "bytes long" in out.stderr
    run = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--replay", str(H200_DUMP), "--check",
                          "gpu.*", "--history", "--format", "json"], capture_output=True, text=True, timeout=300,
                         env={**ENV, "GPU_PREFLIGHT_HISTORY": deep})
    assert run.returncode in (0, 1, 2) and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert json.loads(run.stdout)["cluster_summary"]["overall_status"]


def test_the_slurm_health_check_does_not_wait_on_a_fifo(tmp_path: Path) -> None:
    from gpu_preflight.config.slurm_schema import SlurmConfig
    from gpu_preflight.integrations.slurm_result import read_result

    fifo = tmp_path / "result.json"
    os.mkfifo(fifo)
    got: list[object] = []
    worker = threading.Thread(target=lambda: got.append(read_result(fifo, SlurmConfig(), datetime.now(UTC), {"n1"})),
                              daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "reading the result FIFO blocked"
    verdict = got[0]
    assert verdict.state == "unknown" and "FIFO" in verdict.detail  # type: ignore[attr-defined]
