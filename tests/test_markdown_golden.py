"""The Markdown health assessment of a fixed multi-node report, against a golden file.

``tests/fixtures/assessment/multinode-report.json`` is the report of
:func:`tests.assessment_data.multinode_report` (four H200 nodes through the real cluster
aggregation, with a slow link, a slow GPU, a slow node fabric, a busy GPU, a hot GPU, two
fi_pingpong pairs and three earlier runs' scores). The derived blocks (health scores,
recommendations, cost-benefit, assessment) are dropped before rendering, so the golden
file follows what the scoring and assessment code derive today, not what they derived
when the report was saved.

After a deliberate change of the layout or of a derivation, regenerate and review::

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_markdown_golden.py -q
    git diff tests/fixtures/assessment/

``UPDATE_GOLDEN=report`` also rebuilds the report itself (after a change of the JSON layout).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

from gpu_preflight.report import render

HERE = Path(__file__).parent / "fixtures" / "assessment"
REPORT = HERE / "multinode-report.json"
GOLDEN = HERE / "multinode.md"
DERIVED = ("health_scores", "recommendations_by_urgency", "cost_benefit", "assessment")


@functools.cache
def _rebuild() -> None:
    from .assessment_data import multinode_report

    REPORT.write_text(json.dumps(multinode_report(), indent=1, sort_keys=True) + "\n", encoding="utf-8")


def fixed_report() -> dict[str, Any]:
    """The stored report without its derived blocks (they are derived again when rendering)."""
    if os.environ.get("UPDATE_GOLDEN") == "report":
        _rebuild()
    report: dict[str, Any] = json.loads(REPORT.read_text(encoding="utf-8"))
    for key in DERIVED:
        report["cluster_summary"].pop(key, None)
    return report


def test_markdown_assessment_golden() -> None:
    text = render(fixed_report(), "md")
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8"), f"{GOLDEN.name} differs (UPDATE_GOLDEN=1 regenerates it)"


def test_sections_in_the_seed_order() -> None:
    text = render(fixed_report(), "md")
    order = ["## Executive summary", "## Node specifications", "## Connectivity", "## Performance stability",
             "## Issues", "## Recommendations", "## Target scores (30 days)", "## Readiness assessment",
             "## Monitoring schedule", "## Test results", "## Findings"]
    at = [text.index(h) for h in order]
    assert at == sorted(at)
    assert text.rstrip().endswith("```") and "[RESULT] FAILURE: [network.node_links]" in text.splitlines()[-2]


def test_a_saved_report_renders_what_the_run_said() -> None:
    """The stored assessment (computed with the run's settings) is what a re-render shows."""
    stored = json.loads(REPORT.read_text(encoding="utf-8"))
    stored["cluster_summary"]["assessment"]["readiness"]["production"]["reasons"] = ["as the run said"]
    assert "  - as the run said" in render(stored, "md")
