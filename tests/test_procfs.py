"""backends/procfs.py against psutil on this machine, and against hand-made /proc files for
the cases a machine does not show on demand (an old kernel without MemAvailable, a name the
kernel cut to 15 characters)."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

from gpu_preflight.backends import procfs


def test_memory_and_disk_are_psutils_own_figures() -> None:
    total, available = procfs.meminfo()
    vm = psutil.virtual_memory()
    assert total == vm.total
    assert abs(available - vm.available) < 64 << 20  # read a moment apart on a busy machine
    assert procfs.disk_total_free("/")[0] == psutil.disk_usage("/").total


def test_process_names_are_psutils_names() -> None:
    ours = set(procfs.process_names())
    theirs = {p.info["name"] for p in psutil.process_iter(["name"]) if p.info["name"]}
    assert ours, "no process found in /proc"
    steady = {psutil.Process(pid).name() for pid in (1, os.getpid(), os.getppid())}  # alive through both scans
    assert steady <= ours
    # processes that started or ended between the two scans: a loaded runner (the suite's own workers,
    # short-lived tools) turns over a few per scan, never a tenth of them
    assert len(ours ^ theirs) <= max(2, len(theirs) // 10), ours ^ theirs


def test_cpu_ticks_grow_and_idle_is_part_of_total() -> None:
    before = procfs.cpu_ticks()
    sum(i * i for i in range(200_000))
    after = procfs.cpu_ticks()
    assert 0 <= before.idle <= before.total <= after.total
    assert procfs.own_cpu_seconds() > 0


def test_meminfo_without_memavailable_falls_back_to_free_buffers_and_cache(tmp_path: Path) -> None:
    path = tmp_path / "meminfo"
    path.write_text("MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 20 kB\nCached: 30 kB\n")
    assert procfs.meminfo(str(path)) == (1000 * 1024, 150 * 1024)


@pytest.mark.parametrize("text", ["", "MemFree: 10 kB\n", "garbage\n"])
def test_meminfo_without_a_total_is_an_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "meminfo"
    path.write_text(text)
    with pytest.raises(ValueError, match="no MemTotal"):
        procfs.meminfo(str(path))


def test_a_stat_file_without_a_cpu_line_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "stat"
    path.write_text("intr 1 2 3\n")
    with pytest.raises(ValueError, match="no cpu line"):
        procfs.cpu_ticks(str(path))


def _proc(root: Path, pid: int, comm: str, cmdline: list[str] | None) -> None:
    d = root / str(pid)
    d.mkdir()
    (d / "comm").write_text(comm + "\n")
    if cmdline is not None:
        (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in cmdline) + b"\0")


def test_names_cut_by_the_kernel_are_widened_from_the_command_line(tmp_path: Path) -> None:
    _proc(tmp_path, 1, "nvidia-persiste", ["/usr/bin/nvidia-persistenced", "--verbose"])
    _proc(tmp_path, 2, "nv-hostengine", ["/usr/bin/nv-hostengine"])
    _proc(tmp_path, 3, "kworker/0:1-eve", [])  # a kernel thread: empty command line, keep the cut name
    _proc(tmp_path, 4, "python3.11-some", ["/usr/bin/python3"])  # argv[0] does not extend it: keep it
    _proc(tmp_path, 5, "nv-hostengine", None)
    (tmp_path / "self").mkdir()  # not a pid
    assert procfs.process_names(str(tmp_path)) == [
        "kworker/0:1-eve", "nv-hostengine", "nvidia-persistenced", "python3.11-some"]


def test_a_process_that_ends_during_the_scan_is_left_out(tmp_path: Path) -> None:
    _proc(tmp_path, 7, "sshd", ["sshd"])
    (tmp_path / "8").mkdir()  # its comm already gone
    assert procfs.process_names(str(tmp_path)) == ["sshd"]
    assert os.path.isdir(tmp_path / "8")
