"""No registered report id typed as a string literal outside ``checks/``.

Code outside the checks that names an id (history reading ``compute.gemm``, the health API
reading ``gpu.nvml``) imports it from :mod:`gpu_preflight.ids`, whose constants come from
the module that registers the id. A literal there would keep the old name through a
rename and silently match nothing. ``ALLOWED`` lists the literals left in modules owned
elsewhere; it may only shrink (an entry no longer found fails too).
"""

from __future__ import annotations

import ast
from pathlib import Path

from gpu_preflight import ids, registry

SRC = Path(__file__).resolve().parents[1] / "src" / "gpu_preflight"
ALLOWED = {
    ("cluster/aggregate.py", "cluster.node_report"),
    ("engine.py", "evidence.judge"),
    ("report/assessment.py", "fabric.pingpong"),
    ("report/canonical.py", "run.coverage"),
    ("report/connectivity.py", "network.node_links"),
    ("report/html_plots.py", "gpu.power"),
    ("report/html_plots.py", "gpu.thermal"),
    ("report/measurements.py", "compute.gemm"),
    ("report/plot_data.py", "compute.gemm"),
    ("report/scores.py", "gpu.inventory.count"),
    ("run.py", "workloads"),
}


def literals() -> set[tuple[str, str]]:
    """(module path, id) for every string constant outside checks/ that is a registered id."""
    known = {s.id for s in registry.described()}
    found = set()
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("checks/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), rel)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in known:
                found.add((rel, node.value))
    return found


def test_no_new_id_literal_outside_the_checks() -> None:
    new = sorted(literals() - ALLOWED)
    assert new == [], f"import these ids from gpu_preflight.ids (or add a constant there): {new}"


def test_the_allow_list_only_shrinks() -> None:
    assert sorted(ALLOWED - literals()) == [], "remove the fixed entries from ALLOWED"


def test_the_constants_are_the_registered_ids() -> None:
    known = {s.id for s in registry.described()}
    exported = {name: getattr(ids, name) for name in ids.__all__ if name.endswith("_ID")}
    assert exported and all(value in known for value in exported.values()), exported
    assert (ids.NVML_ID, ids.GEMM_ID, ids.LOCALIZE_SUSPECT_ID) == ("gpu.nvml", "compute.gemm", "localize.suspect")

