"""Big logs: kernel logs and nccl-tests logs are streamed in flat memory and still say everything.

Chunk boundaries change nothing; a record that keeps only the first and last events
counts every event in any Xid window exactly as a full count would (also after folding);
an nccl-tests record with rows left out keeps every verdict; a cut last run is never
complete; ``parse``/``judge`` stream a file far above the whole-read limit and refuse a
whole-read kind above it in one line; peak memory does not grow with the input.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight import boundedio
from gpu_preflight.boundedio import InputError, iter_chunks
from gpu_preflight.checks.evidence import judge_record
from gpu_preflight.cli import evidence_cmd
from gpu_preflight.config import Config
from gpu_preflight.config.xid_window import count_events, xid_window
from gpu_preflight.model import Status, jsonable
from gpu_preflight.parsers import dmesg, nccl_tests, xid_timeline
from gpu_preflight.parsers.detect import detect_kind
from gpu_preflight.parsers.kernel_log import scan_xid_line

from .peak_rss import peak_rss

FIXTURES = Path(__file__).parent / "fixtures" / "evidence"
DMESG = FIXTURES / "dmesg-xid-h100-node.txt"
NCCL = FIXTURES / "nccl-tests-all_reduce-8xh100.txt"
BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_parse.py"
BASE = datetime(2025, 1, 21, tzinfo=UTC)


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="gpu-preflight")
    evidence_cmd.add_commands(parser.add_subparsers(dest="command", required=True))
    return evidence_cmd.run(parser.parse_args(list(argv)))


def xid_log(seed: int, events: int) -> str:
    """ISO-stamped Xid lines out of order, with repeats, undated lines, damaged lines and filler."""
    rng = random.Random(seed)
    lines: list[str] = []
    for i in range(events):
        t = BASE + timedelta(seconds=rng.randint(0, 20_000), microseconds=rng.randint(0, 999_999))
        pick = rng.random()
        if pick < 0.08:
            lines.append(f"{t:%Y-%m-%dT%H:%M:%S},{t.microsecond:06d}+00:00 NVRM: Xid (PCI:0000:10:1c): ")
        elif pick < 0.16 and lines:
            lines.append(lines[-1])
        elif pick < 0.2:
            lines.append(f"NVRM: Xid (PCI:0000:11:00): {rng.choice([13, 79])}, pid=1, undated {i}")
        elif pick < 0.3:
            lines.append(f"{t:%Y-%m-%dT%H:%M:%S},000000+00:00 kernel: eth0: link up {i}")
        else:
            gpu = f"PCI:0000:{rng.randint(1, 3):02x}:00"
            lines.append(f"{t:%Y-%m-%dT%H:%M:%S},{t.microsecond:06d}+00:00 NVRM: Xid ({gpu}): "
                         f"{rng.choice([13, 48, 79])}, pid={rng.randint(1, 3)}, name=x, message {i % 5}")
    return "\n".join(lines) + "\n"


def summary(tally: Any) -> tuple[object, ...]:
    groups = sorted((g.xid, g.pci, g.count, g.undated, g.first, g.last, g.message) for g in tally.groups)
    return groups, tally.outside, tally.duplicates, tally.unparsed, tally.unparsed_outside


def full_count(text: str, window: Any) -> tuple[object, ...]:
    items = [found for line in text.splitlines() if (found := scan_xid_line(line)) is not None]
    return summary(count_events(items, window))


@pytest.mark.parametrize("hours", [0.25, 2.0, 1000.0])
def test_a_record_that_left_events_out_counts_every_window_exactly(monkeypatch: pytest.MonkeyPatch,
                                                                    hours: float) -> None:
    monkeypatch.setattr(dmesg, "KEPT", 20)
    text = xid_log(seed=7, events=3000)
    record = dmesg.parse(text)
    assert record.omitted["xid_events"] > 2000 and record.omitted["unparsed_xids"] > 0
    assert len(record.xid_events) == 40
    window = xid_window(hours, log_end=datetime.fromisoformat(record.last_timestamp or ""), saved=True)
    assert summary(record.xid_tally(window)) == full_count(text, window)
    assert sum(c.count for c in record.xid_counts) == sum(1 for line in text.splitlines()
                                                          if "Xid" in line and not line.endswith(": "))


def test_folded_events_are_exact_when_old_and_never_undercounted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(xid_timeline, "TIMELINE_MAX", 64)
    monkeypatch.setattr(dmesg, "KEPT", 10)
    old = "".join(f"2025-01-20T00:00:{i % 60:02d},{i:06d}+00:00 NVRM: Xid (PCI:0000:01:00): 79, pid=1, m {i}\n"
                  for i in range(500))
    new = "".join(f"2025-01-21T00:00:{i % 60:02d},{i:06d}+00:00 NVRM: Xid (PCI:0000:01:00): 79, pid=1, m {i}\n"
                  for i in range(40))
    text = old + new
    record = dmesg.parse(text)
    assert record.timeline is not None and record.timeline.folded_until > xid_timeline.UNDATED
    assert record.omitted["xid_events"] == 520 and len(record.timeline.times) < 64
    end = datetime.fromisoformat(record.last_timestamp or "")
    for hours in (2.0, 1000.0):  # after every folded event; before all of them
        window = xid_window(hours, log_end=end, saved=True)
        assert summary(record.xid_tally(window)) == full_count(text, window)
    window = xid_window(24.0 + 1 / 120, log_end=end, saved=True)  # reaches into the folded events
    assert record.xid_tally(window).events >= count_events(
        [scan_xid_line(line) for line in text.splitlines()], window).events


def corpus_logs(corpus: Path) -> list[Path]:
    return [DMESG, NCCL, FIXTURES / "nccl-tests-all_reduce-8xh100-wrong.txt",
            *sorted((corpus / "kernel-xid").iterdir()), *sorted((corpus / "nccl-tests").iterdir())]


def test_chunk_boundaries_change_nothing(corpus: Path, tmp_path: Path) -> None:
    mixed = tmp_path / "iso-then-continuations.log"  # the last dated line is 40 lines before the end
    mixed.write_text("".join(f"2025-01-21T02:{i:02d}:00,000000+00:00 NVRM: Xid (PCI:0000:01:00): 13, pid=1, m\n"
                             for i in range(30)) + "               NVRM: continuation line\n" * 40)
    assert dmesg.parse(mixed.read_text()).last_timestamp == "2025-01-21T02:29:00+00:00"
    for path in [mixed, *corpus_logs(corpus)]:
        kind = "nccl-tests" if "nccl" in path.name else "dmesg"
        module = nccl_tests if kind == "nccl-tests" else dmesg
        try:
            whole = jsonable(module.parse(path.read_bytes().decode("utf-8", errors="replace")))
        except Exception as exc:
            with pytest.raises(type(exc)):
                module.scan(iter_chunks(path, limit=boundedio.STREAM_LIMIT, size=7))
            continue
        for size in (7, 64, 4096):
            assert jsonable(module.scan(iter_chunks(path, limit=boundedio.STREAM_LIMIT, size=size))) == whole, \
                (path.name, size)


def soak_log(runs: int, *, cut: bool = False, wrong_at: int | None = None) -> str:
    table = NCCL.read_text()
    parts = []
    for i in range(runs):
        run = table
        if i == wrong_at:
            run = run.replace("  8589934592    2147483648     float     sum      -1 31332.78  274.15  479.77      0",
                              "  8589934592    2147483648     float     sum      -1 31332.78  274.15  479.77      3")
        parts.append(run)
    text = "".join(parts)
    if cut:
        text += table.split("# Out of bounds")[0]
    return text


def test_nccl_tests_rows_left_out_keep_every_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nccl_tests, "KEPT_ROWS", 10)
    record = nccl_tests.parse(soak_log(50, wrong_at=20))
    assert (record.rows_total, len(record.rows), record.rows_omitted) == (50 * 31, 20, 50 * 31 - 20)
    assert (record.wrong_total, record.wrong_sizes, record.out_of_bounds) == (3, [8589934592], 0)
    assert (record.peak_busbw_gbps, record.peak_size_bytes, record.nranks) == (479.77, 8589934592, 8)
    assert record.best_busbw(1 << 30) == (479.77, 8589934592) and record.best_busbw(1 << 40) is None
    assert not record.incomplete
    findings = judge_record("nccl-tests", record, Config(), source="soak")
    wrong = [f for f in findings if f.code == "wrong_results"]
    assert wrong and wrong[0].status is Status.FAIL and "first at 8589934592 B" in wrong[0].summary


def test_a_cut_last_run_is_incomplete_and_never_passes() -> None:
    record = nccl_tests.parse(soak_log(3, cut=True))
    assert record.incomplete and "after the last 'Out of bounds values'" in record.incomplete[-1]
    findings = judge_record("nccl-tests", record, Config(), source="soak")
    assert any(f.check_id == "evidence.complete" and f.status is Status.ERROR for f in findings)


def test_nccl_tests_behind_hundreds_of_info_lines_is_detected() -> None:
    info = "".join(f"gpu-node-07:41230:41230 [0] NCCL INFO Channel {i % 32:02d}/32 :    0   1   2   3\n"
                   for i in range(600))
    lines = NCCL.read_text().splitlines(keepends=True)
    split = next(i for i, line in enumerate(lines) if "out-of-place" in line)
    text = "".join(lines[:split]) + info + "".join(lines[split:])
    assert detect_kind(text[:evidence_cmd_sniff()]) == "nccl-tests"
    record = nccl_tests.parse(text)
    assert record.rows_total == 31 and record.nranks == 8 and not record.incomplete


def evidence_cmd_sniff() -> int:
    from gpu_preflight.parsers.detect import SNIFF_WINDOW

    return SNIFF_WINDOW


def test_streamed_kinds_pass_the_whole_read_limit_and_others_are_refused_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(boundedio, "EVIDENCE_LIMIT", 64 * 1024)
    big = tmp_path / "dmesg.log"
    big.write_text(DMESG.read_text() * 200)  # 300 KB: over the (patched) whole-read limit
    assert cli("parse", str(big)) == 0
    record = json.loads(capsys.readouterr().out)["record"]
    assert sum(c["count"] for c in record["xid_counts"]) == 5 * 200
    assert cli("judge", str(big), "--format", "json") == 2
    capsys.readouterr()
    csv = tmp_path / "smi.csv"
    csv.write_text("index, name, temperature.gpu\n" + "0, NVIDIA H100 80GB HBM3, 40\n" * 5000)
    assert cli("parse", str(csv), "--kind", "nvidia-smi-csv") == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "read whole for nvidia-smi-csv" in err


def test_chunks_refuse_wide_text_and_drop_a_utf8_bom(tmp_path: Path) -> None:
    wide = tmp_path / "wide.log"
    wide.write_bytes("[ 1.0] NVRM: Xid\n".encode("utf-16"))
    with pytest.raises(InputError, match="UTF-16"):
        list(iter_chunks(wide, limit=1 << 20))
    bom = tmp_path / "bom.log"
    bom.write_bytes(b"\xef\xbb\xbfa\nb\nc")
    assert list(iter_chunks(bom, limit=1 << 20, size=2)) == [b"a\n", b"b\n", b"c"]
    with pytest.raises(InputError, match="more than"):
        list(iter_chunks(bom, limit=4))


def test_peak_memory_does_not_grow_with_the_log(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH.parent))
    try:
        import bench_parse
    finally:
        sys.path.remove(str(BENCH.parent))
    rss = {}
    for kind, make in (("dmesg", bench_parse.kernel_log), ("nccl-tests", bench_parse.nccl_tests_log)):
        for mb in (2, 24):
            path = tmp_path / f"{kind}-{mb}.log"
            make(path, mb * 1_000_000, random.Random(1))
            for command in ("parse", "judge"):
                code, rss[kind, command, mb] = peak_rss([command, str(path)], tmp_path)
                assert code in (0, 1, 2), (kind, command, code)
    grown = {key[:2]: rss[(*key[:2], 24)] - rss[(*key[:2], 2)] for key in rss if key[2] == 2}
    assert all(delta < 16 for delta in grown.values()), rss  # a whole read would add > 22 MB of text alone


def test_bench_runs_and_agrees_with_its_floor() -> None:
    proc = subprocess.run([sys.executable, str(BENCH), "--size-mb", "1", "--repeat", "1", "--kernel-log-mb", "0.5"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("-> agree") == proc.stdout.count("items:") >= 3, proc.stdout  # every log kind agrees
    assert "MB/s" in proc.stdout and "adds" in proc.stdout


def test_lines_dropped_as_nccl_info_keep_the_line_numbers_of_what_follows() -> None:
    info = "".join(f"gpu-node-07:41230:41230 [0] NCCL INFO Channel {i:02d}/32 :    0   1\n" for i in range(40))
    lines = NCCL.read_text().splitlines(keepends=True)
    split = next(i for i, line in enumerate(lines) if "out-of-place" in line)
    damaged = "         8             2     float     sum      -1    15.31    0.00    0.00      0    15.47\n"
    # a row follows the damaged one: a paste merely cut inside its LAST row is read as cut, not refused
    text = "".join(lines[:split]) + info + "".join(lines[split:split + 3]) + damaged + lines[split + 3]
    assert "version" not in text and "_perf" not in text  # the fast path: INFO lines dropped in bulk
    with pytest.raises(nccl_tests.ParseError, match=r"\(line 56\)"):
        nccl_tests.parse(text)
    assert text.splitlines()[55] == damaged.rstrip("\n")
