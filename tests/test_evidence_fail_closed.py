"""Evidence is judged through the engine's fail-closed path: one ERROR code per failure mode
(no judge, crash, silence, timeout), never a pass and never a hang (issue 15)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gpu_preflight import engine
from gpu_preflight.checks.evidence import JUDGES, judge_record, judges
from gpu_preflight.config import Config
from gpu_preflight.model import Finding, Status
from gpu_preflight.registry import CheckContext, CheckSpec

RELEASE = threading.Event()


@pytest.fixture
def odd_judges() -> Iterator[None]:
    with JUDGES.scoped():
        @judges("zz-crash")
        def crash(record: Any, config: Config, source: str) -> list[Finding]:
            """Raises."""
            raise ValueError("odd record")

        @judges("zz-silent")
        def silent(record: Any, config: Config, source: str) -> list[Finding]:
            """Says nothing."""
            return []

        @judges("zz-hang")
        def hang(record: Any, config: Config, source: str) -> list[Finding]:
            """Never returns in time."""
            RELEASE.wait(30)
            return []

        RELEASE.clear()
        yield
        RELEASE.set()


def one(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, findings
    return findings[0]


@pytest.mark.parametrize("kind, code, summary", [
    ("zz-none", "no_judge", "no judgement rules for evidence kind 'zz-none'"),
    ("zz-crash", "judge_crashed", "judging zz-crash raised ValueError: odd record"),
    ("zz-silent", "no_result", "the zz-silent judge produced no finding"),
])
def test_each_failure_mode_is_its_own_error(odd_judges: None, kind: str, code: str, summary: str) -> None:
    for findings in (judge_record(kind, object(), Config(), source="f.txt"),
                     engine.judge_evidence(kind, object(), Config(), source="f.txt", timeout_s=5)):
        f = one(findings)
        assert (f.check_id, f.status, f.subject, f.code) == ("evidence.judge", Status.ERROR, "f.txt", code)
        assert f.summary.startswith(summary)


def test_a_hanging_judge_is_an_error_within_its_limit(odd_judges: None) -> None:
    t0 = time.perf_counter()
    f = one(engine.judge_evidence("zz-hang", object(), Config(), source="f.txt", timeout_s=0.3))
    assert time.perf_counter() - t0 < 5
    assert (f.check_id, f.status, f.code) == ("evidence.judge", Status.ERROR, "judge_timeout")
    assert f.summary == "judging zz-hang did not finish within 0.3 s"


def test_checks_and_judges_share_the_engine_path() -> None:
    """The check path gives the same shape for a crash as the judge path: one ERROR, where it was raised."""
    def boom(ctx: CheckContext) -> list[Finding]:
        raise ZeroDivisionError("x")

    spec = CheckSpec("zz.boom", boom, (), "Boom", "Boom.")
    result = engine._evaluate(spec, CheckContext("h", {}, Config()), {})
    f = one(result.findings)
    assert (f.code, f.status) == ("check_crashed", Status.ERROR)
    assert f.summary.startswith("check raised ZeroDivisionError: x (") and "test_evidence_fail_closed.py" in f.summary

