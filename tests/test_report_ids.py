"""Every id a report can carry is known: declared by its check or by ``registry.declare``,
listed by ``checks list`` and explained by ``checks explain`` (issue 15).

The ids come from two places the suite already holds: the saved reports under
tests/fixtures (captured H100/H200 runs, goldens) and every ``Finding("<id>", ...)`` /
``ctx.finding`` literal in src/. A new id that reaches a report without a declaration
fails here instead of being unknown to ``checks explain``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from gpu_preflight import ids as id_names
from gpu_preflight import registry
from gpu_preflight.cli.main import main

from .conftest import REPO

FIXTURES = Path(__file__).parent / "fixtures"
SRC = REPO / "src" / "gpu_preflight"


def fixture_ids() -> set[str]:
    ids: set[str] = set()
    for path in FIXTURES.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl"):
            ids |= set(re.findall(r'"check_id": ?"([^"]+)"', path.read_text(encoding="utf-8", errors="replace")))
    return ids


def source_ids() -> set[str]:
    """The first argument of every ``Finding(...)`` call in src/ that is a string literal,
    every ``CHECK``/``CHECK_ID`` constant and every name in :mod:`gpu_preflight.ids`."""
    ids: set[str] = {getattr(id_names, name) for name in id_names.__all__}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Finding" and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    ids.add(first.value)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and any(
                    isinstance(t, ast.Name) and t.id in ("CHECK", "CHECK_ID") for t in node.targets):
                ids.add(str(node.value.value))
    return ids


def known() -> set[str]:
    return {s.id for s in registry.described()}


def test_the_suite_sees_ids_from_both_sources() -> None:
    assert {"gpu.thermal", "compute.gemm", "nccl.collectives"} <= fixture_ids()
    assert {"kernel.segfault", "nccl_log.triage", "workloads"} <= source_ids()  # the rest: gpu_preflight.ids


def test_every_id_in_a_saved_report_is_declared() -> None:
    assert sorted(fixture_ids() - known()) == []


def test_every_id_a_finding_is_made_with_is_declared() -> None:
    assert sorted(source_ids() - known()) == []


def test_checks_list_lists_every_declared_id(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["checks", "list"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines()}
    assert listed == known()
    assert {"history.regression", "evidence.parse", "ib.perftest", "cluster.node_report", "workloads"} <= listed


@pytest.mark.parametrize("report_id", sorted(s.id for s in registry.described() if isinstance(s, registry.DeclaredId)))
def test_checks_explain_explains_every_declared_id(capsys: pytest.CaptureFixture[str], report_id: str) -> None:
    assert main(["checks", "explain", report_id]) == 0
    out = capsys.readouterr().out
    spec = registry.describe(report_id)
    assert out.startswith(f"{report_id}  ({spec.title}; reported by gpu-preflight")
    assert "Report group: " in out and f"score component: {spec.component}" in out


def test_explain_shows_a_declared_ids_current_thresholds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["checks", "explain", "ib.perftest", "--set", "evidence.perftest_min_bw_gbps=180"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  evidence\.perftest_min_bw_gbps = 180 Gb/s  \(default: unset\)$", out, re.M), out
    assert main(["checks", "explain", "history.regression"]) == 0
    assert re.search(r"^  history\.baseline_runs\s+= \d+", capsys.readouterr().out, re.M)


@pytest.mark.parametrize("wanted, suggested", [
    ("history.regresion", "did you mean history.regression"),
    ("evidence.pars", "did you mean evidence.parse"),
    ("nvidia_smi", "did you mean nvidia_smi.answer, nvidia_smi.failure, nvidia_smi.gpu, nvidia_smi.p2p"),
])
def test_a_typo_of_a_declared_id_gets_a_suggestion(capsys: pytest.CaptureFixture[str], wanted: str,
                                                   suggested: str) -> None:
    assert main(["checks", "explain", wanted]) == 3
    assert capsys.readouterr().err.startswith(f"gpu-preflight: no check {wanted!r}; {suggested}")


def test_describe_names_near_misses() -> None:
    with pytest.raises(KeyError, match=r"did you mean kernel\.segfault"):
        registry.describe("kernel.segfalt")
