"""Every file gpu-preflight writes: no symlink followed, no stranger's directory, nothing half-written.

The tests run as root (as a Slurm prolog or a DaemonSet does), so "another user" is uid 65534
(nobody), made the owner with ``chown``. The ``--report-dir`` failures run the real command
line and check what an operator sees: the verdict, then one line, exit 3, no traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.localize.report import write_exclude_file
from gpu_preflight.outputs.textfile import write_textfile
from gpu_preflight.safeio import UnsafePathError, atomic_writer, open_dir, prepare_file, write_text

from .history_data import cluster_run, gpus

NOBODY = 65534
GP = Path(sys.executable).parent / "gpu-preflight"


@pytest.fixture(autouse=True)
def _as_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("these tests play another user with chown, which needs root (CI runs them as root)")


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file a planted link points at; it must never change."""
    path = tmp_path / "victim"
    path.write_text("precious\n")
    return path


def no_temporaries(directory: Path) -> list[str]:
    """Our temporaries left behind (the planted links are not ours)."""
    return sorted(p.name for p in directory.rglob("*.tmp") if not p.is_symlink())


def test_planted_links_at_fixed_and_final_names_are_replaced_not_written_through(tmp_path: Path,
                                                                                  victim: Path) -> None:
    out = tmp_path / "reports"
    out.mkdir()
    for name in ("report.json.tmp", "report.json", "report.html", ".report.json.tmp"):
        (out / name).symlink_to(victim)
    from gpu_preflight.report import write_report

    write_report(cluster_run({"h0": gpus("aa")}), [], out)
    assert victim.read_text() == "precious\n"
    assert not (out / "report.json").is_symlink() and json.loads((out / "report.json").read_text())["findings"]
    assert not (out / "report.html").is_symlink() and "<html" in (out / "report.html").read_text().lower()
    assert (out / "report.json.tmp").is_symlink()  # left alone: not ours, never followed


def test_the_exclude_file_and_the_textfile_are_not_written_through_links(tmp_path: Path, victim: Path) -> None:
    exclude = tmp_path / "exclude.txt"
    Path(f"{exclude}.tmp").symlink_to(victim)
    exclude.symlink_to(victim)
    write_exclude_file(exclude, ["n2", "n1"])
    assert exclude.read_text() == "n1\nn2\n" and not exclude.is_symlink()
    prom = tmp_path / "preflight.prom"
    prom.symlink_to(victim)
    write_textfile(ClusterReport.of(cluster_run({"h0": gpus("aa")})), prom)
    assert "gpu_preflight_" in prom.read_text() and not prom.is_symlink()
    assert oct(prom.stat().st_mode & 0o777) == "0o644"  # node_exporter runs as another user
    assert victim.read_text() == "precious\n"
    assert no_temporaries(tmp_path) == []


def test_a_symlinked_directory_is_followed_only_when_root_or_we_own_the_link(tmp_path: Path, victim: Path) -> None:
    target = tmp_path / "etc"
    target.mkdir()
    link = tmp_path / "reports"
    link.symlink_to(target)
    os.chown(link, NOBODY, NOBODY, follow_symlinks=False)
    with pytest.raises(UnsafePathError, match="symbolic link owned by uid 65534"):
        write_text(link / "report.json", "{}")
    with pytest.raises(UnsafePathError):
        write_text(link / "deeper" / "report.json", "{}")  # a link in the middle of the path, too
    assert list(target.iterdir()) == []
    os.chown(link, 0, 0, follow_symlinks=False)
    write_text(link / "report.json", "{}")
    assert (target / "report.json").read_text() == "{}"


def test_a_directory_another_user_owns_and_others_can_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, NOBODY, NOBODY)
    shared.chmod(0o777)
    with pytest.raises(UnsafePathError, match="owned by uid 65534 that other users can write"):
        open_dir(shared)
    with pytest.raises(UnsafePathError):
        prepare_file(shared / "history.sqlite")
    below = shared / "mine"
    write_text(below / "report.json", "{}")  # a directory we make below it is ours
    assert (below / "report.json").read_text() == "{}"
    shared.chmod(0o755)  # another user's, but only they can write it: nobody can swap files under us
    write_text(shared / "report.json", "{}")


def test_directories_are_made_with_the_asked_mode_and_the_history_one_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_text(tmp_path / "a" / "b" / "f.txt", "x")
        prepare_file(tmp_path / "hist" / "history.sqlite")
    finally:
        os.umask(old)
    assert oct((tmp_path / "a" / "b").stat().st_mode & 0o777) == "0o755"
    assert oct((tmp_path / "hist").stat().st_mode & 0o777) == "0o700"


def test_an_error_while_writing_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_writer(path) as fh:
        fh.write("half of a new rep")
        raise RuntimeError("disk full, say")
    assert path.read_text() == "old\n" and no_temporaries(tmp_path) == []


def test_a_fifo_or_device_as_the_history_database_is_refused_before_sqlite_opens_it(tmp_path: Path) -> None:
    fifo = tmp_path / "history.sqlite"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="Not a regular file"):
        prepare_file(fifo)
    with pytest.raises(OSError, match="Not a regular file"):
        prepare_file("/dev/zero")


# -- the command line: --report-dir that cannot be written -------------------------------------


def run_into(report_dir: str | Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(GP), "run", "--node-only", "--no-history", "--report-dir", str(report_dir), *extra],
                          capture_output=True, text=True, timeout=120)


def assert_verdict_then_one_line(proc: subprocess.CompletedProcess[str], reason: str) -> str:
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.rstrip("\n").splitlines()
    assert lines[-2].startswith("[RESULT] "), lines[-3:]  # the verdict first
    assert lines[-1].startswith("gpu-preflight: could not write the report to ") and reason in lines[-1], lines[-1]
    return lines[-1]


@pytest.mark.parametrize("case, reason", [
    ("file", "Not a directory"), ("dev_null", "Not a directory"), ("under_file", "Not a directory"),
])
def test_report_dir_that_is_not_a_directory(tmp_path: Path, case: str, reason: str) -> None:
    plain = tmp_path / "plain"
    plain.write_text("keep\n")
    where = {"file": plain, "dev_null": Path("/dev/null"), "under_file": plain / "reports"}[case]
    assert_verdict_then_one_line(run_into(where), reason)
    assert plain.read_text() == "keep\n"


def test_report_json_as_a_directory_changes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "report.json").mkdir(parents=True)
    assert_verdict_then_one_line(run_into(out), "Is a directory")
    assert (out / "report.json").is_dir() and not (out / "report.html").exists()  # no page beside no report
    assert no_temporaries(out) == []


def test_report_html_as_a_directory_after_a_good_run_keeps_the_old_report(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run_into(out).returncode in (0, 1, 2)
    before = (out / "report.json").read_bytes()
    (out / "report.html").unlink()
    (out / "report.html").mkdir()
    line = assert_verdict_then_one_line(run_into(out), "Is a directory")
    assert "report.html" in line
    assert (out / "report.json").read_bytes() == before  # not replaced by a report without its page
    assert no_temporaries(out) == []


def test_json_format_keeps_stdout_a_report_and_exits_3(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_text("")
    proc = run_into(plain, "--format", "json")
    assert proc.returncode == 3 and "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["cluster_summary"]["exit_code"] in (0, 1, 2)  # the verdict, as always
    assert proc.stderr.rstrip().splitlines()[-1].startswith("gpu-preflight: could not write the report to ")


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Path]:
    point = tmp_path / "mnt"
    point.mkdir()
    yield point
    subprocess.run(["umount", str(point)], capture_output=True)


def mount(*argv: str) -> None:
    proc = subprocess.run(["mount", *argv], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"mount {' '.join(argv)} is not permitted here: {proc.stderr.strip()}")


def test_a_read_only_filesystem(mounted: Path) -> None:
    mount("-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(mounted))
    assert_verdict_then_one_line(run_into(mounted / "reports"), "Read-only file system")
    assert_verdict_then_one_line(run_into(mounted), "Read-only file system")


def test_a_full_disk_leaves_no_partial_file(mounted: Path) -> None:
    mount("-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mounted))
    (mounted / "filler").write_bytes(b"\0" * 40 * 1024)  # a node-only report and its page need more than the rest
    assert_verdict_then_one_line(run_into(mounted / "reports"), "No space left on device")
    assert no_temporaries(mounted) == [] and not (mounted / "reports" / "report.json").exists()
    assert not (mounted / "reports" / "report.html").exists()


def test_a_report_read_from_a_named_path_is_bounded(tmp_path: Path) -> None:
    from gpu_preflight.integrations.k8s import ReportSourceError, load_report

    for path in ("/dev/zero", str(tmp_path)):
        with pytest.raises(ReportSourceError, match="cannot read a report from"):
            load_report(path)
