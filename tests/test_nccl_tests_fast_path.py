"""The nccl-tests fast path (bulk INFO filtering, row regex over a window, rows counted by column)
says exactly what the plain path says: every line through ``NcclTestsScanner.feed`` and every
row built into an object and counted one by one (``_count``).

The reference below is that plain path; the inputs are the corpus and fixture logs and the
variants a soak log produces in the field (``NCCL_DEBUG=INFO`` lines with ``NCCL version`` in
and between tables, launcher prefixes, damaged and ``N/A`` cells, CRLF and the other line
breaks ``str.splitlines`` knows, a header that changes mid-log, a cut last run), streamed in
chunks of several sizes.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from gpu_preflight import boundedio
from gpu_preflight.boundedio import iter_chunks
from gpu_preflight.checks.evidence import judge_record
from gpu_preflight.config import Config
from gpu_preflight.model import jsonable
from gpu_preflight.parsers import nccl_tests
from gpu_preflight.parsers.errors import ParseError
from gpu_preflight.parsers.text import ContentGate

FIXTURES = Path(__file__).parent / "fixtures" / "evidence"
NCCL = FIXTURES / "nccl-tests-all_reduce-8xh100.txt"
WRONG = FIXTURES / "nccl-tests-all_reduce-8xh100-wrong.txt"
INFO = "gpu-node-07:41230:41301 [0] NCCL INFO Channel 03/32 :    0   1   2   3   4   5   6   7"
VERSION = "gpu-node-07:41230:41230 [0] NCCL INFO NCCL version 2.19.3+cuda12.3"


class _PlainScanner(nccl_tests.NcclTestsScanner):
    """Rows read whole by their header's regex are built and counted one at a time, as before batching."""

    def _add_rows(self, layout: nccl_tests._Layout, batch: list[tuple[str, ...]]) -> None:
        for values in batch:
            self._add(layout.build(values))


def plain(text: str) -> nccl_tests.NcclTestsRecord:
    gate = ContentGate(nccl_tests.KIND)
    gate.check(text.encode("utf-8", errors="surrogatepass"))
    gate.finish()
    scanner = _PlainScanner()
    for line in text.splitlines():
        scanner.feed(line)
    return scanner.finish()


def outcome(read: Callable[[], nccl_tests.NcclTestsRecord]) -> object:
    try:
        return jsonable(read())
    except ParseError as exc:
        return f"ParseError: {exc}"


def soak(table: str, rng: random.Random, runs: int) -> str:
    """Runs of ``table`` as a soak loop writes them with NCCL_DEBUG=INFO, some INFO lines inside the table."""
    lines = table.splitlines(keepends=True)
    out = []
    for _ in range(runs):
        out.append("# nccl-tests version 2.17.1 nccl-headers=21903 nccl-library=21903\n"
                   "# Collective test starting: all_reduce_perf\n")
        out.extend(f"{INFO}\n" for _ in range(rng.randrange(0, 40)))
        out.append(f"{VERSION}\n")
        for line in lines:
            out.append(line)
            if rng.random() < 0.05:
                out.append(f"{INFO}\n")
        out.append("# Collective test concluded: all_reduce_perf\n")
    return "".join(out)


def variants(name: str, text: str, seed: int) -> dict[str, str]:
    rng = random.Random(seed)
    lines = text.splitlines(keepends=True)
    damaged = []
    for line in lines:
        if line.strip()[:1].isdigit() and rng.random() < 0.3:
            cells = line.split()
            cells[rng.randrange(len(cells))] = rng.choice(
                ["N/A", "nan", "1e3", "+3", ".5", "5.", "inf", "12a", "1.2.3", "\u0661", "7\xa0"])
            line = "  " + "  ".join(cells) + "\n"
        damaged.append(line)
    return {
        name: text,
        f"{name} soak": soak(text, rng, 3),
        f"{name} soak, the second run on other hosts": soak(text, rng, 1) + soak(text.replace(" on ", " on x"), rng, 1),
        f"{name} soak, last run cut": soak(text, rng, 2) + "".join(lines[: len(lines) * 2 // 3]),
        f"{name} srun --label": "".join(f"{i % 3}: {line}" for i, line in enumerate(soak(text, rng, 2).splitlines(
            keepends=True))),
        f"{name} rows labelled too long to be a prefix": "".join(
            f"{'1' * 24}: {line}" if line[:1] == " " and rng.random() < 0.5 else line for line in lines),
        f"{name} --tag-output": "".join(f"[1,{i % 4}]<stdout>:{line}" for i, line in enumerate(lines)),
        f"{name} damaged": soak("".join(damaged), rng, 2),
        f"{name} CRLF and other breaks": soak(text, rng, 2).replace("\n", "\r\n", 40).replace(
            f"{INFO}\n", f"{INFO}\x0b", 3).replace("#\n", "#\u2028", 2),
    }


def inputs(corpus: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for path in [NCCL, WRONG, FIXTURES / "nccl-duplicate-gpu-error.txt", *sorted((corpus / "nccl-tests").iterdir())]:
        found.update(variants(path.name, path.read_bytes().decode("utf-8", errors="replace"), len(found)))
    legacy = (corpus / "nccl-tests" / "deepops-all_reduce-legacy-error-column-roce-k8s.txt").read_text()
    found["two headers alternating"] = soak(NCCL.read_text(), random.Random(1), 2) + soak(legacy, random.Random(2), 2) \
        + soak(NCCL.read_text(), random.Random(3), 1)
    found["rows before any header"] = "   8   2  float  sum  -1  1.0  0.0  0.0  0\n" + NCCL.read_text()
    found["an INFO line naming a version from a host named by digits, in the table"] = NCCL.read_text().replace(
        "(GB/s)       \n", "(GB/s)       \n10-0-0-7:41230:41230 [0] NCCL INFO NCCL version 2.19.3+cuda12.3\n", 1)
    failure = "gpu-node-07: [0] NCCL INFO Test NCCL failure common.cu:1032 'unhandled error'"
    found["Test NCCL failure in an INFO line"] = soak(NCCL.read_text(), random.Random(4), 2).replace(
        f"{VERSION}\n", f"{VERSION}\n{failure}\n", 1)
    warn = ("gpu-node-07:41230:41301 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
            "10.0.0.8<40112> with status=12 opcode=0 len=0 vendor err 129 (Recv)")
    found["an NCCL WARN naming a failure, repeated in and between tables"] = soak(
        NCCL.read_text(), random.Random(5), 2).replace(f"{VERSION}\n", f"{VERSION}\n{warn}\n{warn}\n", 3)
    return found


def test_the_fast_path_says_what_the_plain_path_says(corpus: Path, tmp_path: Path) -> None:
    cases = inputs(corpus)
    assert len(cases) > 100
    for name, text in cases.items():
        expected = outcome(partial(plain, text))
        assert outcome(partial(nccl_tests.parse, text)) == expected, name
        path = tmp_path / "log"
        path.write_bytes(text.encode("utf-8", errors="surrogatepass"))
        for size in (97, 4096):
            chunks = iter_chunks(path, limit=boundedio.STREAM_LIMIT, size=size)
            assert outcome(partial(nccl_tests.scan, chunks)) == expected, (name, size)


def test_the_cases_reach_every_path(corpus: Path) -> None:
    """The comparison above is only worth something if the inputs hit what the fast path skips or reroutes."""
    results = {name: outcome(partial(plain, text)) for name, text in inputs(corpus).items()}
    records = [r for r in results.values() if isinstance(r, dict)]
    assert any(isinstance(r, str) and "values where the header names" in r for r in results.values())
    assert any(r["incomplete"] and "unreadable" in r["incomplete"][0] for r in records)
    assert any(group["count"] > 1 for r in records for group in r["warn_causes"])  # WARN lines read, repeats counted
    assert any(r["errors"] for r in records) and any(r["wrong_total"] for r in records)
    assert any(r["max_error"] is not None for r in records)
    assert any(r["nccl_version"] == "2.19.3+cuda12.3" for r in records)


def test_a_soak_log_lists_each_rank_once_and_judges_as_one_run() -> None:
    one = nccl_tests.parse(NCCL.read_text())
    many = nccl_tests.parse(soak(NCCL.read_text(), random.Random(5), 40))
    assert many.gpus == one.gpus and len(many.gpus) == 8 and many.rows_total == 40 * one.rows_total
    assert (many.peak_busbw_gbps, many.busbw_by_size, many.nranks) == (one.peak_busbw_gbps, one.busbw_by_size, 8)
    statuses = [(f.check_id, f.code, f.status) for f in judge_record("nccl-tests", one, Config(), source="s")]
    assert [(f.check_id, f.code, f.status) for f in judge_record("nccl-tests", many, Config(), source="s")] \
        == statuses


@pytest.mark.parametrize("busbw", ["479.77", "479.78"])
def test_a_peak_repeated_at_a_larger_size_keeps_the_smaller_size(busbw: str) -> None:
    table = NCCL.read_text().replace("  4294967296    1073741824     float     sum      -1 15674.05  274.02  479.53",
                                     f"  4294967296    1073741824     float     sum      -1 15674.05  274.02  {busbw}")
    record = nccl_tests.parse(table + table)
    assert record.peak_busbw_gbps == float(busbw)
    assert record.peak_size_bytes == 4294967296
