"""The simulator's verdicts stay what they were before the planning was made linear.

Every case of :mod:`tests.localize_cases` is run again and compared, field by field, to
what the scheduler produced when the fixture was recorded: the same rounds and tests, the
same suspects and exclude lists, and the same digest of every judged observation.
"""

from __future__ import annotations

import json

import pytest

from tests.localize_cases import CASES, FIXTURE, run_case, summarize

EXPECTED = json.loads(FIXTURE.read_text())


def test_fixture_covers_every_case() -> None:
    assert sorted(EXPECTED) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_verdicts_as_recorded(name: str) -> None:
    got = summarize(run_case(CASES[name]))
    want = EXPECTED[name]
    for key in want:
        assert got[key] == want[key], (name, key)
