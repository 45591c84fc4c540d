"""Two runs writing one ``--report-dir`` at once (issue 28 item 13).

Before: each run renamed its NVML dump into ``artifacts/node_0/`` as soon as it was written,
then rendered the HTML, then renamed its report into place. A second run that wrote its dump
in between left the first run's ``report.json`` naming the second run's dump, with the first
run's checksum (8 of 85 tries in the sweep; 1 of 20 here with the runs started 0-150 ms
apart). Now a run holds an exclusive lock on the directory (``flock`` on its open
descriptor) from its first artifact to its last rename: a second run waits for it
(``outputs.report_dir_wait_s``, 30 s), or gives up after that with the one line of an
unwritable report directory and exit 3, writing nothing.

The first test makes the race certain rather than likely, through a wrapper around the
program in each run: the first run, once its dump is in place, renders its HTML only when the
second run has either written its whole report (what today's code let it do) or found the
directory locked (what it must do now).
"""

from __future__ import annotations

import errno
import fcntl
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.safeio import open_dir

from .conftest import REPO
from .nvml_stub.gpus import widen
from .nvml_stub.stub import stub_env, write_stub_data
from .signal_cases import directory_problem

RUN = ("run", "--node-only", "--no-history", "--quiet", "--format", "json")
WRAPPER = textwrap.dedent("""
    import fcntl, os, sys, time
    marks, role = sys.argv.pop(1), sys.argv.pop(1)

    def mark(name):
        open(os.path.join(marks, name), "w").close()

    if role == "first":
        from gpu_preflight.report import html
        rendered = html.render_html

        def render_later(*args, **kwargs):
            mark("first-rendering")
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not any(
                    os.path.exists(os.path.join(marks, m)) for m in ("second-blocked", "second-wrote")):
                time.sleep(0.01)
            return rendered(*args, **kwargs)

        html.render_html = render_later
    else:
        from gpu_preflight.report import write as report_write
        flock, write = fcntl.flock, report_write.write

        def flock_marked(fd, op):
            try:
                return flock(fd, op)
            except BlockingIOError:
                mark("second-blocked")
                raise

        def write_marked(*args, **kwargs):
            written = write(*args, **kwargs)
            mark("second-wrote")
            return written

        fcntl.flock, report_write.write = flock_marked, write_marked
    sys.argv[0] = "gpu-preflight"
    from gpu_preflight.cli.main import program
    program()
""")


@pytest.fixture
def node_env(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> dict[str, str]:
    write_stub_data(widen(h200_dump), tmp_path / "nvml.txt")
    return {k: v for k, v in stub_env(stub_lib, tmp_path / "nvml.txt").items() if not k.startswith("GPU_PREFLIGHT_")}


def _start(env: dict[str, str], marks: Path, role: str, report_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", WRAPPER, str(marks), role, *RUN, "--report-dir", str(report_dir)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)


def test_a_second_run_waits_and_the_report_names_its_own_files(node_env: dict[str, str], tmp_path: Path) -> None:
    reports, marks = tmp_path / "reports", tmp_path / "marks"
    marks.mkdir()
    first = _start(node_env, marks, "first", reports)
    deadline = time.monotonic() + 120
    while not (marks / "first-rendering").exists():  # its dump is in place
        assert first.poll() is None, first.communicate()[1]
        assert time.monotonic() < deadline, "the first run never got to its report"
        time.sleep(0.005)
    second = _start(node_env, marks, "second", reports)
    _, first_err = first.communicate(timeout=120)
    _, second_err = second.communicate(timeout=120)
    assert first.returncode in (0, 1, 2), first_err
    assert second.returncode in (0, 1, 2), second_err
    assert directory_problem(reports) is None
    assert (marks / "second-blocked").exists()  # it waited for the first run's lock
    assert second_err.splitlines() == [f"gpu-preflight: report written to {reports}/report.json"]


def test_a_run_gives_up_on_a_directory_held_too_long_with_one_line(node_env: dict[str, str], tmp_path: Path) -> None:
    """Another process holds the lock (as a run that hangs mid-write would): the run shows its
    verdict, then one line, exit 3, and leaves nothing of its own in the directory."""
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "report.json").write_text("{}")  # a previous run's: kept as it is
    fd = os.open(reports, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        proc = subprocess.run([sys.executable, "-m", "gpu_preflight", *RUN, "--report-dir", str(reports),
                               "--set", "outputs.report_dir_wait_s=0.5"], env=node_env, capture_output=True,
                              text=True, timeout=120, check=False, cwd=REPO)
    finally:
        os.close(fd)
    assert proc.returncode == 3, proc.stderr
    assert '"overall_status"' in proc.stdout  # the verdict still came
    assert proc.stderr.splitlines() == [
        f"gpu-preflight: could not write the report to {reports}: another run is writing this directory; "
        "gave up after 0.5 s (outputs.report_dir_wait_s)"]
    assert sorted(p.name for p in reports.iterdir()) == ["report.json"]
    assert (reports / "report.json").read_text() == "{}"


def test_the_lock_is_the_directorys_and_ends_with_it(tmp_path: Path) -> None:
    """Two openings of one directory exclude each other (one process or two); closing frees it."""
    with open_dir(tmp_path / "d") as first:
        first.lock(0.0)
        with open_dir(tmp_path / "d") as second, pytest.raises(OSError) as refused:
            second.lock(0.2)
        assert refused.value.errno == errno.EWOULDBLOCK
    with open_dir(tmp_path / "d") as again:
        again.lock(0.0)


def test_a_filesystem_that_cannot_lock_a_directory_gets_a_lock_file(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """NFS emulates flock with byte-range locks, which a directory opened read-only cannot take
    (EBADF): the lock is then taken on ``.gpu-preflight.lock`` in the directory."""
    real = fcntl.flock

    def nfs_like(fd: int, op: int) -> None:
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            raise OSError(errno.EBADF, "Bad file descriptor")
        real(fd, op)

    monkeypatch.setattr(fcntl, "flock", nfs_like)
    with open_dir(tmp_path / "d") as first:
        first.lock(0.0)
        assert (tmp_path / "d" / ".gpu-preflight.lock").is_file()
        with open_dir(tmp_path / "d") as second, pytest.raises(OSError) as refused:
            second.lock(0.2)
        assert refused.value.errno == errno.EWOULDBLOCK
    with open_dir(tmp_path / "d") as again:
        again.lock(0.0)
