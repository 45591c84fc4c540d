"""One Xid window for live, saved and judged logs; damaged Xid lines; refused and huge kernel-log files."""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpu_preflight import Status, run_checks
from gpu_preflight.config import Config
from gpu_preflight.config.xid_window import count_events, xid_window
from gpu_preflight.evidence import judge_text
from gpu_preflight.parsers.kernel_log import UnparsedXid, scan_xid_line
from gpu_preflight.probes.kernel_log import saved_log_facts

from .conftest import H200_DUMP

OLD = datetime(2025, 1, 21, 4, 0, tzinfo=UTC)
XID79 = "NVRM: Xid (PCI:0000:00:06): 79, pid=1, name=x, GPU has fallen off the bus."


def stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S,000000+00:00")


def old_log(tmp_path: Path) -> Path:
    """An old saved log: Xid 79 at 01:00, another at 03:30, last line at 04:00 (long before now)."""
    path = tmp_path / "old.log"
    path.write_text(f"{stamp(OLD - timedelta(hours=3))} {XID79}\n{stamp(OLD - timedelta(minutes=30))} {XID79}\n"
                    f"{stamp(OLD)} kernel: eth0: link up\n")
    return path


def xid(findings: list) -> list:
    return [f for f in findings if f.check_id == "gpu.xid"]


def test_run_and_judge_count_a_saved_log_in_the_same_window_ending_at_its_last_timestamp(tmp_path: Path) -> None:
    log = old_log(tmp_path)
    (ran,) = xid(run_checks(replay=str(H200_DUMP), kernel_log=str(log), include=["gpu.xid"], environ={}).findings)
    (judged,) = xid(judge_text(log.read_text(), Config()))
    for f in (ran, judged):
        assert f.status is Status.FAIL and f.observed == 1
        assert f.details["window_end"] == OLD and f.details["window_basis"] == "the log's last timestamp"
        assert f.details["events_outside_window"] == 1 and "1 older event(s) left out" in f.summary
    (wide,) = xid(run_checks(replay=str(H200_DUMP), kernel_log=str(log), include=["gpu.xid"],
                             overrides=["xid.window_hours=4"], environ={}).findings)
    assert wide.observed == 2 and wide.details["events_outside_window"] == 0


def test_live_window_ends_now() -> None:
    now = datetime.now(UTC)
    window = xid_window(2, now=now)
    assert (window.end, window.basis) == (now, "now")
    assert xid_window(2, saved=True).end is None  # a saved log without any timestamp keeps every event


@pytest.mark.parametrize("line", [
    "NVRM: Xid (PCI:0000:10:1c): ",
    "NVRM: Xid (PCI:0000:10:1c: 79, pid=1, GPU has fallen off the bus.",
    "NVRM: Xid (PCI:0000:10:1c): -1, pid=1",
    "NVRM: Xid (PCI:0000:10:1c): 79abc",
])
def test_damaged_xid_lines_are_unparsed_events_and_error(tmp_path: Path, line: str) -> None:
    assert isinstance(scan_xid_line(line), UnparsedXid)
    path = tmp_path / "damaged.log"
    path.write_text(f"{stamp(OLD)} {line}\n")
    (f,) = xid(run_checks(replay=str(H200_DUMP), kernel_log=str(path), include=["gpu.xid"], environ={}).findings)
    assert (f.status, f.code) == (Status.ERROR, "xid_unparsed")
    (judged,) = [f for f in judge_text(path.read_text(), Config()) if f.check_id == "gpu.xid"]
    assert judged.status is Status.ERROR


def test_unparsed_line_older_than_the_window_is_counted_outside() -> None:
    item = scan_xid_line(f"{stamp(OLD - timedelta(hours=5))} NVRM: Xid (PCI:0000:10:1c): ")
    tally = count_events([item], xid_window(2, log_end=OLD, saved=True))
    assert (tally.unparsed, tally.unparsed_outside) == (0, 1)


@pytest.mark.parametrize("target", ["/nonexistent/kernel.log", "/dev/zero", "fifo"])
def test_kernel_log_that_is_not_a_regular_file_is_one_line_and_exit_3(tmp_path: Path, target: str) -> None:
    if target == "fifo":
        target = str(tmp_path / "fifo")
        os.mkfifo(target)
    proc = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--replay", str(H200_DUMP),
                           "--kernel-log", target], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and target in proc.stderr


def test_a_large_saved_log_is_streamed_in_flat_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    noise = f"{stamp(OLD)} kernel: " + "x" * 200 + "\n"
    with path.open("w") as fh:
        for i in range(5_000):
            fh.write(noise * 10)
            fh.write(f"{stamp(OLD - timedelta(seconds=2 * (5_000 - i)))} {XID79}\n")
    size = path.stat().st_size
    tracemalloc.start()
    facts = saved_log_facts(None, str(path), 2.0, datetime.now(UTC))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert facts.tally is not None and facts.tally.events == 3601 and facts.tally.outside == 5_000 - 3601
    assert peak < 8 * 1024 * 1024 < size, (peak, size)  # counts and examples, not the 12 MB of lines
