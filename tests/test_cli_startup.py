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
