"""No registered report id typed as a string literal outside ``checks/``.

Code outside the checks that names an id (history reading ``compute.gemm``, the health API
reading ``gpu.nvml``) imports it from :mod:`gpu_preflight.ids`, whose constants the
checks register (``@check(NVML_ID, ...)``). A literal there would keep the old name through
a rename and silently match nothing. ``ALLOWED`` listed the literals left while the ids moved;
it is empty and may only stay so (an entry no longer found fails too).
"""

from __future__ import annotations

import ast
from pathlib import Path

from gpu_preflight import ids, registry

SRC = Path(__file__).resolve().parents[1] / "src" / "gpu_preflight"
ALLOWED: set[tuple[str, str]] = set()  # it may only shrink: it is empty


def literals() -> set[tuple[str, str]]:
    """(module path, id) for every string constant outside checks/ that is a registered id."""
    known = {s.id for s in registry.described()}
    found = set()
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("checks/") or rel == "ids.py":  # the ids' one home, and the checks that register them
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
    exported = {name: getattr(ids, name) for name in ids.__all__}
    assert exported and all(name.endswith("_ID") for name in exported)
    assert {name: value for name, value in exported.items() if value not in known} == {}
    assert (ids.NVML_ID, ids.GEMM_ID, ids.LOCALIZE_SUSPECT_ID) == ("gpu.nvml", "compute.gemm", "localize.suspect")

