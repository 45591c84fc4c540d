"""Progress on stderr: a rich bar on a terminal, nothing (and no rich import) anywhere else."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from gpu_preflight.report.progress import ENV, progress, should_show


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_gets_a_bar_with_the_current_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    out = Tty()
    with progress("collectives", total=3, stream=out) as bar:
        for op in ("all_reduce", "all_gather", "broadcast"):
            bar.advance(f"{op} on all")
    text = out.getvalue()
    assert "collectives" in text and "broadcast on all" in text and "3/3" in text
    assert "\x1b[" in text  # drawn with terminal control codes (rich)


def test_spinner_without_a_total(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    out = Tty()
    with progress("memory test", stream=out) as bar:
        bar.advance("pattern 0xAA")
    assert "memory test: pattern 0xAA" in out.getvalue()


def test_pipes_and_logs_get_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    out = io.StringIO()
    with progress("collectives", total=2, stream=out) as bar:
        bar.advance("x")
        bar.advance("y")
    assert out.getvalue() == ""
    tty = Tty()
    with progress("collectives", total=1, stream=tty, enabled=False) as bar:  # rank != 0
        bar.advance()
    assert tty.getvalue() == ""


@pytest.mark.parametrize("value, tty, shown", [("0", True, False), ("off", True, False), ("1", False, True),
                                               ("yes", False, True), ("", True, True), ("", False, False)])
def test_environment_overrides_the_guess(monkeypatch: pytest.MonkeyPatch, value: str, tty: bool,
                                         shown: bool) -> None:
    monkeypatch.setenv(ENV, value)
    stream = Tty() if tty else io.StringIO()
    assert should_show(stream) is shown
    with progress("sweep", total=1, stream=stream) as bar:
        bar.advance("done")
    assert bool(stream.getvalue()) is shown


def test_quiet_path_does_not_import_rich() -> None:
    code = ("import io, sys\nfrom gpu_preflight.report.progress import progress\n"
            "with progress('x', total=2, stream=io.StringIO()) as bar:\n    bar.advance('y')\n"
            "print('rich' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
