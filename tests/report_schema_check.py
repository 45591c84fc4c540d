"""Every report.json a test writes is validated against the shipped JSON Schema.

Used by an autouse fixture in conftest.py: after each test that used ``tmp_path``, the
reports under it (written by the CLI, ``write_report``, a subprocess run) are checked, so a
layout change that the schema does not describe fails the test that produced it.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

MAX_BYTES = 20_000_000  # a 10,000-node bench report is checked by its own test, not here


@functools.cache
def validator() -> Any:
    import jsonschema  # type: ignore[import-untyped]

    from gpu_preflight.report.schema import shipped

    schema = shipped()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def problems(report: Any, limit: int = 5) -> list[str]:
    """The first ``limit`` schema violations of a report dict, as ``path: message``."""
    out = []
    for error in validator().iter_errors(report):
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        out.append(f"{where}: {error.message[:200]}")
        if len(out) >= limit:
            break
    return out


def check_reports_under(root: Path) -> list[str]:
    """Violations in every ``report.json`` under ``root`` (``[]`` when all are valid)."""
    found = []
    for path in sorted(root.rglob("report.json")):
        if not path.is_file() or path.is_symlink() or path.stat().st_size > MAX_BYTES:
            continue
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a test of a corrupt or half-written file wrote it on purpose
        if not isinstance(report, dict) or "cluster_summary" not in report:
            continue  # not a canonical report (a test's own fixture under that name)
        found += [f"{path.relative_to(root)}: {p}" for p in problems(report)]
    return found
