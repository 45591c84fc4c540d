"""What the command line does to start fast, and that it changes nothing a command does.

``build_parser(command)`` builds only that command's parser (issue 16 item 2): the same
arguments must parse to the same values as with every command built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.cli.main import COMMAND, COMMANDS, build_parser, function


def _commands(parser: Any) -> set[str]:
    sub = next(a for a in parser._actions if a.dest == "command")
    return set(sub.choices)


def test_only_the_named_command_is_built() -> None:
    everything = _commands(build_parser())
    assert everything == set(COMMAND)
    for command in COMMAND:
        built = _commands(build_parser(command))
        assert command in built and built <= everything
        assert "run" not in built or command == "run"


def test_the_table_is_every_command_and_only_they() -> None:
    """One row per command, in ``--help``'s order: each row's parser function registers its
    command (with the rows that share it, and nothing else) and its run function exists."""
    import argparse

    assert len(COMMAND) == len(COMMANDS)
    listed = next(a for a in build_parser()._actions if a.dest == "command")
    assert list(listed.choices) == [c.name for c in COMMANDS]
    for row in COMMANDS:
        sub = argparse.ArgumentParser().add_subparsers(dest="command")
        function(row.arguments)(sub)
        assert set(sub.choices) == {c.name for c in COMMANDS if c.arguments == row.arguments}, row
        assert callable(function(row.run)), row


def test_the_command_named_runs_its_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dispatch is the table: each command reaches the run function its row names."""
    import importlib

    from gpu_preflight.cli import main as cli

    argv = {"run": ["run"], "serve": ["serve"], "parse": ["parse", "x"], "judge": ["judge", "x"],
            "slurm": ["slurm", "healthcheck"], "history": ["history"], "baseline": ["baseline", "capture", "r.json"],
            "k8s": ["k8s", "manifest", "m.yaml"], "localize": ["localize", "simulate", "--nodes", "4"],
            "checks": ["checks", "list"],
            "config": ["config", "profiles"], "snapshot": ["snapshot"], "report": ["report", "render", "r.json"]}
    assert set(argv) == set(COMMAND)
    reached: list[tuple[str, str]] = []
    for row in COMMANDS:
        module, _, name = row.run.partition(":")
        monkeypatch.setattr(importlib.import_module(f"gpu_preflight.cli.{module}"), name,
                            lambda args, ref=row.run: reached.append((ref, args.command)) or 0)
    for command, tokens in argv.items():
        assert cli.main(tokens) == 0
        assert reached[-1] == (COMMAND[command].run, command)


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


# What a node run must not load (issue 15: start-up is held to the tree before the house moved;
# issue 16: the live node check against a peer). Each is tens of milliseconds on a GPU host's
# slower file system, and none is needed to judge a node and print its verdict.
NEVER_ON_A_NODE_RUN = (
    "gpu_preflight.report.html",  # the HTML renderer, its plots and assessment: only with --report-dir
    "gpu_preflight.records.cluster",  # what rank 0 gathers
    "gpu_preflight.cluster",
    "gpu_preflight.history",  # --no-history
    "psutil",  # the host is read from /proc (backends/procfs.py)
    "socket",
    "difflib",  # "did you mean" only for a name that was not found
)
NEVER_ON_A_REPLAY = (
    *NEVER_ON_A_NODE_RUN,
    "subprocess",  # a replay runs no tool
    "gpu_preflight.backends.commands",
    "gpu_preflight.backends.nvml",
    "gpu_preflight.parsers",  # the snapshot holds parsed facts
    "pynvml",
    "orjson",
)
NEVER_ON_A_LIVE_RUN_WITHOUT_RDMA = (
    *NEVER_ON_A_NODE_RUN,
    "gpu_preflight.parsers.infiniband",  # the port-state words load with the first RDMA port
    "gpu_preflight.parsers.detect",
    "gpu_preflight.parsers.lspci",  # lspci's parser loads when lspci printed something
    "gpu_preflight.records.libfabric",  # fi_info is asked only where an EFA device is listed
    "gpu_preflight.records.pci",
    "gpu_preflight.records.perftest",
    "orjson",  # a one-node report is written by the standard library, faster than orjson imports
    "gpu_preflight.probes._dump_schema",  # what a replayed snapshot must hold: a helper, not a plugin
)


def _loaded(argv: list[str], cwd: Any, env: dict[str, str] | None = None) -> tuple[list[str], str]:
    """The modules a ``gpu-preflight`` run left loaded, and its exit code (or why it has none)."""
    import json
    import subprocess
    import sys

    code = ("import json, sys\n"
            f"sys.argv = ['gpu-preflight', *{argv!r}]\n"
            "from gpu_preflight.cli.main import main\n"  # what the program runs
            "code = main()\n"
            "print(json.dumps([sorted(sys.modules), code]), file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
                          cwd=cwd, env=env)
    modules, exit_code = json.loads(proc.stderr.strip().splitlines()[-1])
    return modules, str(exit_code)


def _unwanted(modules: list[str], never: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in never)]


def test_a_replayed_node_run_loads_nothing_it_does_not_need(tmp_path: Any) -> None:
    from .conftest import FIXTURES

    dump = FIXTURES / "captured" / "h200-580.159.04" / "nvml_capture.json"
    modules, code = _loaded(["run", "--quick", "--replay", str(dump), "--no-history"], tmp_path)
    assert code in {"0", "1", "2"}  # it reached a verdict
    assert _unwanted(modules, NEVER_ON_A_REPLAY) == []


def test_a_live_node_run_on_a_host_without_rdma_loads_nothing_it_does_not_need(
        stub_lib: Any, tmp_path: Any, h200_dump: dict[str, Any]) -> None:
    """The 8-GPU stub with no /sys/class/infiniband and no lspci or fi_info: what the live node
    check of bench/bench_node_live.py runs."""
    from .nvml_stub.gpus import widen
    from .nvml_stub.stub import stub_env, write_stub_data

    data = tmp_path / "data.json"
    write_stub_data(widen(h200_dump, 8), data)
    env = stub_env(stub_lib, data)
    env["PATH"] = "/usr/bin:/bin"  # dmesg, no tool that would make it load a parser
    modules, code = _loaded(["run", "--node-only", "--no-history", "--format", "json",
                             "--set", f"diagnostics.infiniband_sysfs={tmp_path / 'no-rdma'}"], tmp_path, env)
    assert code in {"0", "1", "2"}, code
    assert "pynvml" in modules  # it did read the GPUs
    assert _unwanted(modules, NEVER_ON_A_LIVE_RUN_WITHOUT_RDMA) == []


def test_a_command_in_the_callers_process_leaves_its_collector_alone(capsys: Any) -> None:
    import gc

    from gpu_preflight.cli.main import main

    before = (gc.get_threshold(), gc.get_freeze_count(), gc.isenabled())
    assert main(["checks", "list"]) == 0
    assert "gpu.thermal" in capsys.readouterr().out
    assert (gc.get_threshold(), gc.get_freeze_count(), gc.isenabled()) == before


def test_the_program_tunes_its_collector_for_a_short_life(tmp_path: Any) -> None:
    """As the program, a higher first threshold while it runs and everything frozen at the end."""
    import subprocess
    import sys

    from gpu_preflight.cli.main import GC_YOUNG_THRESHOLD

    code = ("import gc, sys\nsys.argv = ['gpu-preflight', 'checks', 'list']\n"
            "from gpu_preflight.cli.main import main\n"
            "before = gc.get_threshold()\ncode = main()\n"
            "print(before[0], gc.get_threshold()[0], gc.get_freeze_count() > 1000, gc.isenabled(), code, "
            "file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
                          cwd=tmp_path)
    assert "gpu.thermal" in proc.stdout
    assert proc.stderr.split()[-5:] == ["700", str(GC_YOUNG_THRESHOLD), "True", "True", "0"], proc.stderr


def test_the_program_prints_what_main_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m gpu_preflight`` (and the console script, the same entry) prints and exits as main() returns."""
    import subprocess
    import sys

    from gpu_preflight.cli.main import main

    assert main(["checks", "list"]) == 0
    expected = capsys.readouterr().out
    proc = subprocess.run([sys.executable, "-m", "gpu_preflight", "checks", "list"], capture_output=True, text=True,
                          timeout=120, check=False, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, expected)
    usage = subprocess.run([sys.executable, "-m", "gpu_preflight", "--bogus"], capture_output=True, text=True,
                           timeout=120, check=False, cwd=tmp_path)
    assert usage.returncode == 3 and "error" in usage.stderr
