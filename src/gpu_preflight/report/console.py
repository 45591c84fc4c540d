"""Console output: a verdict table on stderr, ending with the ``[RESULT]`` line.

On a terminal the table is drawn with rich; otherwise (CI logs, pipes) it is plain
aligned text, which is what log readers want and spares the import of rich.
"""

from __future__ import annotations

import sys
from typing import IO, Any

from .canonical import display, verdict_of

COLUMNS = ("Status", "Check", "Subject", "Observed", "Expected", "Summary / recommendation")
_ORDER = {"FAIL": 0, "ERROR": 1, "WARN": 2, "SKIP": 3, "PASS": 4}
_STYLE = {"FAIL": "bold red", "ERROR": "bold magenta", "WARN": "yellow", "SKIP": "dim", "PASS": "green"}


def rows(report: dict[str, Any], verbose: bool = False) -> list[tuple[str, ...]]:
    """Table rows, worst first; PASS and SKIP rows are folded unless ``verbose``."""
    out: list[tuple[str, ...]] = []
    for f in sorted(report.get("findings", []), key=lambda f: (_ORDER[f["status"]], f["check_id"], f["subject"])):
        if not verbose and f["status"] in ("PASS", "SKIP") and f["check_id"] in _seen(out):
            continue
        text = f["summary"]
        if f.get("recommendation") and f["status"] not in ("PASS", "SKIP"):
            text += f" -> {f['recommendation']}"
        out.append((f["status"], f["check_id"], f["subject"], display(f.get("observed"), f.get("unit")),
                    display(f.get("expected"), f.get("unit")), text))
    return out


def _seen(rows_so_far: list[tuple[str, ...]]) -> set[str]:
    return {r[1] for r in rows_so_far}


def render_console(report: dict[str, Any], stream: IO[str] | None = None, verbose: bool = False) -> None:
    """The verdict table, headed by the verdict and ending with the ``[RESULT]`` line (both from :func:`verdict_of`)."""
    stream = stream or sys.stderr
    table = rows(report, verbose)
    verdict = verdict_of(report)
    counts = ", ".join(f"{v} {k}" for k, v in (report.get("cluster_summary") or {}).get("counts", {}).items() if v)
    header = f"gpu-preflight: {verdict.label} ({counts})"
    if stream.isatty():
        _render_rich(table, header, stream)
    else:
        _render_plain(table, header, stream)
    stream.write(verdict.line + "\n")
    stream.flush()


def _render_plain(table: list[tuple[str, ...]], header: str, stream: IO[str]) -> None:
    widths = [max(len(COLUMNS[i]), *(min(len(r[i]), 40) for r in table)) if table else len(COLUMNS[i])
              for i in range(len(COLUMNS) - 1)]
    stream.write(header + "\n")
    line = "  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths, strict=False)) + "  " + COLUMNS[-1]
    stream.write(line + "\n")
    for r in table:
        cells = [c if len(c) <= 40 else c[:37] + "..." for c in r[:-1]]
        stream.write("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + "  " + r[-1] + "\n")


def _render_rich(table: list[tuple[str, ...]], header: str, stream: IO[str]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    # Log text and ids may hold "[...]" that rich would read as markup (or refuse): escape all of it.
    t = Table(title=escape(header), show_lines=False, expand=False)
    for col in COLUMNS:
        t.add_column(col, overflow="fold")
    for r in table:
        t.add_row(f"[{_STYLE[r[0]]}]{r[0]}[/]", *(escape(c) for c in r[1:]))
    Console(file=stream, stderr=True).print(t)
