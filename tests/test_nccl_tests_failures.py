"""``Test ... failure`` lines of nccl-tests: counted exactly, listed first and last, judged by group.

An aborted job at scale prints one failure line per rank and iteration; the record keeps the
exact count, the counts by (signature, host) and the first and last ``KEPT_FAILURES`` lines, and
the judge makes one FAIL per group. The last test runs ``parse`` and ``judge`` on 200,000 such
lines in child processes and holds their peak memory under 200 MB.
"""

from __future__ import annotations

import json
from collections import Counter
from itertools import cycle, islice, product
from pathlib import Path

from gpu_preflight.checks.evidence import judge_record
from gpu_preflight.checks.evidence_nccl import ADVICE
from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status, jsonable
from gpu_preflight.parsers import nccl_tests
from gpu_preflight.records.nccl import (
    FAILURE_EXAMPLES,
    FAILURE_MESSAGE_CHARS,
    KEPT_FAILURES,
    MAX_FAILURE_GROUPS,
    NcclTestFailure,
    NcclTestsRecord,
)

from .peak_rss import peak_rss

# (kind, where, message, the signature parsers/nccl_log.py gives it)
MESSAGES = (
    ("NCCL", "common.cu:958", "invalid usage (run with NCCL_DEBUG=WARN for details)", "invalid_usage"),
    ("NCCL", "common.cu:1032", "unhandled system error (run with NCCL_DEBUG=INFO for details)", "system_error"),
    ("NCCL", "all_reduce.cu:44", "remote process exited or there was a network error", "remote_error"),
    ("CUDA", "common.cu:892", "an illegal memory access was encountered", "cuda_kernel_fault"),
)
HOSTS = tuple(f"gpu-node-{i:03d}" for i in range(8))


def failures(count: int, hosts: tuple[str, ...] = HOSTS) -> list[str]:
    """``count`` failure lines, each followed by the `` .. host pid N: Test failure`` line nccl-tests prints after
    it, cycling over every (host, message) pair."""
    lines = []
    pairs = cycle(product(hosts, MESSAGES))
    for n, (host, (kind, where, message, _)) in enumerate(islice(pairs, count)):
        lines.append(f"{host}: Test {kind} failure {where} '{message}'")
        lines.append(f" .. {host} pid {1000 + n}: Test failure {where}")
    return lines


def expected_groups(lines: list[str]) -> Counter[tuple[str | None, str]]:
    signature = {message: sig for _, _, message, sig in MESSAGES}
    return Counter((signature[line.split("'")[1]], line.split(":")[0]) for line in lines if line.endswith("'"))


def scan(text: str) -> NcclTestsRecord:
    return nccl_tests.scan([text.encode()])


def test_counts_are_exact_and_only_the_first_and_last_lines_are_listed() -> None:
    lines = failures(2 * KEPT_FAILURES + 300)
    record = scan("\n".join(lines) + "\n")
    listed = [line for line in lines if line.endswith("'")]
    assert record.errors_total == len(listed) == 2 * KEPT_FAILURES + 300
    assert record.errors_omitted == 300 and len(record.errors) == 2 * KEPT_FAILURES
    shown = [f"{e.host}: Test {e.kind} failure {e.file}:{e.line} '{e.message}'" for e in record.errors]
    assert shown == listed[:KEPT_FAILURES] + listed[-KEPT_FAILURES:]
    assert Counter({(g.signature, g.host): g.count for g in record.failure_groups}) == expected_groups(lines)
    assert sum(g.count for g in record.failure_groups) == record.errors_total
    assert record.failure_count() == record.errors_total and record.incomplete == []


def test_a_short_log_lists_every_line_and_the_plain_path_agrees() -> None:
    lines = failures(KEPT_FAILURES + 7)
    text = "\n".join(lines) + "\n"
    record = scan(text)
    assert (record.errors_total, record.errors_omitted, len(record.errors)) == (KEPT_FAILURES + 7, 0, KEPT_FAILURES + 7)
    scanner = nccl_tests.NcclTestsScanner()
    for line in lines:
        scanner.feed(line)
    assert jsonable(scanner.finish()) == jsonable(record)
    chunked = nccl_tests.scan("".join(f"{line}\n" for line in lines[i:i + 77]).encode()
                              for i in range(0, len(lines), 77))
    assert jsonable(chunked) == jsonable(record)


def test_examples_are_the_first_distinct_lines_of_a_group() -> None:
    text = "".join(f"h1: Test NCCL failure common.cu:{where} 'unhandled system error'\n"
                   for where in (958, 958, 1032, 958, 1040, 1050, 1032))
    (group,) = scan(text).failure_groups
    assert (group.signature, group.host, group.count) == ("system_error", "h1", 7)
    assert [e.line for e in group.examples] == [958, 1032, 1040][:FAILURE_EXAMPLES]


def test_hosts_beyond_the_group_limit_are_counted_together_per_signature() -> None:
    hosts = tuple(f"n{i}" for i in range(MAX_FAILURE_GROUPS + 50))
    text = "".join(f"{host}: Test NCCL failure common.cu:958 'invalid usage'\n" for host in hosts * 2)
    record = scan(text)
    assert record.errors_total == 2 * len(hosts)
    apart = [g for g in record.failure_groups if not g.other_hosts]
    (rest,) = [g for g in record.failure_groups if g.other_hosts]
    assert len(apart) == MAX_FAILURE_GROUPS and {g.count for g in apart} == {2}
    assert (rest.host, rest.signature, rest.count) == (None, "invalid_usage", 100)
    findings = [f for f in judge_record("nccl-tests", record, Config(), source="log")
                if f.check_id == "nccl_tests.correctness"]
    assert len(findings) == MAX_FAILURE_GROUPS + 1 and sum(int(f.observed) for f in findings) == record.errors_total
    assert "further hosts" in findings[-1].summary and findings[-1].subject == "log"


def test_judge_makes_one_fail_per_signature_and_host_with_the_exact_count() -> None:
    lines = failures(5000)
    findings = judge_text("\n".join(lines) + "\n", Config(), kind="nccl-tests", source="n1")
    aborted = [f for f in findings if f.check_id == "nccl_tests.correctness"]
    groups = expected_groups(lines)
    assert Counter({(f.code if f.code != "nccl_failure" else None, f.subject.removeprefix("n1/")): int(f.observed)
                    for f in aborted}) == groups
    assert all(f.status is Status.FAIL and f.unit == "lines" for f in aborted)
    worst = max(aborted, key=lambda f: int(f.observed))
    assert worst.summary.startswith(f"test aborted {worst.observed} times: ")
    assert 1 <= len(worst.details["examples"]) <= FAILURE_EXAMPLES
    assert worst.details["examples"][0] in lines
    assert worst.recommendation == ADVICE[worst.code].recommendation


def test_a_record_built_with_errors_only_is_grouped_from_them() -> None:
    one = NcclTestFailure("h1", "NCCL", "common.cu", 958, "invalid usage", "invalid_usage")
    other = NcclTestFailure("h2", "NCCL", "common.cu", 958, "invalid usage", "invalid_usage")
    record = NcclTestsRecord(errors=[one, one, other])
    assert record.failure_count() == 3
    assert [(g.host, g.count, len(g.examples)) for g in record.failures_by_group()] == [("h1", 2, 1), ("h2", 1, 1)]
    findings = list(judge_record("nccl-tests", record, Config(), source="s"))
    assert [(f.subject, f.status, f.observed) for f in findings if f.check_id == "nccl_tests.correctness"] == [
        ("s/h1", Status.FAIL, 2), ("s/h2", Status.FAIL, 1)]


def test_200000_failure_lines_parse_and_judge_in_flat_memory(tmp_path: Path) -> None:
    log = tmp_path / "aborted.log"
    lines = failures(200_000)
    log.write_text("\n".join(lines) + "\n")
    groups = expected_groups(lines)
    del lines
    code, parse_mb = peak_rss(["parse", str(log)], tmp_path, tmp_path / "parse.json")
    record = json.loads((tmp_path / "parse.json").read_text())["record"]
    assert code == 0 and record["errors_total"] == 200_000 and len(record["errors"]) == 2 * KEPT_FAILURES
    assert sum(g["count"] for g in record["failure_groups"]) == 200_000
    code, judge_mb = peak_rss(["judge", str(log), "--format", "json"], tmp_path, tmp_path / "judge.json")
    findings = [f for f in json.loads((tmp_path / "judge.json").read_text())["findings"]
                if f["check_id"] == "nccl_tests.correctness"]
    assert code == 2 and {f["status"] for f in findings} == {"FAIL"}
    assert len(findings) == len(groups) <= len(HOSTS) * len(MESSAGES)
    assert sum(f["observed"] for f in findings) == 200_000
    assert parse_mb < 200 and judge_mb < 200, (parse_mb, judge_mb)


def test_long_failure_lines_are_cut_and_not_remembered(tmp_path: Path) -> None:
    """A damaged log's failure lines can each run to megabytes (a line may hold 16 MiB): messages are kept cut,
    and such lines are not remembered, so what is kept does not grow with the line length."""
    log = tmp_path / "long.log"
    with log.open("w") as fh:
        for i in range(50):
            fh.write(f"h{i}: Test NCCL failure common.cu:958 'unhandled system error {'x' * 1_000_000}{i}'\n")
    code, parse_mb = peak_rss(["parse", str(log)], tmp_path, tmp_path / "parse.json")
    record = json.loads((tmp_path / "parse.json").read_text())["record"]
    assert code == 0 and record["errors_total"] == 50 and len(record["failure_groups"]) == 50
    assert {len(e["message"]) for e in record["errors"]} == {FAILURE_MESSAGE_CHARS + len("... (cut)")}
    assert {e["signature"] for e in record["errors"]} == {"system_error"}
    code, judge_mb = peak_rss(["judge", str(log), "--format", "json"], tmp_path, tmp_path / "judge.json")
    assert code == 2 and parse_mb < 200 and judge_mb < 200, (parse_mb, judge_mb)


def test_a_cuda_failure_is_classified_as_the_cuda_error_it_quotes() -> None:
    """nccl-tests' ``Test CUDA failure`` quotes cudaGetErrorString: 'out of memory' is the out-of-memory
    signature (advice: smaller -e / fewer GPUs per process), a kernel's own fault (an illegal address) a kernel fault
    (docs/repertoire/cuda-errors.md), any other CUDA error a CUDA error."""
    text = ("n1: Test CUDA failure common.cu:892 'out of memory'\n"
            "n1: Test CUDA failure common.cu:892 'an illegal memory access was encountered'\n"
            "n2: Test NCCL failure common.cu:958 'unhandled cuda error (run with NCCL_DEBUG=INFO for details)'\n"
            "n3: Test NCCL failure common.cu:958 'out of memory'\n")  # NCCL's own words: no CUDA error said
    record = scan(text)
    assert [(g.signature, g.host, g.count) for g in record.failure_groups] == [
        ("out_of_memory", "n1", 1), ("cuda_kernel_fault", "n1", 1), ("cuda_error", "n2", 1), (None, "n3", 1)]
