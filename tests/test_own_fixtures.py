"""The project's own evidence fixtures cover every parser, so a clone without the shared corpus
still tests every format; and the facts those fixtures pin down."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.parsers.detect import all_kinds, detect_kind, get_parser

EVIDENCE = Path(__file__).parent / "fixtures" / "evidence"


def own_fixtures() -> list[Path]:
    return sorted(p for p in EVIDENCE.rglob("*") if p.is_file() and p.suffix != ".md")


def test_every_parser_kind_has_an_own_fixture_that_is_detected_and_parsed() -> None:
    kinds: dict[str, Path] = {}
    for path in own_fixtures():
        kind = detect_kind(path.read_text(encoding="utf-8", errors="replace"))
        if kind:
            kinds.setdefault(kind, path)
    assert set(kinds) == {spec.kind for spec in all_kinds()}
    for kind, path in kinds.items():
        assert get_parser(kind).parse(path.read_text(encoding="utf-8")) is not None, path


def test_perftest_megabytes_are_converted_like_mebibytes() -> None:
    """perftest before 4.5 labels its 2^20-byte unit MB/sec: 47,801.55 of them are ~401 Gb/s, not 47,801."""
    record = get_parser("perftest").parse((EVIDENCE / "ib_write_bw-ndr.txt").read_text())
    [row] = record.rows
    assert record.bw_unit == "MB/sec"
    assert row.bw_avg_gbps == pytest.approx(47801.55 * 2**20 * 8 / 1e9, rel=1e-4)
    assert 395 < row.bw_avg_gbps < 405


def test_nccl_tests_fixtures_carry_their_summary() -> None:
    ok = get_parser("nccl-tests").parse((EVIDENCE / "nccl-tests-all_reduce-8xh100.txt").read_text())
    bad = get_parser("nccl-tests").parse((EVIDENCE / "nccl-tests-all_reduce-8xh100-wrong.txt").read_text())
    assert (len(ok.rows), len(bad.rows)) == (31, 31) and ok.nranks == 8
    assert ok.peak_busbw_gbps is not None and ok.peak_busbw_gbps > 470 and ok.wrong_total == 0
    assert bad.wrong_total == 42 and bad.out_of_bounds == 21
