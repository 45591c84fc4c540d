"""Rank 0's end of run at scale: report.json streamed (compact, or indented with --pretty) with
the same content from orjson and from the standard library, and an HTML page that stays small
and readable at 10,000 nodes while naming every failure and warning."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.cli.main import main
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.report import jsonio
from gpu_preflight.report.html import MAX_GROUP_ROWS, render_html
from gpu_preflight.report.jsonio import dump_report, dumps_report

from .conftest import H200_DUMP
from .large_report import finding, large_report, name
from .report_data import cluster_report, node_only_report
from .test_html import Page, assert_self_contained

MB = 1024 * 1024


@pytest.fixture(scope="module")
def reports() -> list[dict[str, Any]]:
    return [node_only_report(), cluster_report(nodes=3), large_report(300, planted=[
        finding(5, "gpu.thermal", "FAIL", "n00005/gpu1", "at_slowdown", 91, 87, "°C")])]


@pytest.mark.parametrize("use_orjson", [True, False], ids=["orjson", "json"])
@pytest.mark.parametrize("pretty", [False, True], ids=["compact", "pretty"])
def test_written_report_reads_back_as_the_report(reports: list[dict[str, Any]], use_orjson: bool,
                                                 pretty: bool) -> None:
    for report in reports:
        text = dumps_report(report, pretty=pretty, use_orjson=use_orjson)
        assert json.loads(text) == json.loads(json.dumps(report))
        assert text.endswith(b"\n") and text.count(b"\n") == (1 if not pretty else text.count(b"\n"))
        if not pretty:
            assert text.count(b"\n") == 1  # one line: compact


def test_pretty_is_what_json_dump_indent_2_writes(reports: list[dict[str, Any]]) -> None:
    for report in reports:
        reference = json.dumps(report, indent=2, ensure_ascii=False).encode() + b"\n"
        assert dumps_report(report, pretty=True, use_orjson=False) == reference
        fast = dumps_report(report, pretty=True).splitlines()  # orjson: the same lines, numbers spelt its way
        indents = [len(line) - len(line.lstrip(b" ")) for line in reference.splitlines()]
        assert [len(line) - len(line.lstrip(b" ")) for line in fast] == indents


def test_compact_is_json_dumps_without_spaces(reports: list[dict[str, Any]]) -> None:
    for report in reports:
        reference = json.dumps(report, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        assert dumps_report(report, use_orjson=False) == reference


@pytest.mark.parametrize("use_orjson", [True, False], ids=["orjson", "json"])
def test_awkward_values_are_written_alike(use_orjson: bool) -> None:
    """NaN and infinity become null (valid JSON) with either encoder; what orjson refuses (an
    integer beyond 64 bits, a non-string key) is written as json.dumps writes it."""
    report = {"nodes": {"node_0": {"facts": {"reading": float("nan"), "limit": float("inf"), 3: "x",
                                             "serial": 2**70}}}, "findings": [{"observed": -float("inf")}],
              "run": float("nan")}
    back = json.loads(dumps_report(report, use_orjson=use_orjson))
    assert back == {"nodes": {"node_0": {"facts": {"reading": None, "limit": None, "3": "x", "serial": 2**70}}},
                    "findings": [{"observed": None}], "run": None}
    assert dumps_report(report, use_orjson=use_orjson) == dumps_report(report, use_orjson=not use_orjson)


def test_the_declared_fast_encoder_is_the_one_used() -> None:
    assert jsonio.encoder_name() == "orjson"  # pyproject.toml depends on it; the fallback is for installs without


def test_report_json_is_streamed_in_pieces() -> None:
    """No piece written is more than a few node sections: the whole text is never held."""
    report = large_report(2000)

    class Recorder(io.RawIOBase):
        def __init__(self) -> None:
            self.sizes: list[int] = []

        def writable(self) -> bool:
            return True

        def write(self, data: Any) -> int:
            self.sizes.append(len(data))
            return len(data)

    sink = Recorder()
    dump_report(report, sink)
    total = sum(sink.sizes)
    assert total == len(dumps_report(report))
    assert len(sink.sizes) > 2000 // jsonio.BATCH and max(sink.sizes) < total / 20, (max(sink.sizes), total)


def _run(tmp_path: Path, *extra: str) -> bytes:
    out = tmp_path / ("pretty" if extra else "compact")
    code = main(["run", "--replay", str(H200_DUMP), "--no-history", "--report-dir", str(out), *extra])
    assert code in (0, 1), code
    return (out / "report.json").read_bytes()


def test_run_writes_compact_json_and_indented_with_pretty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    compact, pretty = _run(tmp_path), _run(tmp_path, "--pretty")
    capsys.readouterr()
    assert compact.startswith(b'{"schema_version":') and compact.count(b"\n") == 1
    assert pretty.startswith(b'{\n  "schema_version": ') and pretty.count(b"\n") > 1000
    a, b = json.loads(compact), json.loads(pretty)
    assert a.keys() == b.keys() and a["nodes"].keys() == b["nodes"].keys()
    assert [(f["check_id"], f["status"], f["subject"]) for f in a["findings"]] == \
        [(f["check_id"], f["status"], f["subject"]) for f in b["findings"]]


def test_pretty_is_a_run_flag() -> None:
    from gpu_preflight.cli.main import build_parser

    assert build_parser().parse_args(["run", "--pretty"]).pretty is True
    assert build_parser().parse_args(["run"]).pretty is False


@pytest.fixture(scope="module")
def ten_thousand() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    planted = [finding(n, "gpu.thermal", "FAIL", f"{name(n)}/gpu1", "at_slowdown", 91, 87, "°C")
               for n in (17, 4242, 9999)]
    planted += [finding(n, "system.shm", "WARN", name(n), "small", 64, 1024, "MiB") for n in range(100, 160)]
    planted.append(finding(3, "gpu.ecc.errors", "ERROR", f"{name(3)}/gpu0", "read_failed"))
    return large_report(10_000, planted=planted), planted


def test_html_at_ten_thousand_nodes_is_small_and_names_every_problem(
        ten_thousand: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    report, planted = ten_thousand
    text = render_html(ClusterReport.of(report))
    page = Page(text)
    assert not page.errors and not page.stack
    assert_self_contained(text, page)
    assert len(text.encode()) <= 5 * MB, len(text.encode())
    assert page.count("td", **{"class": "c"}) == 0  # no node x check grid at this scale
    problem_nodes = {f["subject"].split("/")[0] for f in planted}
    rows = [a for t, a in page.tags if t == "tr" and a.get("class") == "nr"]
    assert len(rows) == len(problem_nodes)
    for node in problem_nodes:
        assert node in page.text["grid"] and node in page.text["findings"]
    summary = page.text["grid"]
    assert f"{10_000 - len(problem_nodes):,} of 10,000 nodes" in summary
    assert "node-filter" in page.ids() and "check-counts" in page.ids()


def test_html_distributions_count_every_gpu_and_name_the_slowest_node(
        ten_thousand: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    report, _ = ten_thousand
    gpus = sum(len(section["gpu"]) for section in report["nodes"].values())
    assert gpus >= 10_000
    text = render_html(ClusterReport.of(report))
    charts = dict(re.findall(r'<svg class="chart"[^>]*aria-label="([^"]*)">(.*?)</svg>', text))
    for title, unit in (("GPU temperature", "°C"), ("GPU power draw", "W")):
        counts = [int(n) for n in re.findall(rf"{unit}: (\d+)</title></rect>", charts[title])]
        assert sum(counts) == gpus and len(counts) <= 40, title  # every GPU, in at most forty bars
        assert f"{gpus:,} in all" in charts[title]
    bandwidth = charts["all_reduce: bus bandwidth vs message size"]
    assert "10000 node-local groups: min-max" in bandwidth and bandwidth.count("<polygon") == 1
    assert f"{name(7)} (node-local)" in bandwidth  # the half-speed node keeps its own labelled line
    assert len(re.findall(r'class="lg">n\d+ \(node-local\)<', bandwidth)) == 9  # the nine slowest, labelled
    assert 'stroke="#c8c8c8"' not in bandwidth and "median of 10000 node-local groups" in bandwidth


def test_html_size_does_not_grow_with_passing_nodes() -> None:
    small = render_html(ClusterReport.of(large_report(1000)))
    large = render_html(ClusterReport.of(large_report(10_000)))
    assert len(large) - len(small) < 20_000, (len(small), len(large))


def test_one_cause_on_every_gpu_is_named_in_full_without_a_row_each() -> None:
    planted = [finding(n, "gpu.power", "WARN", f"{name(n)}/gpu{g}", "capped", 500, 700, "W")
               for n in range(2000) for g in range(2)]
    report = large_report(2000, planted=planted)
    text = render_html(ClusterReport.of(report))
    page = Page(text)
    assert len(text.encode()) <= 5 * MB
    loud = [a for t, a in page.tags if t == "tr" and (a.get("class") or "").startswith("loud")]
    assert len(loud) == MAX_GROUP_ROWS + 1 and loud[-1]["class"] == "loud more"
    assert f"{4000 - MAX_GROUP_ROWS:,} more (capped)" in page.text["findings"]
    for f in planted:
        assert f["subject"] in page.text["findings"]


def test_a_broken_orjson_install_falls_back_to_the_standard_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``orjson`` that imports without ``dumps`` (an empty namespace package, seen on a GPU image)
    is not used: the report is still written, by the json module."""
    import sys
    import types

    from gpu_preflight.report import jsonio

    monkeypatch.setitem(sys.modules, "orjson", types.ModuleType("orjson"))
    jsonio._load_orjson.cache_clear()
    try:
        assert jsonio._load_orjson() is None
        assert jsonio.encoder_name() == "json"
        assert json.loads(jsonio.dumps_report({"a": [1.5, float("nan")]})) == {"a": [1.5, None]}
    finally:
        jsonio._load_orjson.cache_clear()


def test_format_json_prints_the_pretty_report_json_and_no_bare_nan() -> None:
    """``--format json`` on stdout is what ``report.json`` holds with ``--pretty``: strict JSON."""
    from gpu_preflight.report import render
    from gpu_preflight.report.jsonio import dumps_report

    report = {"cluster_summary": {"overall_status": "PASS", "figure": float("nan")}, "findings": [], "nodes": {}}

    def refuse(token: str) -> None:
        raise ValueError(f"bare {token} in --format json")

    text = render(report, "json")
    assert text.encode() == dumps_report(report, pretty=True)
    assert json.loads(text, parse_constant=refuse)["cluster_summary"]["figure"] is None
