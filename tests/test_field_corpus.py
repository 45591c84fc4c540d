"""The field corpus (``tests/fixtures/field/``, see ``bench/bench_field.py``): real outputs from public threads.

Every case is judged through the real ``gpu-preflight judge`` path. Asserted on the whole
corpus: no false PASS (a text whose thread shows a broken GPU, a slow fabric or an unfinished
run is never exit 0). Asserted on every case outside the held-out quarter: the verdict the
thread concluded. The held-out quarter's matches are reported by the bench, not asserted,
so that its score stays a measure of what the parsers learned rather than a target they were
fitted to. The corpus is ours, in the repository: these run in a fresh clone.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from bench_field import (
    FIELD,
    Case,
    Outcome,
    _by_source,
    false_pass,
    held_out,
    judge,
    load_cases,
    matched,
    scored_under_rules,
)

CASES = load_cases()


def test_the_corpus_is_there() -> None:
    """An empty or unreadable corpus would make every test below vacuous."""
    assert (FIELD / "nccl-tests" / "SOURCES.toml").is_file()
    assert len([c for c in CASES if c.family == "nccl-tests"]) >= 2


def test_every_file_is_a_case() -> None:
    """A text added without its provenance line is not judged silently: each file has its ``[[case]]``."""
    listed = {c.path for c in CASES}
    on_disk = {p for p in FIELD.glob("*/*") if p.name != "SOURCES.toml" and p.is_file()}
    assert on_disk - listed == set()


def test_the_score_by_source_weighs_each_source_once() -> None:
    """A page with three pastes, all missed, and a thread with one, matched: 1 of 4 cases, but half the sources."""
    def result(source: str, got: str) -> tuple[Case, Outcome]:
        case = Case("f", Path("t.txt"), source, "c", "PASS")
        return case, Outcome(got, 0 if got == "PASS" else 2, "k", {}, [])

    results = [result("page", "FAIL")] * 3 + [result("thread", "PASS")]
    assert _by_source(results) == "2 sources, mean share matched 50.0 %, 1 source(s) with a miss"
    assert _by_source([]) == "0 sources"


def test_the_split_is_by_source_with_a_fixed_seed() -> None:
    """The split depends on the source alone (never the file, the date or the machine); a quarter is out."""
    assert held_out("github:NVIDIA/nccl-tests/issues/131") is held_out("github:NVIDIA/nccl-tests/issues/131")
    sources = [f"github:example/repo/issues/{i}" for i in range(4000)]
    assert 900 < sum(map(held_out, sources)) < 1100



def test_an_inspected_case_leaves_the_held_out_quarter_and_only_a_held_out_one_may_say_so(tmp_path: Path) -> None:
    """A held-out case someone saw fail is counted with the rest, named; the key on another case is an error."""
    from bench_field import held_out as in_quarter

    out = next(f"github:x/y/issues/{i}" for i in range(100) if in_quarter(f"github:x/y/issues/{i}"))
    inside = next(f"github:x/y/issues/{i}" for i in range(100) if not in_quarter(f"github:x/y/issues/{i}"))
    family = tmp_path / "kernel"
    family.mkdir()
    (family / "a.txt").write_text("x\n")
    entry = ('[[case]]\nfile = "a.txt"\nsource = "{}"\nurl = "u"\nprovenance = "p"\nlicence = "l"\n'
             'concluded = "c"\nexpect = "FAIL"\ninspected = "seen"\n')
    (family / "SOURCES.toml").write_text(entry.format(out))
    (case,) = load_cases(tmp_path)
    assert case.inspected == "seen" and not case.held_out
    (family / "SOURCES.toml").write_text(entry.format(inside))
    with pytest.raises(ValueError, match="held-out source only"):
        load_cases(tmp_path)


def test_a_rules_label_is_a_verdict_on_a_held_out_case_with_its_reason(tmp_path: Path) -> None:
    """``expect_rules`` is written blind: only on a held-out, uninspected case, one of the verdicts, with its
    ``rules_why``; the case then scores against it, and against ``expect_check`` only where the labels agree."""
    out = next(f"github:x/y/issues/{i}" for i in range(100) if held_out(f"github:x/y/issues/{i}"))
    inside = next(f"github:x/y/issues/{i}" for i in range(100) if not held_out(f"github:x/y/issues/{i}"))
    family = tmp_path / "kernel"
    family.mkdir()
    (family / "a.txt").write_text("x\n")
    head = ('[[case]]\nfile = "a.txt"\nsource = "{}"\nurl = "u"\nprovenance = "p"\nlicence = "l"\n'
            'concluded = "c"\nexpect = "PASS"\nexpect_check = "gpu.xid"\n')
    label = 'expect_rules = "WARN"\nrules_why = "persistence off"\n'
    manifest = family / "SOURCES.toml"
    manifest.write_text(head.format(out) + label)
    (case,) = load_cases(tmp_path)
    assert case.held_out and case.expect_rules == "WARN"
    ruled = case.under_rules()
    assert (ruled.expect, ruled.expect_check) == ("WARN", None)
    manifest.write_text(head.format(out) + label + 'rules_superseded = "abc123: judged since"\n')
    (replaced,) = load_cases(tmp_path)
    assert replaced.held_out and replaced.rules_superseded == "abc123: judged since"
    said = Outcome("PASS", 0, "dmesg", {}, [])
    assert scored_under_rules([(replaced, said)]) == [] and scored_under_rules([(case, said)]) == [(ruled, said)]
    manifest.write_text(head.format(out))
    (plain,) = load_cases(tmp_path)
    assert plain.under_rules() == plain
    for text, message in ((head.format(inside) + label, "held-out case only"),
                          (head.format(out) + label + 'inspected = "seen"\n', "held-out case only"),
                          (head.format(out) + label.replace("WARN", "MAYBE"), "not one of"),
                          (head.format(out) + 'expect_rules = "WARN"\n', "without 'rules_why'"),
                          (head.format(out) + 'rules_why = "w"\n', "without 'expect_rules'"),
                          (head.format(out) + 'rules_superseded = "c: r"\n', "without 'expect_rules'")):
        manifest.write_text(text)
        with pytest.raises(ValueError, match=message) as raised:
            load_cases(tmp_path)
        assert "a.txt" in str(raised.value)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_field_case(case: Case) -> None:
    outcome = judge(case)
    assert not false_pass(case, outcome), (f"false PASS: {case.concluded}", outcome.summaries)
    if not case.held_out:
        assert matched(case, outcome), (case.expect, case.expect_check, outcome.got, outcome.summaries)
