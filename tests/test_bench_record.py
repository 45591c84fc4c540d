"""bench/record.py files a bench's output in docs/performance.md only when the bench measured.

A bench that cannot measure exits 2 and must leave the page as it was; exit 0 and 1 are figures
(target met / missed) and replace the bench's block, or add one for a bench that had none.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "bench" / "record.py"
PAGE = "# Perf\n\n## bench_x\n\n<!-- bench:bench_x -->\nold figure\n<!-- /bench:bench_x -->\n\n## tail\n"


def _record(tmp: Path, code: int, out: str, name: str = "bench_x") -> subprocess.CompletedProcess[str]:
    script = tmp / f"{name}.py"
    script.write_text(f"import sys\nprint({out!r})\nsys.exit({code})\n", encoding="utf-8")
    return subprocess.run([sys.executable, str(RECORD), "--docs", str(tmp / "perf.md"), str(script), "--flag"],
                          capture_output=True, text=True, check=False, cwd=REPO)


def test_a_measurement_replaces_the_bench_block_only(tmp_path: Path) -> None:
    (tmp_path / "perf.md").write_text(PAGE, encoding="utf-8")
    ran = _record(tmp_path, 1, "ratio 2.50x (target missed)")
    assert ran.returncode == 1, ran.stderr
    page = (tmp_path / "perf.md").read_text(encoding="utf-8")
    assert "old figure" not in page and "ratio 2.50x (target missed)" in page
    assert "exit 1: `bench/bench_x.py --flag`" in page and "CPUs" in page
    assert page.startswith("# Perf\n") and page.endswith("## tail\n")


def test_a_bench_that_cannot_measure_files_nothing(tmp_path: Path) -> None:
    (tmp_path / "perf.md").write_text(PAGE, encoding="utf-8")
    ran = _record(tmp_path, 2, "bench_x: cannot measure: no package")
    assert ran.returncode == 2
    assert (tmp_path / "perf.md").read_text(encoding="utf-8") == PAGE
    assert "nothing filed" in ran.stderr


def test_a_new_bench_gets_its_own_block(tmp_path: Path) -> None:
    (tmp_path / "perf.md").write_text(PAGE, encoding="utf-8")
    assert _record(tmp_path, 0, "1.2x", name="bench_y").returncode == 0
    page = (tmp_path / "perf.md").read_text(encoding="utf-8")
    assert "old figure" in page and "<!-- bench:bench_y -->" in page and "1.2x" in page


def test_the_docs_page_has_a_block_per_filed_bench() -> None:
    page = (REPO / "docs" / "performance.md").read_text(encoding="utf-8")
    for name in ("bench_node_run", "bench_node_live", "bench_end_of_run"):
        assert page.count(f"<!-- bench:{name} -->") == 1 and page.count(f"<!-- /bench:{name} -->") == 1


def test_a_bench_that_crashes_files_nothing(tmp_path: Path) -> None:
    """Python exits 1 on an uncaught exception, the same code as a missed target: the traceback tells them apart."""
    (tmp_path / "perf.md").write_text(PAGE, encoding="utf-8")
    script = tmp_path / "bench_x.py"
    script.write_text("print('half a line')\nraise AttributeError('no')\n", encoding="utf-8")
    ran = subprocess.run([sys.executable, str(RECORD), "--docs", str(tmp_path / "perf.md"), str(script)],
                         capture_output=True, text=True, check=False, cwd=REPO)
    assert ran.returncode == 1 and "with a traceback: nothing filed" in ran.stderr
    assert (tmp_path / "perf.md").read_text(encoding="utf-8") == PAGE
