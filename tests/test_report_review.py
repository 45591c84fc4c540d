"""The health assessment's overview and judgement sections (issue 29 item 8), in Markdown and HTML.

Each section of the user's health-assessment report that the renderers lacked is derived from
data the report holds, and says "not measured" with why where it holds none: header Updated
and assessment type, infrastructure overview, software-stack health (versions per node and
whether they agree), network strengths and concerns, GPU memory with per-node utilisation,
the service-availability matrix, error classification with high-risk items, health-trend
analysis, the Optimization readiness line and the conclusion. The multi-node report is the
Markdown golden's (:mod:`tests.test_markdown_golden`); Chromium renders the new HTML sections.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.backends.fabric import find_ofi_plugin, plugin_version
from gpu_preflight.config.report_schema import ReportConfig
from gpu_preflight.findings.diagnostic_sections import network_section
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.report import render
from gpu_preflight.report.build import build_cluster_report
from gpu_preflight.report.html import render_html
from gpu_preflight.report.review import IMAGE_VARIABLE, service_matrix, software_stack
from gpu_preflight.workloads import stack as stack_module

from .report_data import gathered_cluster, node_only_report
from .test_html_chromium import chromium, load  # noqa: F401  (the fixture)
from .test_markdown_golden import fixed_report

SECTIONS = ["## Executive summary", "## Infrastructure overview", "## Node specifications",
            "## Software stack health", "## Connectivity", "## Network strengths and concerns", "## GPU memory",
            "## Service availability", "## Performance stability", "## Issues", "## Error classification",
            "### High-risk items", "## Recommendations", "## Health trend analysis", "## Target scores (30 days)",
            "## Readiness assessment", "## Monitoring schedule", "## Conclusion", "## Test results", "## Findings"]
HTML_IDS = ["infrastructure", "software-stack", "stack-agreement", "network-review", "gpu-memory",
            "memory-dashboard", "errors", "error-classes", "high-risk", "trend-analysis", "readiness-optimization",
            "conclusion", "decision", "assessment-type"]


def _md(report: dict[str, Any]) -> str:
    return render(report, "md")


def _section(text: str, title: str) -> str:
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start:end if end > 0 else None]


def _stack(report: dict[str, Any], node: str, **versions: Any) -> None:
    """Set the versions the workers read on ``node`` (its stack.cuda finding's observed)."""
    for f in report["findings"]:
        if f["check_id"] == "stack.cuda" and f["subject"] == node:
            f["observed"] = {**f["observed"], **versions}
            return
    raise AssertionError(f"no stack.cuda finding for {node}")


def test_sections_come_in_the_documents_order() -> None:
    text = _md(fixed_report())
    at = [text.index(h) for h in SECTIONS]
    assert at == sorted(at)


def test_header_says_when_the_data_were_last_updated_and_what_kind_of_assessment() -> None:
    report = fixed_report()
    text = _md(report)
    assert "- Updated: 2026-11-20T06:00:00+00:00" in text
    assert "- Assessment type: CLUSTER HEALTH CHECK (7 of 11 test groups judged)" in text
    later = copy.deepcopy(report)
    later["nodes"]["node_2"]["timestamp"] = "2026-11-20T06:04:30+00:00"  # a node read after the run started
    assert "- Updated: 2026-11-20T06:04:30+00:00" in _md(later)
    node = _md(node_only_report())
    assert "- Assessment type: NODE HEALTH CHECK" in node


def test_infrastructure_overview_from_what_the_run_recorded() -> None:
    text = _section(_md(fixed_report()), "## Infrastructure overview")
    assert "- **Type:** GPU cluster: 4 × NVIDIA H200" in text
    assert "- **Nodes:** 4 node(s) (h0, h1, h2, h3), 4 GPU(s); data complete" in text
    assert "launched by torchrun" in text and "profile h200" in text
    assert "node pairs measured at 21-21 GB/s" in text
    assert "- **Purpose:** not recorded" in text


def test_software_stack_agrees_or_names_the_odd_node() -> None:
    report = fixed_report()
    text = _section(_md(report), "## Software stack health")
    assert "| h0 | 580.159.04 | not read | 2.13.0 | 12.8 | 2.27.3 | not installed | not read |" in text
    assert "| NCCL | AGREE | 2.27.3 on all 4 node(s) |" in text
    assert f"| Container image | NOT MEASURED | not measured: no image recorded (set {IMAGE_VARIABLE}" in text
    _stack(report, "h3", nccl_version="2.21.5", container_image="registry/train@sha256:bbb")
    for node in ("h0", "h1", "h2"):
        _stack(report, node, container_image="registry/train@sha256:aaa")
    report["nodes"]["node_1"]["network"]["aws_ofi_nccl_plugin"] = {"installed": True, "path": "/opt/p.so",
                                                                   "version": "1.11.0-aws"}
    text = _section(_md(report), "## Software stack health")
    assert "| NCCL | DIFFER | differs between nodes: 2.27.3 on 3 node(s) (h0, h1, h2); 2.21.5 on 1 node(s) (h3) |" \
        in text
    assert "| Container image | DIFFER | differs between nodes: registry/train@sha256:aaa on 3 node(s) (h0, h1, h2); " \
           "registry/train@sha256:bbb on 1 node(s) (h3) |" in text
    assert "| aws-ofi-nccl | DIFFER | differs between nodes: not installed on 3 node(s) (h0, h2, h3); 1.11.0-aws on " \
           "1 node(s) (h1) |" in text


def test_software_stack_of_a_node_only_run_says_what_was_not_read() -> None:
    text = _section(_md(node_only_report()), "## Software stack health")
    assert "| torch | NOT MEASURED | not measured: read by the workers (stack.cuda)" in text
    assert "| Driver | AGREE |" in text and "| CUDA (driver) | AGREE |" in text


def test_software_stack_above_detail_max_nodes_counts_versions() -> None:
    stack = software_stack(ClusterReport.of(fixed_report()), ReportConfig(detail_max_nodes=2))
    assert not stack["listed"] and stack["nodes"] == []
    torch = next(c for c in stack["components"] if c["key"] == "torch")
    assert torch["status"] == "AGREE" and torch["values"] == [{"value": "2.13.0", "nodes": 4,
                                                               "names": ["h0", "h1", "h2", "h3"]}]


def test_network_strengths_and_concerns() -> None:
    text = _section(_md(fixed_report()), "## Network strengths and concerns")
    strengths, concerns = text.split("### Network concerns")
    assert "- fabric.pingpong: all 2 passed" in strengths
    assert "- network.node_links: 1 FAIL — exchange with h0: 21.000 GB/s" in concerns and "(h3)" in concerns
    assert "- nccl.collectives: 1 WARN" in concerns
    assert "network.node_links" not in strengths


def test_gpu_memory_dashboard_has_per_node_utilisation() -> None:
    text = _section(_md(fixed_report()), "## GPU memory")
    assert "| h2 | 1 | 140.4 GB | 28.5% | 0% | WARN | 98/100 |" in text  # 40 GiB held by a stray process
    assert "| h0 | 1 | 140.4 GB | 0.4% | 0% | HEALTHY | 100/100 |" in text
    assert "| Cluster | 4 | 561.61 GB | 7.4% | 0% | WARN | 72/100 |" in text
    report = fixed_report()
    report["nodes"]["node_0"]["gpu"]["gpu_0"]["memory_used_mb"] = None
    assert "| h0 | 1 | 140.4 GB | not measured | 0% |" in _md(report)


def test_service_availability_matrix_in_markdown() -> None:
    text = _section(_md(fixed_report()), "## Service availability")
    assert "| Test group | h0 | h1 | h2 | h3 | Cluster-wide | Reliability | Status |" in text
    assert "| gpu_health | PASS | PASS | WARN | WARN | — | 50% | WARN |" in text
    assert "| efa_network | PASS | PASS | PASS | PASS | — | 100% | PASS |" in text  # both ends of each pingpong pair
    assert "Not tested in this run: system_resources, dcgm_diagnostics, dcgm_basic, dcgm_extended." in text
    wide = service_matrix(ClusterReport.of(fixed_report()), columns=2)
    assert wide["nodes"] is None
    health = next(r for r in wide["rows"] if r["group"] == "gpu_health")
    assert health["cells"] is None and health["counts"]["WARN"] == 2 and health["problem_nodes"] == ["h2", "h3"]


def test_error_classification_and_high_risk_items() -> None:
    text = _section(_md(fixed_report()), "## Error classification")
    assert ("| network.node_links (link_slow) | Network infrastructure | 1 instance(s) | HIGH | REQUIRES ATTENTION |"
            in text)
    assert "| gpu.busy (memory_in_use) | Resource management | 1 instance(s) | MEDIUM | MONITORING NEEDED |" in text
    assert "No error in: Software stack, Service reliability, Performance consistency." in text
    assert "1. **network.node_links: exchange with h0" in text and "   - Mitigation: This node's network link" in text


def test_health_trend_analysis() -> None:
    text = _section(_md(fixed_report()), "## Health trend analysis")
    assert "- **Strengths:** Hardware health (80), Resource management (90), Software stack (100)" in text
    assert "- **Concerns:** Network infrastructure (30) CRITICAL; Performance consistency (29) CRITICAL; degrading:" \
        in text
    assert "- **Potential:** 72 → 93/100 (+21.8) within 30 days by fixing network.node_links" in text
    assert "- **Priority:** HIGH: network.node_links on h3:" in text


def test_optimization_readiness_line() -> None:
    text = _section(_md(fixed_report()), "## Readiness assessment")
    assert "- **Optimization: HIGH POTENTIAL**" in text and "the slowest member (h3) is 26.7% behind" in text
    node = _section(_md(node_only_report()), "## Readiness assessment")
    assert "- **Optimization: NOT MEASURED**" in node and "needs GEMM on two or more GPUs" in node


def test_conclusion_with_strengths_critical_issues_and_the_decision() -> None:
    text = _section(_md(fixed_report()), "## Conclusion")
    assert "**Current status: MODERATE HEALTH (72/100)**" in text
    assert "- Hardware health (80/100, GOOD)" in text.split("**Critical issues:**")[0]
    critical = text.split("**Critical issues:**")[1].split("**Readiness:**")[0]
    assert "- Network infrastructure (30/100, CRITICAL)" in critical and "- network.node_links:" in critical
    assert "- Production: **NEEDS FIXES**" in text and "- Optimization: **HIGH POTENTIAL**" in text
    assert "**Decision:** Not ready: fix network.node_links before the next job" in text


def test_html_has_the_new_sections() -> None:
    page = render_html(ClusterReport.of(fixed_report()))
    for ident in HTML_IDS:
        assert f'id="{ident}"' in page, ident
    assert "HIGH POTENTIAL" in page and "Not ready: fix network.node_links" in page


def test_chromium_renders_the_new_sections(chromium: str, tmp_path: Path) -> None:  # noqa: F811
    page = tmp_path / "assessment.html"
    report = fixed_report()
    _stack(report, "h3", container_image="registry/train@sha256:<bbb>")  # escaped, not markup
    page.write_text(render_html(ClusterReport.of(report)), encoding="utf-8")
    assert load(chromium, page, tmp_path / "assessment.png") == []
    assert "sha256:&lt;bbb&gt;" in page.read_text(encoding="utf-8")


def test_the_aws_ofi_nccl_version_is_read_from_the_library(tmp_path: Path) -> None:
    lib = tmp_path / "libnccl-net.so"
    # The plugin's "Initializing " PACKAGE_STRING, placed across the scanner's 1 MiB chunk boundary.
    lib.write_bytes(b"\x7fELF" + b"\0" * ((1 << 20) - 20) + b"Initializing aws-ofi-nccl 1.11.0-aws\0" + b"\0" * 99)
    assert plugin_version(lib) == "1.11.0-aws"
    found = find_ofi_plugin([str(tmp_path)], {})
    assert found.installed and found.version == "1.11.0-aws"
    other = tmp_path / "other" / "libnccl-net.so"
    other.parent.mkdir()
    other.write_bytes(b"\x7fELF some other net plugin")
    assert find_ofi_plugin([str(other.parent)], {}).version is None
    section = network_section({"fabric": {"plugin": {"installed": True, "path": str(lib), "version": "1.11.0-aws"}}})
    assert section.to_dict()["aws_ofi_nccl_plugin"] == {"installed": True, "path": str(lib), "version": "1.11.0-aws"}
    assert network_section({"fabric": {"plugin": {"installed": False}}}).to_dict()["aws_ofi_nccl_plugin"] == \
        {"installed": False, "path": None}  # the SageMaker layout, unchanged where no version was read


def test_the_container_image_travels_from_the_variable_to_the_report(monkeypatch: pytest.MonkeyPatch) -> None:
    assert stack_module.IMAGE_VARIABLE == IMAGE_VARIABLE
    monkeypatch.setenv(IMAGE_VARIABLE, "registry/train@sha256:aaa")
    assert stack_module.read_stack().container_image == "registry/train@sha256:aaa"
    monkeypatch.delenv(IMAGE_VARIABLE)
    assert stack_module.read_stack().container_image is None
    gathered = gathered_cluster(3, 1)
    for rank, p in gathered["payloads"].items():
        if rank != 1:
            p["stack"]["container_image"] = "registry/train@sha256:aaa"
    report, _ = build_cluster_report(gathered, _config(), fail_on="fail", include=[], exclude=[], suite="quick",
                                     timeout_s=30.0)
    stack = {f.subject: f.observed for f in report.findings if f.check_id == "stack.cuda"}
    assert stack["h0"]["container_image"] == "registry/train@sha256:aaa" and "container_image" not in stack["h1"]
    text = _section(render(report.to_dict(), "md"), "## Software stack health")
    assert "| Container image | AGREE | registry/train@sha256:aaa on 2 node(s); not read on 1 node(s) |" in text


def _config() -> Any:
    from gpu_preflight.config import Config
    from gpu_preflight.config.schema import PerfConfig

    return Config(perf=PerfConfig(gemm_bf16_tflops=670.0))
