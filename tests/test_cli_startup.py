"""What the command line does to start fast, and that it changes nothing a command does.

``build_parser(command)`` builds only that command's parser (issue 16 item 2): the same
arguments must parse to the same values as with every command built.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpu_preflight.cli.main import BUILTINS, PLUGINS, build_parser


def _commands(parser: Any) -> set[str]:
    sub = next(a for a in parser._actions if a.dest == "command")
    return set(sub.choices)


def test_only_the_named_command_is_built() -> None:
    everything = _commands(build_parser())
    assert everything == {"run", *BUILTINS, *PLUGINS}
    for command in ("run", *BUILTINS, *PLUGINS):
        built = _commands(build_parser(command))
        assert command in built and built <= everything
        assert "run" not in built or command == "run"


@pytest.mark.parametrize("argv", [
    ["run"],
    ["run", "--node-only", "--no-history", "--format", "json", "--timeout-s", "7", "--set", "gpu.temp_margin_c=8"],
    ["run", "--full", "--check", "gpu.*", "--skip", "gpu.xid", "--expect-gpus", "8", "--profile", "h200"],
    ["checks", "explain", "gpu.thermal", "--profile", "h200"],
    ["config", "defaults", "--format", "json"],
    ["snapshot", "--output", "x.json", "--timeout-s", "5"],
    ["report", "render", "r.json", "--format", "md"],
])
def test_one_command_parses_as_with_every_command_built(argv: list[str]) -> None:
    assert vars(build_parser(argv[0]).parse_args(argv)) == vars(build_parser().parse_args(argv))


def test_a_run_without_a_report_directory_never_imports_the_html_renderer(tmp_path: Any) -> None:
    """The HTML renderer (and its plots and assessment) is ~80 ms of imports on a GPU host: a node
    run that prints to the console and writes no report directory must not pay for it."""
    import subprocess
    import sys

    from .conftest import FIXTURES

    dump = FIXTURES / "captured" / "h200-580.159.04" / "nvml_capture.json"
    code = ("import sys, runpy\n"
            f"sys.argv = ['gpu-preflight', 'run', '--quick', '--replay', {str(dump)!r}, '--no-history']\n"
            "try:\n    runpy.run_module('gpu_preflight', run_name='__main__')\n"
            "except SystemExit as exc:\n    code = exc.code\n"
            "html = sorted(m for m in sys.modules if m.startswith('gpu_preflight.report.html'))\n"
            "print(html, code, file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
                          cwd=tmp_path)
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("[] "), proc.stderr[-2000:]
    assert last.split()[-1] in {"0", "1", "2"}  # it reached a verdict
