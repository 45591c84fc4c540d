"""The console view: golden files at 80 and 200 columns, the width rules, rich = plain, scale.

The golden files in ``tests/fixtures/console/`` are rendered from two fixed reports beside
them: ``no-gpu-report.json`` (a real ``gpu-preflight run`` on the 2-core dev VM, which has no
GPU: two CPU ranks, 57 findings) and ``multinode-report.json`` (four H200 nodes through the real
cluster aggregation, as ``tests/report_data.gathered_cluster`` builds them, with a slow GPU, a
slow node fabric, a slow link, a hot GPU and a node that never answered). Only the parts the
console reads are kept (findings, ``cluster_summary`` counts and status, ``run``).

After a deliberate change of the view, regenerate them and review the diff::

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_console.py -q
    git diff tests/fixtures/console/
"""

from __future__ import annotations

import copy
import io
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_preflight.engine import run_checks
from gpu_preflight.findings.canonical import node_entry, result_line
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.model import Status
from gpu_preflight.report.build import assemble_report
from gpu_preflight.report.console import (
    DEFAULT_WIDTH,
    MAX_PER_CHECK,
    MAX_PROBLEMS,
    causes,
    console_lines,
    fit,
    pass_counts,
    render_console,
    skip_groups,
    value_text,
    width_of,
)

from .conftest import H200_DUMP

HERE = Path(__file__).parent / "fixtures" / "console"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
GOLDEN = [("no-gpu", 80, False), ("no-gpu", 200, False), ("multinode", 80, False), ("multinode", 200, False),
          ("no-gpu", 80, True), ("multinode", 200, True)]


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def load(name: str) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((HERE / f"{name}-report.json").read_text())
    return report


def render(report: dict[str, Any], width: int | None = None, verbose: bool = False, tty: bool = False) -> str:
    stream = Tty() if tty else io.StringIO()
    render_console(ClusterReport.of(report), stream, verbose=verbose, width=width)
    return stream.getvalue()


@pytest.mark.parametrize(("name", "width", "verbose"), GOLDEN)
def test_golden(name: str, width: int, verbose: bool) -> None:
    text = render(load(name), width, verbose)
    path = HERE / f"{name}-{width}{'-verbose' if verbose else ''}.txt"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{path.name} differs (UPDATE_GOLDEN=1 regenerates it)"


@pytest.mark.parametrize(("name", "width", "verbose"), GOLDEN)
def test_every_line_fits_and_the_result_line_is_last(name: str, width: int, verbose: bool) -> None:
    report = load(name)
    lines = render(report, width, verbose).splitlines()
    assert lines[-1] == result_line(ClusterReport.of(report))
    assert lines[0].startswith(f"gpu-preflight: {report['cluster_summary']['overall_status']} (")
    too_long = [line for line in lines[:-1] if len(line) > width]
    assert not too_long


@pytest.mark.parametrize(("name", "width", "verbose"), GOLDEN)
def test_rich_prints_the_same_text_in_colour(name: str, width: int, verbose: bool,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    plain, rich = render(load(name), width, verbose), render(load(name), width, verbose, tty=True)
    assert "\x1b[" in rich
    assert ANSI.sub("", rich) == plain


def test_no_gpu_run_is_a_screen_not_235_lines() -> None:
    report = load("no-gpu")
    text = render(report, 80)
    lines = text.splitlines()
    assert len(report["findings"]) == 57 and len(lines) <= 30
    assert text.count("NVML library not found") == 1  # 19 SKIPs, one line
    assert "SKIP    18 gpu.* checks, system.services: NVML library not found" in lines
    assert [line.split()[1] for line in lines if line.startswith("WARN")] == [
        "gpu.inventory.count", "system.cpu", "system.limits", "system.limits"]
    assert "PASS    system 7, train 3, compute 2, nccl 2, cluster 1, pcie 1, stack 1" in lines
    assert "CPU-only node deliberately." in text  # the recommendation is wrapped, not cut


def _totals(report: dict[str, Any]) -> tuple[int, int]:
    typed = ClusterReport.from_dict(report)
    findings, unlisted = typed.findings, typed.cluster_summary.unlisted or {}
    skipped = sum(g.count for g in skip_groups([f for f in findings if f.status is Status.SKIP], unlisted))
    passed = sum(pass_counts([f for f in findings if f.status is Status.PASS], unlisted).values())
    return skipped, passed


@pytest.mark.parametrize("name", ["no-gpu", "multinode"])
def test_groups_add_up_to_the_header_counts(name: str) -> None:
    report = load(name)
    counts = report["cluster_summary"]["counts"]
    assert _totals(report) == (counts["SKIP"], counts["PASS"])


def test_verbose_shows_structured_values_as_pairs_never_cut() -> None:
    text = render(load("no-gpu"), 80, verbose=True)
    assert "observed torch_version=2.13.0+cpu torch_cuda=none nccl_version=none" in " ".join(text.split())
    assert "{" not in text and '\\"' not in text
    assert len([line for line in text.splitlines() if line[:4] in ("PASS", "SKIP", "WARN")]) == 57


@pytest.mark.parametrize(("value", "unit", "text"), [
    ({"volatile_uncorrected": 0, "volatile_corrected": 12, "aggregate": {"sram": 1, "dram": None}}, None,
     "volatile_uncorrected=0 volatile_corrected=12 aggregate.sram=1 aggregate.dram=none"),
    ({"na": "not supported"}, "C", "N/A (not supported)"),
    ({"count": 80000, "min": 610.5, "median": 700.0}, "TFLOP/s", "count=80000 min=610.5 median=700"),
    ({"gpus": [0, 1, 2], "ok": True, "why": {"na": "no\nGPU"}}, None, "gpus=0,1,2 ok=true why=N/A (no GPU)"),
    (list(range(20)), None, "0,1,2,3,4,5,6,7,8,9,10,11 (+8 more)"),
    (2.5, "GB/s", "2.5 GB/s"),
    ("<= 1.5", "load/CPU", "<= 1.5 load/CPU"),
    ("unlimited", "bytes", "unlimited"),
    (None, "W", "none"),
])
def test_value_text(value: Any, unit: str | None, text: str) -> None:
    assert value_text(value, unit) == text


@given(st.lists(st.text(alphabet="ab/.:=0123456789", min_size=1, max_size=12), min_size=1, max_size=12),
       st.integers(min_value=4, max_value=80))
def test_fit_shortens_between_words_only(words: list[str], room: int) -> None:
    text = " ".join(words)
    out = fit(text, room)
    if out == text:
        assert len(text) <= room or " " not in text
        return
    assert out.endswith("...")
    kept = out[:-3].split(" ")
    assert kept == words[:len(kept)] or kept[-1] == words[len(kept) - 1].rstrip(",;:(-")
    assert len(out) <= room or len(kept) == 1


def test_width_from_columns_then_terminal_then_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert width_of(io.StringIO()) == 100 and width_of(Tty()) == 100
    assert width_of(io.StringIO(), 90) == 90
    monkeypatch.setenv("COLUMNS", "12")
    assert width_of(io.StringIO()) == 40  # narrower than a status, an id and a word is no use
    monkeypatch.delenv("COLUMNS")
    assert width_of(io.StringIO()) == DEFAULT_WIDTH
    assert width_of(Tty()) == DEFAULT_WIDTH  # a terminal whose size cannot be read (no file descriptor)
    read, write = os.pipe()
    try:
        with os.fdopen(write, "w") as pipe:
            assert width_of(pipe) == DEFAULT_WIDTH  # a pipe is not a terminal: the default, not an error
    finally:
        os.close(read)


def test_columns_variable_sizes_the_default_view(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert render(load("multinode")) == (HERE / "multinode-80.txt").read_text(encoding="utf-8")


def test_log_text_stays_on_one_line() -> None:
    report = copy.deepcopy(load("multinode"))
    bad = next(f for f in report["findings"] if f["status"] == "FAIL")
    bad["summary"] = "dmesg:\n[  12.3] \x1b[31mXid 79\x1b[0m\tfallen off the bus [/red]"
    lines = render(report, 120).splitlines()
    assert any(line.endswith("dmesg: [ 12.3] [31mXid 79 [0m fallen off the bus [/red]") for line in lines)
    rich = ANSI.sub("", render(report, 120, tty=True))
    assert rich == "\n".join(lines) + "\n"


def test_skip_causes() -> None:
    assert "NVML library not found" in causes("no GPU to check: NVML library not found")
    assert "NVML library not found" in causes("no NVIDIA GPU (NVML library not found): NVIDIA services not required")
    assert "looked in PATH" not in causes("not run: lspci not found (looked in PATH)")
    assert "lspci not found" in causes("not run: lspci not found (looked in PATH)")


def _large_report(nodes: int = 10_000, sick_every: int = 10) -> dict[str, Any]:
    """``nodes`` H200 nodes summarised as the runner does above ``report.detail_max_nodes``;
    every ``sick_every``-th one runs hot (a WARN per node: 1,000 problem lines to fold)."""
    dump = json.loads(H200_DUMP.read_text())
    healthy = node_entry(run_checks(replay=str(H200_DUMP), include=["gpu.*"], environ={}), "node_0", detail=False)
    dump["devices"][0]["nvmlDeviceGetTemperature"] = {"ok": 86}
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"gp-console-hot-{os.getpid()}.json"
    path.write_text(json.dumps(dump))
    try:
        hot = node_entry(run_checks(replay=str(path), include=["gpu.*"], environ={}), "node_0", detail=False)
    finally:
        path.unlink()
    entries = []
    for i in range(nodes):
        e = hot if i % sick_every == 0 else healthy
        entries.append({**e, "findings": [{**f, "node": f"node_{i}", "subject": f"n{i:05d}/gpu0"}
                                          for f in e["findings"]]})
    return assemble_report(entries, fail_on="fail", assess=False)


def test_ten_thousand_nodes_render_compact() -> None:
    """The view stays short at 10,000 nodes (its time is bench/bench_end_of_run.py's: no timing here, the
    machine's load would decide it)."""
    report = _large_report()
    problems = sum(f["status"] in ("WARN", "FAIL", "ERROR") for f in report["findings"])
    assert problems == 1000
    text = render(report, 120)
    lines = text.splitlines()
    assert len(lines) < MAX_PROBLEMS + 30
    assert any(line.startswith(f"WARN    gpu.thermal  {1000 - MAX_PER_CHECK} more: n00050/gpu0, ") for line in lines)
    assert "SKIP    gpu.xid on 10000 nodes: kernel log not in the snapshot (pass --kernel-log FILE)" in lines
    counts = report["cluster_summary"]["counts"]
    assert _totals(report) == (counts["SKIP"], counts["PASS"])
    assert counts["SKIP"] > 10_000 and f"on {10_000} nodes" in text
    assert lines[-1] == result_line(ClusterReport.of(report))


def test_lines_are_the_same_object_model_for_both_views() -> None:
    report = load("no-gpu")
    compact, verbose = console_lines(ClusterReport.of(report), 80), console_lines(ClusterReport.of(report), 80,
                                                                                  verbose=True)
    assert compact[0] == verbose[0] and compact[-1] == verbose[-1]
    assert len(verbose) > 2 * len(compact)


def test_node_actions_are_listed_strongest_first_before_the_result_line() -> None:
    """What a scheduler hook routes on (``nodes.*.summary.operator_action``) is on screen too (issue 27)."""
    from gpu_preflight.report.console import render_console_text

    from .cluster_golden import report_dict

    report = report_dict("faults", "small")  # the report tests/fixtures/cluster_golden/faults_small.json shows
    names = {k: v["node_info"]["current_host"] for k, v in report["nodes"].items()}
    actions = {names[k]: v["summary"].get("operator_action") for k, v in report["nodes"].items()}
    lines = render_console_text(ClusterReport.of(report)).splitlines()
    shown = [line for line in lines if line.startswith("action  ")]
    assert shown == ["action  isolate_node: " + ", ".join(n for n, a in actions.items() if a == "isolate_node"),
                     "action  monitor: " + ", ".join(n for n, a in actions.items() if a == "monitor")]
    assert lines[-1].startswith("[RESULT]") and lines[-1 - len(shown):-1] == shown
    for section in report["nodes"].values():
        section["summary"].pop("operator_action", None)
    lines = render_console_text(ClusterReport.of(report)).splitlines()
    assert not [line for line in lines if line.startswith("action")]
