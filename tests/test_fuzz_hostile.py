"""Hostile inputs, bounded: no traceback, no hang, bounded memory, and a cut or damaged failure never passes.

A bounded slice of :mod:`tests.fuzz_engine` (seeded, so a failure reproduces); the
long run is ``bench/bench_fuzz.py``. Formats whose output carries a completeness marker
(dcgmi's closing border and JSON document, nccl-tests' summary, the ports ``ibstat`` and
``ibv_devinfo`` announce, nvidia-smi's GPU sections) must never turn a failing fixture
into a PASS when cut or when a value is garbled. Listings without one (dmesg, lspci,
``nvlink -s``, ``ibstatus``, and ``ibstat``/``ibv_devinfo`` cut exactly between two
devices) cannot tell a cut from a clean end; for them the test still demands no crash,
hang or blow-up, and the bench counts their false passes. The slice is seeded per
fixture, so it is the same on every run.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from .fuzz_engine import (
    Case,
    baselines,
    config_cases,
    evidence_cases,
    evidence_fixtures,
    replay_cases,
    run_case,
    run_config,
    run_replay,
)

TIME_S, MEMORY_MIB = 10.0, 256.0
NO_END_MARKER = ("dmesg-", "lspci-", "nvlink", "ibstatus-")


def _guarded(case: Case) -> bool:
    return not any(marker in case.source for marker in NO_END_MARKER)


def test_fixtures_include_failing_evidence_of_every_marked_format() -> None:
    failing = {name for name, status in baselines().items() if status != "PASS"}
    for name in ("spec-dcgmi-diag-r3-targeted-power-fail.txt", "dcgmi-diag-4.x-fail.json",
                 "nccl-tests-all_reduce-8xh100-wrong.txt", "ibstat-ndr-port-down.txt", "ibv_devinfo-ndr.txt"):
        assert name in failing


@pytest.mark.parametrize("name", [n for n, _ in evidence_fixtures()])
def test_cut_and_damaged_evidence(name: str) -> None:
    rng = random.Random(name)
    problems = []
    for case in evidence_cases(rng, lines_per_cut=12):
        if case.source != name:
            continue
        outcome, detail = run_case(case, time_s=TIME_S, memory_mib=MEMORY_MIB)
        if outcome in ("crash", "hang", "memory") or (outcome == "false_pass" and _guarded(case)):
            problems.append((outcome, case.mutation, detail))
    assert not problems, problems


def test_a_failing_dcgmi_table_cut_after_15_lines_is_not_a_pass() -> None:
    text = dict(evidence_fixtures())["spec-dcgmi-diag-r3-targeted-power-fail.txt"]
    cut = "".join(text.splitlines(keepends=True)[:15])
    assert run_case(Case("spec", "cut", cut, True), time_s=TIME_S, memory_mib=MEMORY_MIB) == ("ok", "ERROR")


def test_a_failing_nccl_tests_log_cut_before_its_summary_is_not_a_pass() -> None:
    text = dict(evidence_fixtures())["nccl-tests-all_reduce-8xh100-wrong.txt"]
    cut = text[:text.index("  2147483648")]
    assert run_case(Case("nccl", "cut", cut, True), time_s=TIME_S, memory_mib=MEMORY_MIB) == ("ok", "ERROR")


def test_replayed_snapshots_load_or_refuse_in_one_line(tmp_path: Path) -> None:
    outcomes = [(what, run_replay(text, tmp_path, time_s=TIME_S, memory_mib=MEMORY_MIB))
                for what, text in replay_cases(random.Random(7), 4)]
    assert not [(what, outcome) for what, outcome in outcomes if outcome[0] != "ok"]
    assert {detail for _, (_, detail) in outcomes} == {"loaded", "refused"}


def test_config_files_load_or_refuse_in_one_line(tmp_path: Path) -> None:
    outcomes = [(what, run_config(data, tmp_path, time_s=TIME_S, memory_mib=MEMORY_MIB))
                for what, data in config_cases(random.Random(7), 12)]
    assert not [(what, outcome) for what, outcome in outcomes if outcome[0] != "ok"]
    assert {detail for _, (_, detail) in outcomes} == {"loaded", "refused"}
