"""The cluster report's JSON, small and above ``report.detail_max_nodes``, stays byte for byte
what it was (see :mod:`tests.cluster_golden`): how the cluster checks hand over their passes
and where they are rolled up is an implementation detail no report may show."""

from __future__ import annotations

import difflib

import pytest

from .cluster_golden import CASES, path, report_json


@pytest.mark.parametrize(("case", "scale"), CASES)
def test_cluster_report_json_is_unchanged(case: str, scale: str) -> None:
    want = path(case, scale).read_text()
    got = report_json(case, scale)
    if got != want:
        diff = "".join(list(difflib.unified_diff(want.splitlines(True), got.splitlines(True), "pinned", "now"))[:80])
        pytest.fail(f"{case}/{scale} report changed:\n{diff}")
