"""Fuzzing every parser: whatever the input, a record or a ParseError, never another exception.

Inputs are arbitrary text, arbitrary bytes (decoded as the CLI decodes files), and real
corpus outputs truncated, garbled, shuffled, spliced with each other and repeated into a
large file. For each input every registered parser runs, detection runs, and ``judge``
turns a parse failure into one clear ERROR finding.
"""

from __future__ import annotations

import time
from functools import cache
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import all_kinds, detect_kind, get_parser
from gpu_preflight.parsers.errors import ParseError

from .conftest import corpus_present, corpus_root

FIXTURES = Path(__file__).parent / "fixtures" / "evidence"
FUZZ = settings(max_examples=250, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
NOISE = "|:#\n\t 0123456789abcxyzACTIVE[](){}<>-.=/\"',\x1b\r+*_"


@cache
def samples() -> tuple[str, ...]:
    files = sorted(p for p in corpus_root().rglob("*") if p.is_file() and p.name != "MANIFEST.md")
    own = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix != ".md")
    assert len(own) > 10 and (len(files) > 100 or not corpus_present())  # the corpus adds 100+ real outputs
    files += own
    return tuple(p.read_bytes().decode("utf-8", errors="replace") for p in files)


@st.composite
def mangled(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(samples()))
    how = draw(st.sampled_from(("truncate", "garble", "shuffle", "splice", "drop_lines")))
    if how == "truncate":
        return text[:draw(st.integers(0, len(text)))]
    if how == "garble":
        chars = list(text)
        for _ in range(draw(st.integers(1, 40))):
            if chars:
                chars[draw(st.integers(0, len(chars) - 1))] = draw(st.sampled_from(NOISE))
        return "".join(chars)
    lines = text.splitlines()
    if how == "shuffle":
        return "\n".join(draw(st.permutations(lines)))
    if how == "drop_lines":
        return "\n".join(line for line in lines if draw(st.booleans()))
    other = draw(st.sampled_from(samples()))
    return text[:draw(st.integers(0, len(text)))] + other[draw(st.integers(0, len(other))):]


INPUTS = st.one_of(
    st.text(max_size=2000),
    st.binary(max_size=2000).map(lambda b: b.decode("utf-8", errors="replace")),
    st.text(alphabet=NOISE, max_size=3000),
    mangled(),
)


def parse_all(text: str) -> None:
    """Every parser on ``text``: a record or a ParseError naming its kind."""
    for spec in all_kinds():
        try:
            spec.parse(text)
        except ParseError as exc:
            assert exc.kind == spec.kind, (spec.kind, exc)
            assert str(exc)


@FUZZ
@given(INPUTS)
def test_every_parser_returns_a_record_or_a_parse_error(text: str) -> None:
    parse_all(text)
    kind = detect_kind(text)
    assert kind is None or kind in {s.kind for s in all_kinds()}


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(INPUTS, st.sampled_from(sorted(s.kind for s in all_kinds())))
def test_judge_never_crashes_and_reports_parse_failures(text: str, kind: str) -> None:
    findings = judge_text(text, Config(), kind=kind, source="fuzz")
    assert findings
    assert not [f for f in findings if f.check_id == "evidence.judge"], findings  # no judge crash
    parse_errors = [f for f in findings if f.check_id == "evidence.parse"]
    if parse_errors:
        assert len(findings) == 1 and parse_errors[0].status is Status.ERROR
        assert parse_errors[0].summary.startswith(f"could not read fuzz as {kind}")


def test_empty_and_binary_input() -> None:
    for text in ("", "\n\n  \n", "\x00\x01\x02binary", "\ufffd\ufffd"):
        parse_all(text)
        assert detect_kind(text) is None
        finding = judge_text(text, Config(), kind="nccl-tests", source="x")[0]
        assert (finding.check_id, finding.status) == ("evidence.parse", Status.ERROR)


def test_huge_inputs_parse_in_reasonable_time() -> None:
    """A sample of each kind repeated to about 1 MB: its parser stays linear (a quadratic one takes minutes)."""
    one_per_kind = {kind: s for s in samples() if (kind := detect_kind(s))}
    assert set(one_per_kind) == {s.kind for s in all_kinds()}
    for kind, sample in one_per_kind.items():
        huge = (sample.rstrip("\n") + "\n") * max(1, 1_000_000 // len(sample))
        started = time.perf_counter()
        try:
            get_parser(kind).parse(huge)
        except ParseError as exc:
            assert exc.kind == kind
        assert detect_kind(huge) is not None
        assert time.perf_counter() - started < 20, kind
