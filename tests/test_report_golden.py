"""The JSON layout of a fixed multi-node report, against a golden list of key paths and types.

The report is :func:`tests.assessment_data.multinode_report`: four H200 nodes through the
real cluster aggregation, scoring and advice (a slow link, a slow GPU, a busy GPU, a hot
GPU, two fi_pingpong pairs, three earlier runs' scores). Each line of
``tests/fixtures/report/multinode-paths.txt`` is one key path (``nodes.node_<i>.gpu.gpu_<i>.name``,
list items as ``[]``) and the JSON types found there. Node facts and the free-form parts of
a finding (``details``, ``observed``, ``expected``) are left out: they are the checks'
own records, not the report's layout. Its console view is golden in tests/test_console.py.

After a deliberate layout change (bump ``SCHEMA_VERSION`` and regenerate the schema too),
regenerate and review::

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_report_golden.py -q
    git diff tests/fixtures/report/
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path
from typing import Any

from gpu_preflight.findings.model import ClusterReport

from .report_schema_check import problems

GOLDEN = Path(__file__).parent / "fixtures" / "report" / "multinode-paths.txt"
FREE_FORM = re.compile(r"^nodes\.node_<i>\.facts\.|\.(details|observed|expected)(\.|\[|$)")
NUMBERED = re.compile(r"^(node|gpu)_\d+$")
TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null", dict: "object",
         list: "array"}


def key_paths(value: Any, path: str = "", out: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
    """Every key path of a JSON value with the types found there."""
    out = {} if out is None else out
    if path and FREE_FORM.search(path):
        return out
    out.setdefault(path or "(root)", set()).add(TYPES[type(value)])
    if isinstance(value, dict):
        for key, item in value.items():
            name = NUMBERED.sub(lambda m: f"{m.group(1)}_<i>", key)
            key_paths(item, f"{path}.{name}" if path else name, out)
    elif isinstance(value, list):
        for item in value:
            key_paths(item, f"{path}[]", out)
    return out


@functools.cache
def fixed_report() -> dict[str, Any]:
    from .assessment_data import multinode_report

    report = multinode_report()
    return json.loads(json.dumps(report))  # as report.json holds it


def lines(report: dict[str, Any]) -> str:
    return "".join(f"{path}: {' | '.join(sorted(types))}\n" for path, types in sorted(key_paths(report).items()))


def test_layout_golden() -> None:
    text = lines(fixed_report())
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8"), f"{GOLDEN.name} differs (UPDATE_GOLDEN=1 regenerates it)"


def test_the_fixed_report_is_valid_and_round_trips() -> None:
    report = fixed_report()
    assert problems(report) == []
    assert ClusterReport.from_dict(report).to_dict() == report


def test_key_paths_see_a_type_change() -> None:
    report = json.loads(json.dumps(fixed_report()))
    report["nodes"]["node_0"]["node_info"]["world_size"] = "8"
    assert lines(report) != lines(fixed_report())
