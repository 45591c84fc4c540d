"""The HTML report's structure, parsed with html.parser: sections, charts, grid, escaping, no
network assets — for a node-only run, a real 2-rank CPU run and a multi-node run."""

from __future__ import annotations

import copy
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.report.html import render_html
from gpu_preflight.report.scores import add_scores

from .report_data import cluster_report, h200_report, node_only_report, self_launched_report

VOID = {"meta", "br", "input", "circle", "rect", "line", "polyline", "path", "img", "link"}


class Page(HTMLParser):
    """Tags, attributes, text per section, and whether every element was closed."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.section: str | None = None
        self.text: dict[str, str] = {}
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "section":
            self.section = a.get("id")
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        key = self.section or "_"
        self.text[key] = self.text.get(key, "") + data

    def count(self, tag: str, **attrs: str) -> int:
        return sum(1 for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in attrs.items()))

    def ids(self) -> set[str]:
        return {a["id"] for _, a in self.tags if a.get("id")}


def parse(report: dict[str, Any]) -> tuple[str, Page]:
    text = render_html(ClusterReport.of(report))
    page = Page(text)
    assert not page.errors and not page.stack, (page.errors, page.stack)
    return text, page


def assert_self_contained(text: str, page: Page) -> None:
    for tag, attrs in page.tags:
        for key in ("src", "href", "xlink:href", "action", "data"):
            value = attrs.get(key)
            assert value is None or value.startswith("#"), f"<{tag} {key}={value!r}>"
        assert tag not in ("link", "img", "iframe", "object", "embed"), tag
    assert "http://" not in text and "https://" not in text and "url(" not in text and "@import" not in text
    assert page.count("script") == 1 and all(a.get("src") is None for t, a in page.tags if t == "script")


def test_node_only_report_has_everything_but_workload_plots() -> None:
    text, page = parse(node_only_report())
    assert_self_contained(text, page)
    assert {"scores", "recommendations", "cost", "grid", "plots", "findings", "show-pass"} <= page.ids()
    assert page.text["plots"].count("no data") == 0
    titles = [a["aria-label"] for t, a in page.tags if t == "svg"]
    assert titles == ["GPU temperature", "GPU power draw"]  # sensors only: no GEMM, no collectives
    assert "Network infrastructure" in page.text["scores"] and "NOT TESTED" in page.text["scores"]
    assert "Monitoring" in page.text["recommendations"]
    rows = [a for t, a in page.tags if t == "td" and a.get("class") == "n"]
    assert len(rows) == 1  # one node, no cluster row in a node-only run
    quiet = [a for t, a in page.tags if t == "tr" and a.get("class") == "quiet"]
    assert quiet and all("hidden" in a for a in quiet)  # passes folded until asked for


def test_failures_lead_the_page_with_their_advice(tmp_path: Path) -> None:
    _, page = parse(h200_report(tmp_path, nvmlDeviceGetCurrentClocksEventReasons=8))
    assert "FAIL: not ready" in page.text["_"] and "[RESULT] FAILURE: [gpu.clocks]" in page.text["_"]
    # what lowered hardware health, named after the recorded host
    assert "gpu.clocks" in page.text["scores"] and "replay:dump.json/gpu0" in page.text["scores"]
    immediate = page.text["recommendations"].split("Short term")[0]
    assert "gpu.clocks" in immediate and "capped from" in page.text["scores"]
    loud = [a for t, a in page.tags if t == "tr" and a.get("class") == "loud"]
    assert loud and "hidden" not in loud[0]


def test_multinode_report_plots_a_line_per_node_and_gemm_against_expected() -> None:
    report = cluster_report(gemm=[700.0, 700.0, 700.0, 600.0, 700.0, 700.0], node_fabric=[450.0, 450.0, 380.0])
    text, page = parse(add_scores(report))
    assert_self_contained(text, page)
    titles = [a["aria-label"] for t, a in page.tags if t == "svg"]
    assert titles == ["all_gather: bus bandwidth vs message size", "all_reduce: bus bandwidth vs message size",
                      "bf16 GEMM TFLOP/s per GPU", "GPU temperature", "GPU power draw"]
    assert page.count("polyline") == 2 * 4  # per collective: the world + one line per node
    for node in ("h0 (node-local)", "h1 (node-local)", "h2 (node-local)", "all (distributed)"):
        assert node in page.text["plots"]
    assert "expected 670" in page.text["plots"] and "median 700" in page.text["plots"]
    assert page.count("rect", fill="#e0a800") >= 1  # the slow GPU's bar is WARN-coloured
    assert [a.get("class") for t, a in page.tags if t == "td" and a.get("class") == "n"] == ["n"] * 4
    assert "connectivity" in page.ids() and "48" in page.text["connectivity"]


def test_real_cluster_run_renders_even_without_stored_scores() -> None:
    report = copy.deepcopy(self_launched_report())
    for key in ("health_scores", "recommendations_by_urgency", "cost_benefit"):  # a report saved before them
        report["cluster_summary"].pop(key, None)
    text, page = parse(report)
    assert_self_contained(text, page)
    titles = [a["aria-label"] for t, a in page.tags if t == "svg"]
    assert sum("bus bandwidth" in t for t in titles) == 6 and "fp32 GEMM TFLOP/s per worker" in titles
    assert "cluster" in page.text["grid"]


def test_text_from_findings_is_escaped() -> None:
    report = node_only_report()
    report["findings"][0]["summary"] = '<script>alert("x")</script><img src="http://evil/">'
    text, page = parse(report)
    assert page.count("script") == 1 and page.count("img") == 0
    assert "&lt;script&gt;" in text


@pytest.mark.parametrize("key", ["health_scores", "recommendations_by_urgency", "cost_benefit"])
def test_stored_blocks_are_used_as_given(key: str) -> None:
    report = node_only_report()
    add_scores(report)
    from gpu_preflight.report.advice import add_advice

    add_advice(report)
    json.dumps(report)
    marker = "STORED-BLOCK-MARKER"
    block = report["cluster_summary"][key]
    if key == "health_scores":
        block["components"]["hardware_health"]["title"] = marker
    elif key == "cost_benefit":
        block["line"] = marker
    else:
        block["monitoring"][0]["recommendation"] = marker
    assert marker in render_html(ClusterReport.of(report))


def test_passing_rows_are_capped_problems_never(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import gpu_preflight.report.html as html_module

    monkeypatch.setattr(html_module, "MAX_QUIET_ROWS", 3)
    report = h200_report(tmp_path, nvmlDeviceGetCurrentClocksEventReasons=8)
    quiet_total = sum(f["status"] in ("PASS", "SKIP") for f in report["findings"])
    _, page = parse(report)
    rows = [a.get("class") for t, a in page.tags if t == "tr" and a.get("class") in ("quiet", "loud")]
    assert rows.count("quiet") == 3 and rows.count("loud") == 1
    assert f"({quiet_total - 3} more in report.json)" in page.text["findings"]


def test_large_cluster_lists_bad_pairs_and_greys_out_all_but_the_slowest_nodes() -> None:
    nodes = 40
    fabric = [450.0 - n for n in range(nodes)]  # node 39 is the slowest
    links = [48.0] * (nodes - 1)
    links[10] = 20.0  # h11's link
    text, page = parse(add_scores(cluster_report(nodes=nodes, node_fabric=fabric, links=links)))
    assert_self_contained(text, page)
    assert page.count("table", **{"class": "matrix"}) == 0  # a 40 x 40 grid would be mostly empty
    assert "h11" in page.text["connectivity"] and "1 pair(s) not PASS" in page.text["connectivity"]
    grey = page.count("polyline", stroke="#c8c8c8")
    assert grey == 2 * (nodes - 9)  # per collective: all but the 9 slowest node-local lines
    legend = set(re.findall(r'class="lg">([^<]*)<', text))
    assert {"h39 (node-local)", "h31 (node-local)"} <= legend and "h30 (node-local)" not in legend
    assert "h30 (node-local): 1MiB" in page.text["plots"]  # grey lines still name their node on hover


def test_localisation_pair_matrix_is_the_connectivity_grid() -> None:
    """With --localize, the node x node pair matrix the rounds measured is what the page shows."""
    from gpu_preflight.localize.report import localization_block
    from gpu_preflight.localize.scheduler import LocalizeConfig
    from gpu_preflight.localize.simulate import Scenario, simulate

    names = ["h0", "h1", "h2", "h3"]
    report = cluster_report(nodes=4)
    scenario = Scenario(4, slow={2: 0.3})
    outcome = simulate(scenario, LocalizeConfig(mode="full")).outcome
    report["cluster_summary"]["localization"] = localization_block(outcome, names)
    text, page = parse(add_scores(report))
    assert_self_contained(text, page)
    conn = report["cluster_summary"]["health_scores"]["connectivity"]
    assert conn["source"] == "localization" and conn["cells"] is not None
    assert "source: localization" in page.text["connectivity"]
    assert page.count("table", **{"class": "matrix"}) == 1
    slow = {(p["a"], p["b"]) for p in conn["pairs"] if p["status"] != "PASS"}
    assert slow and all("h2" in pair for pair in slow)  # every pair that is not PASS involves the slow node
