"""The typed report model: to_dict gives the report's JSON exactly, from_dict reads it back,
assembling and assessing are values, the renderer registry and the generated schema."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from typing import Any

import msgspec
import pytest

from gpu_preflight.cli.main import build_parser
from gpu_preflight.findings.canonical import node_entry
from gpu_preflight.findings.model import (
    Assessment,
    ClusterReport,
    EarlierScore,
    NcclSection,
    NodeSection,
    NodeSections,
    ReportFinding,
)
from gpu_preflight.model import SCHEMA_VERSION, Status
from gpu_preflight.report import FORMATS, render, reporters
from gpu_preflight.report.advice import add_advice, advise
from gpu_preflight.report.build import assemble, assemble_report
from gpu_preflight.report.schema import generate, shipped, text
from gpu_preflight.report.write import write_report

from .assessment_data import multinode_report
from .report_data import cluster_report, h200_report, node_only_report
from .report_schema_check import check_reports_under, problems

REPORTS = {"h200": h200_report, "node_only": node_only_report, "cluster": cluster_report,
           "multinode": multinode_report}


@pytest.fixture(scope="module", params=sorted(REPORTS))
def report(request: pytest.FixtureRequest) -> dict[str, Any]:
    return REPORTS[request.param]()


def test_to_dict_is_the_report_json_exactly(report: dict[str, Any]) -> None:
    typed = ClusterReport.from_dict(report)
    assert typed.to_dict() == report
    if "earlier_scores" not in report["cluster_summary"]:  # the multinode fixture adds them after scoring
        assert json.dumps(typed.to_dict()) == json.dumps(report)  # same keys, same order, same types
    assert ClusterReport.from_dict(typed.to_dict()) == typed


def test_typed_fields_are_typed(report: dict[str, Any]) -> None:
    typed = ClusterReport.from_dict(report)
    assert isinstance(typed.cluster_summary.overall_status, Status)
    assert all(isinstance(f, ReportFinding) and isinstance(f.status, Status) for f in typed.findings)
    assert list(typed.nodes) == list(report["nodes"])
    for key, section in typed.nodes.items():
        assert section.node_info.hostname == report["nodes"][key]["node_info"]["hostname"]
    with pytest.raises(AttributeError):
        typed.cluster_summary.exit_code = 0  # type: ignore[misc]


def test_a_malformed_report_is_refused() -> None:
    report = cluster_report()
    broken = copy.deepcopy(report)
    broken["findings"][0]["status"] = "GREAT"
    with pytest.raises(msgspec.ValidationError, match=r"Invalid enum value 'GREAT' - at `\$\.findings\[0\]\.status`"):
        ClusterReport.from_dict(broken)
    assert issubclass(msgspec.ValidationError, ValueError)
    broken["findings"][0]["status"] = "PASS"
    broken["nodes"]["node_1"]["gpu"]["gpu_0"]["temperature_c"] = "hot"
    where = r"got `str` - at `\$\.nodes\.node_1\.gpu\[\.\.\.\]\.temperature_c`"  # the path from the report's root
    with pytest.raises(msgspec.ValidationError, match=where):
        ClusterReport.from_dict(broken).nodes["node_1"]  # a section is read (and checked) when first used
    del broken["cluster_summary"]
    with pytest.raises(msgspec.ValidationError, match="missing required field `cluster_summary`"):
        ClusterReport.from_dict(broken)


def test_a_trimmed_or_older_report_still_reads() -> None:
    report = cluster_report()
    trimmed = {k: report[k] for k in ("schema_version", "findings", "cluster_summary", "run")}
    typed = ClusterReport.from_dict(trimmed)
    assert typed.findings == ClusterReport.from_dict(report).findings
    assert typed.nodes == {} and typed.cluster_info.cluster_topology.total_nodes == 0
    assert render(trimmed, "console").splitlines()[-1] == render(report, "console").splitlines()[-1]


def test_unknown_blocks_keep_their_place() -> None:
    report = cluster_report()
    summary = report["cluster_summary"]
    scored = {k: summary.pop(k) for k in ("earlier_scores", "health_scores", "recommendations_by_urgency",
                                          "cost_benefit", "assessment") if k in summary}
    summary.update(localization={"rounds": 2}, **scored)  # where a run puts it: before the history and scores
    report["nodes"]["node_1"]["system"]["numa_nodes"] = 2
    report["nodes"]["node_1"]["power"] = {"gpu0": {"max_w": 610}}
    report["extension"] = [1]
    typed = ClusterReport.from_dict(report)
    assert typed.cluster_summary.extra == {"localization": {"rounds": 2}}
    assert typed.nodes["node_1"].system.extra == {"numa_nodes": 2}
    assert typed.nodes["node_1"].extra == {"power": {"gpu0": {"max_w": 610}}}
    assert json.dumps(typed.to_dict()) == json.dumps(report)


def _entries() -> list[dict[str, Any]]:
    from gpu_preflight import run_checks

    from .conftest import H200_DUMP

    node = run_checks(replay=str(H200_DUMP), include=["gpu.*"], environ={})
    return [node_entry(node, f"node_{i}") for i in range(2)]


def test_assemble_is_the_typed_assemble_report() -> None:
    entries = _entries()
    typed = assemble(copy.deepcopy(entries), fail_on="fail")
    plain = assemble_report(copy.deepcopy(entries), fail_on="fail")
    assert isinstance(typed, ClusterReport)
    assert json.dumps(typed.to_dict()) == json.dumps(plain)
    bare = assemble(copy.deepcopy(entries), fail_on="fail", assess=False)
    assert bare.cluster_summary.health_scores is None and bare.cluster_summary.assessment is None
    assert typed.cluster_summary.health_scores is not None
    assert typed.cluster_summary.health_scores.to_dict() == plain["cluster_summary"]["health_scores"]


def test_what_the_aggregation_adds_to_a_node_lands_where_the_class_has_it() -> None:
    """A block a node did not write (here ``dcgm``, taken out and added back by the merge) and a key
    added to a block it did write (``nccl.nccl_tests``, taken out and added back) are placed in :class:`NodeSection`'s
    and the block's field order, as a typed section writes them: before, an added block went after
    ``duration_s`` and report.json's key order hung on where the aggregation happened to add it."""
    entries = _entries()
    section = entries[0]["section"]
    dcgm = section.pop("dcgm")
    tests = section["nccl"].pop("nccl_tests")
    extras = {0: {"load": {}, "dcgm": dcgm, "nccl": {"nccl_tests": tests}}}  # not in the class's order
    got = assemble_report(copy.deepcopy(entries), fail_on="fail", node_extras=extras)["nodes"]["node_0"]
    assert list(got) == [k for k in NodeSection.__struct_encode_fields__ if k in got]
    assert list(got).index("dcgm") < list(got).index("checks")
    assert list(got["nccl"]) == [k for k in NcclSection.__struct_encode_fields__ if k in got["nccl"]]
    assert list(got["nccl"]).index("nccl_tests") < list(got["nccl"]).index("communication_tests")
    assert json.dumps(NodeSection.from_dict(got).to_dict()) == json.dumps(got)  # what a typed section writes


def test_advice_is_a_value_and_leaves_the_report_alone() -> None:
    report = assemble_report(_entries(), fail_on="fail", assess=False)
    before = json.dumps(report)
    advice = advise(ClusterReport.from_dict(report))
    assert isinstance(advice, Assessment)
    assert json.dumps(report) == before
    assert set(advice.recommendations_by_urgency or {}) == {"immediate", "short_term", "monitoring"}
    typed = ClusterReport.from_dict(report).with_assessment(advice)
    assert typed.cluster_summary.cost_benefit == advice.cost_benefit
    assert json.dumps(report) == before
    dict_path = add_advice(copy.deepcopy(report))["cluster_summary"]
    assert advice.assessment is not None and dict_path["assessment"] == advice.assessment.to_dict()


def test_with_summary_adds_blocks_as_a_new_value() -> None:
    typed = ClusterReport.from_dict(cluster_report())
    earlier = EarlierScore(run=3, timestamp="2026-11-13T06:00:00+00:00", components={"overall": 90.0, "gpu": None})
    later = typed.with_summary(earlier_scores=[earlier], localization={"rounds": 1})
    assert typed.cluster_summary.earlier_scores is None and "localization" not in typed.cluster_summary.extra
    out = later.to_dict()["cluster_summary"]
    assert out["localization"] == {"rounds": 1}
    assert list(out["earlier_scores"][0].items()) == [  # the history's key order, kept from before it was typed
        ("run", 3), ("timestamp", "2026-11-13T06:00:00+00:00"), ("components", {"overall": 90.0, "gpu": None})]
    assert ClusterReport.from_dict(later.to_dict()).cluster_summary.earlier_scores == [earlier]


def test_an_earlier_score_of_the_wrong_type_is_refused_with_its_path() -> None:
    report = cluster_report()
    report["cluster_summary"]["earlier_scores"] = [{"run": 1, "timestamp": "t", "components": {"overall": "90"}}]
    with pytest.raises(msgspec.ValidationError, match=r"\$\.cluster_summary\.earlier_scores\[0\]\.components"):
        ClusterReport.from_dict(report)


def test_a_saved_artifact_is_typed_and_one_without_its_checksum_is_refused_with_its_path() -> None:
    report = cluster_report()
    ref = {"name": "dcgm", "node": "node_0", "path": "artifacts/node_0/dcgm.txt", "bytes": 12, "sha256": "ab" * 32}
    report["artifacts"] = [ref]
    assert ClusterReport.from_dict(report).to_dict()["artifacts"] == [ref]  # written as it was read, key order too
    report["artifacts"] = [{k: v for k, v in ref.items() if k != "sha256"}]
    with pytest.raises(msgspec.ValidationError, match=r"missing required field `sha256` - at `\$\.artifacts\[0\]`"):
        ClusterReport.from_dict(report)


# -- renderers ------------------------------------------------------------------------


def test_formats_and_cli_choices_come_from_the_registry() -> None:
    assert tuple(reporters.names()) == FORMATS
    assert {"console", "json", "md", "junit", "html", "prometheus"} <= set(FORMATS)
    parser = build_parser()
    for argv in (["run"], ["report", "render", "x.json"]):
        args = parser.parse_args(argv)
        assert args.format in FORMATS
    run = parser._subparsers._group_actions[0].choices["run"]  # type: ignore[union-attr,index]
    fmt = next(a for a in run._actions if "--format" in a.option_strings)
    assert list(fmt.choices) == reporters.names()


def test_an_unknown_format_names_the_close_ones() -> None:
    with pytest.raises(ValueError, match="did you mean md"):
        render(cluster_report(), "mdd")


def test_every_format_renders_the_typed_report_as_its_dict() -> None:
    report = cluster_report()
    typed = ClusterReport.from_dict(report)
    for fmt in FORMATS:
        assert render(typed, fmt) == render(report, fmt), fmt


def test_a_json_render_imports_no_other_renderer() -> None:
    code = ("import sys, json; from gpu_preflight.report import render; "
            "render({'a': 1}, 'json'); "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('gpu_preflight.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = json.loads(out)
    assert "gpu_preflight.report.jsonio" in loaded
    for other in ("report.html", "report.markdown", "report.junit", "report.console", "outputs.textfile"):
        assert f"gpu_preflight.{other}" not in loaded


def test_a_registered_format_is_rendered() -> None:
    from gpu_preflight.report.reporters import reporter

    with reporters.scoped():
        @reporter("count", typed=True)
        def render_count(report: ClusterReport) -> str:
            return f"{len(report.findings)}\n"

        reporter("count_dict")(lambda report: f"{len(report['findings'])}\n")
        report = cluster_report()
        assert render(report, "count") == render(ClusterReport.from_dict(report), "count_dict") \
            == f"{len(report['findings'])}\n"
    assert "count" not in reporters


# -- schema ---------------------------------------------------------------------------


def test_the_shipped_schema_is_the_generated_one() -> None:
    assert shipped() == generate(), "regenerate: python -m gpu_preflight.report.schema --write"
    assert shipped()["title"].endswith(f"schema_version {SCHEMA_VERSION}")
    assert text().endswith("\n")


def test_every_report_kind_is_valid(report: dict[str, Any]) -> None:
    assert problems(report) == []


def test_the_schema_refuses_a_wrong_layout() -> None:
    report = cluster_report()
    bad = copy.deepcopy(report)
    bad["cluster_summary"]["exit_code"] = "2"
    bad["findings"][0]["status"] = "GREAT"
    del bad["nodes"]["node_0"]["node_info"]["hostname"]
    bad["nodes"]["node_0"]["gpu"]["gpu_0"]["temperature_c"] = "hot"
    found = "\n".join(problems(bad, limit=10))
    for where in ("cluster_summary/exit_code", "findings/0/status", "nodes/node_0/node_info",
                  "nodes/node_0/gpu/gpu_0/temperature_c"):
        assert where in found


def test_written_reports_are_checked(tmp_path: Any) -> None:
    report = cluster_report()
    write_report(report, [], tmp_path / "ok")
    assert check_reports_under(tmp_path) == []
    report = copy.deepcopy(report)
    report["run"]["fail_on"] = 3
    with pytest.raises(msgspec.ValidationError, match=r"at `\$\.run\.fail_on`"):  # the model refuses to write it
        write_report(report, [], tmp_path / "bad")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "report.json").write_text(json.dumps(report), encoding="utf-8")  # written by another tool
    assert check_reports_under(tmp_path) == ["bad/report.json: run/fail_on: 3 is not of type 'string'"]
    (tmp_path / "bad" / "report.json").unlink()  # the autouse check would (rightly) fail this test


def test_the_verdict_of_the_typed_report_is_what_its_json_says(report: dict[str, Any]) -> None:
    from gpu_preflight.findings.canonical import verdict_of

    verdict = verdict_of(ClusterReport.from_dict(report))
    assert (verdict.status.value, verdict.exit_code) == (report["cluster_summary"]["overall_status"],
                                                         report["cluster_summary"]["exit_code"])
    warn = copy.deepcopy(report)
    warn["run"]["fail_on"] = "warn"
    assert verdict_of(ClusterReport.from_dict(warn)).fail_on == "warn"


def test_node_sections_are_typed_when_read() -> None:
    report = cluster_report()
    typed = ClusterReport.from_dict(report)
    assert isinstance(typed.nodes, NodeSections) and list(typed.nodes) == list(report["nodes"])
    assert typed.to_dict()["nodes"]["node_1"] is report["nodes"]["node_1"]  # untouched sections are given back
    assert typed.nodes["node_1"].node_info.current_host == report["nodes"]["node_1"]["node_info"]["current_host"]
    del report["nodes"]["node_2"]["node_info"]
    lazy = ClusterReport.from_dict(report)  # a malformed section is refused when it is read
    with pytest.raises(msgspec.ValidationError, match="missing required field `node_info`"):
        lazy.nodes["node_2"]


def test_mlflow_and_failed_checks_read_the_typed_report(report: dict[str, Any]) -> None:
    from gpu_preflight.findings.canonical import failed_checks
    from gpu_preflight.outputs.mlflow import metrics_of, params_of

    typed = ClusterReport.from_dict(report)
    params = params_of(typed, "c1")
    assert params["schema_version"] == report["schema_version"] and params["cluster"] == "c1"
    assert metrics_of(typed)["findings.fail"] == report["cluster_summary"]["counts"]["FAIL"]
    gating = {f["check_id"] for f in report["findings"] if f["status"] in ("FAIL", "ERROR")}
    assert set(failed_checks(typed)) == gating


def test_the_typed_report_is_written_as_its_dict(tmp_path: Any) -> None:
    report = cluster_report()
    write_report(ClusterReport.from_dict(report), [], tmp_path / "typed")
    write_report(report, [], tmp_path / "plain")
    assert (tmp_path / "typed" / "report.json").read_bytes() == (tmp_path / "plain" / "report.json").read_bytes()


def test_later_findings_are_added_as_a_new_value() -> None:
    from gpu_preflight.findings.canonical import with_findings
    from gpu_preflight.history.merge import add_findings
    from gpu_preflight.model import Finding

    report = h200_report()
    typed = ClusterReport.from_dict(report)
    late = Finding("history.regression", Status.WARN, typed.nodes["node_0"].node_info.hostname, "slower",
                   "GEMM 12% below this node's median", recommendation="Look at the node.")
    later = with_findings(typed, [ReportFinding.from_dict({"node": "node_0", **late.to_dict()})])
    assert typed.findings == ClusterReport.from_dict(report).findings  # the first value is unchanged
    assert later.findings[-1].check_id == "history.regression"
    merged = add_findings(typed, [late]).cluster_summary  # the history's way in: its node located by host name
    for key in ("overall_status", "exit_code", "issues", "recommendations", "counts"):
        assert getattr(later.cluster_summary, key) == getattr(merged, key), key
    assert later.cluster_summary.counts["WARN"] == typed.cluster_summary.counts["WARN"] + 1


def test_a_rolled_up_pass_expands_per_subject_as_its_dict_does() -> None:
    from gpu_preflight.model import per_subject

    rolled = {"node": "cluster", "check_id": "compute.gemm", "status": "PASS", "subject": "cluster", "code": "ok",
              "summary": "3 GPUs", "observed": None, "expected": 500.0, "unit": "TFLOP/s", "recommendation": None,
              "details": {"rolled_up": True, "dtype": "bf16", "subjects": {"h0/gpu0": 700.0, "h0/gpu1": 690.0}}}
    plain = {**rolled, "subject": "h1/gpu0", "observed": 600.0, "details": {"dtype": "bf16"}}
    for data in (rolled, plain):
        typed = [f.to_dict() for f in ReportFinding.from_dict(data).per_subject()]
        assert typed == [dict(f) for f in per_subject([data])]
    assert [f.subject for f in ReportFinding.from_dict(rolled).per_subject()] == ["h0/gpu0", "h0/gpu1"]


def test_node_blocks_and_names_read_as_the_typed_sections_without_typing_them() -> None:
    report = multinode_report()
    report["nodes"]["node_1"].pop("network", None)
    untouched = ClusterReport.from_dict(report).nodes
    typed = ClusterReport.from_dict(report).nodes
    sections = [typed[k] for k in typed]  # every section typed
    for name in ("gpu", "system", "network", "nccl", "facts", "load"):
        assert list(untouched.blocks(name)) == [getattr(s, name) for s in sections] == list(typed.blocks(name))
    assert untouched.host_names() == [s.node_info.current_host for s in sections] == typed.host_names()
    assert untouched._typed == {}  # read from the dicts: no section was typed for it
    assert untouched.raw("node_1") is report["nodes"]["node_1"]


def _mixed_node() -> Any:
    """A node whose findings pass, warn, fail and skip, one asking for a GPU reset."""
    from gpu_preflight.model import CheckResult, Finding, NodeReport

    found = [Finding("gpu.thermal", Status.WARN, "h0/gpu0", "hot", "hot", recommendation="cool it"),
             Finding("gpu.xid", Status.FAIL, "h0/gpu1", "xid", "Xid 79", details={"operator_action": "reset_gpu"}),
             Finding("system.shm", Status.SKIP, "h0", "none", "no /dev/shm"),
             Finding("gpu.pcie", Status.PASS, "h0/gpu0", "ok", "Gen5 x16")]
    return NodeReport("h0", "2026-01-01T00:00:00+00:00", [CheckResult(f.check_id, f.check_id, [f], 0.5)
                                                          for f in found])


def test_a_node_and_its_report_findings_summarise_alike() -> None:
    """summarize reads a node's findings and the report's typed ones the same way (no dicts between)."""
    from gpu_preflight.findings.canonical import summarize

    node = _mixed_node()
    listed = ReportFinding.many_from_dicts([{"node": "node_0", **f.to_dict()} for f in node.findings])
    own, read = summarize(node.findings, "fail"), summarize(listed, "fail")
    assert own == read
    assert own.overall_status is Status.FAIL and own.counts == {"PASS": 1, "WARN": 1, "FAIL": 1, "SKIP": 1,
                                                                "ERROR": 0}
    assert own.issues[0].startswith("[FAIL] h0/gpu1 gpu.xid")


def test_findings_are_read_in_one_validated_conversion() -> None:
    rows = [{"node": "node_0", "check_id": "a", "status": "PASS", "subject": "h", "code": "c", "summary": "s"},
            {"node": "node_0", "check_id": "b", "status": "GOOD", "subject": "h", "code": "c", "summary": "s"}]
    assert ReportFinding.many_from_dicts(rows[:1]) == [ReportFinding.from_dict(rows[0])]
    with pytest.raises(msgspec.ValidationError, match=r"\$\[1\]\.status"):
        ReportFinding.many_from_dicts(rows)


def test_a_node_section_is_built_typed_and_travels_as_its_dict() -> None:
    from gpu_preflight.findings.canonical import node_section
    from gpu_preflight.findings.model import NodeSection

    node = _mixed_node()
    section = node_section(node, {"node_rank": 3, "identity": {"machine_id": "m"}})
    assert isinstance(section, NodeSection)
    assert section.summary.operator_action == "reset_gpu"
    assert section.node_info.node_rank == 3 and section.node_info.extra == {"identity": {"machine_id": "m"}}
    sent = node_entry(node, "node_3", {"node_rank": 3, "identity": {"machine_id": "m"}})["section"]
    assert json.dumps(sent) == json.dumps(section.to_dict())
    assert NodeSection.from_dict(sent) == section
    brief = node_entry(node, "node_3", detail=False)["section"]
    assert brief["checks"] == {"gpu.thermal": "WARN", "gpu.xid": "FAIL", "system.shm": "SKIP", "gpu.pcie": "PASS"}


def test_the_cluster_blocks_go_in_before_the_assessment() -> None:
    """assemble puts the summary blocks and test_parameters in as values and scores after them."""
    seen: list[ClusterReport] = []

    def assess(report: ClusterReport, config: Any) -> Assessment:
        seen.append(report)
        return advise(report, config)

    from gpu_preflight.findings import canonical

    typed = canonical.assemble(_entries(), fail_on="fail", summary_blocks={"reachability": {"ok": True}},
                               test_parameters={"sizes": [1, 2]}, assess=assess)
    assert seen[0].cluster_summary.extra == {"reachability": {"ok": True}}
    out = typed.to_dict()
    assert out["cluster_info"]["test_parameters"] == {"sizes": [1, 2]}
    assert list(out["cluster_info"])[-1] == "test_parameters"
    assert out["cluster_summary"]["reachability"] == {"ok": True} and typed.cluster_summary.health_scores is not None


def test_the_diagnostics_blocks_are_typed_and_written_as_they_were_read() -> None:
    from gpu_preflight.findings.model import DcgmSection, NcclSection, NetworkSection

    report = cluster_report()
    typed = ClusterReport.from_dict(report).nodes
    for key in typed:
        section, raw = typed[key], report["nodes"][key]
        assert isinstance(section.network, NetworkSection) and isinstance(section.dcgm, DcgmSection)
        assert isinstance(section.nccl, NcclSection)
        for name in ("network", "dcgm"):
            assert json.dumps(getattr(section, name).to_dict()) == json.dumps(raw[name]), (key, name)
        # the same content; a collective's keys in the rank's order, not the hand-made entries' (next test)
        assert section.nccl.to_dict() == raw["nccl"], key
    first = report["nodes"]["node_0"]
    assert typed["node_0"].nccl is not None
    assert list(typed["node_0"].nccl.communication_tests) == list(first["nccl"]["communication_tests"])
    assert typed["node_0"].network is not None
    assert typed["node_0"].network.efa_available is first["network"]["efa_available"]


def test_a_collective_entry_is_typed_and_written_in_the_ranks_order() -> None:
    """``nccl.communication_tests``' entries as the rank writes them (the sweep's fields, then its
    group's scope) and the aggregation lists them (``test_type``) read back as the same JSON text;
    the copy on a group's other nodes (no ``ranks``) and a failure in that order (no ``wrong``, no
    sizes) too. A failure as the rank words it (``scope`` after ``group``) reads back with the same
    content, written in this order where a typed section is written (an artifact path filled)."""
    from gpu_preflight.findings.model import CollectiveTest, NcclSection
    from gpu_preflight.workloads.collectives import CollectiveResult, SizeResult

    sweep = CollectiveResult("all_reduce", "node0", [0, 1], [SizeResult(1 << 20, 20.5, 51.2, 51.2, 0, 19.0, 22.0),
                                                               SizeResult(8 << 20, 60.0, 140.0, 140.0, 0, 58.5, 61.0)])
    entry = {**sweep.to_dict(), "scope": "intra_node", "test_type": "intra_node"}
    light = {k: v for k, v in entry.items() if k != "ranks"}
    failed = {"op": "all_gather", "group": "all", "ranks": [0, 1], "success": False, "processes_tested": 2,
              "error": "timed out", "peak_bandwidth_gbps": 0.0, "results": [], "scope": "distributed",
              "test_type": "distributed"}
    for data in (entry, light, failed):
        typed = CollectiveTest.from_dict(data)
        assert json.dumps(typed.to_dict()) == json.dumps(data)
    typed = CollectiveTest.from_dict(entry)
    assert typed.results[1].busbw_gbps == 140.0 and typed.results[0].time_us_min == 19.0 and typed.ranks == [0, 1]
    assert CollectiveTest.from_dict(light).ranks is None and CollectiveTest.from_dict(failed).wrong is None
    block = {"nccl_tests_available": False, "nccl_tests": {},
             "communication_tests": {"intra_node_all_reduce": {**entry, "peak_bandwidth_gbps": "fast"}}}
    with pytest.raises(msgspec.ValidationError, match=r"peak_bandwidth_gbps"):
        NcclSection.from_dict(block)


def test_the_collectives_are_read_as_json_objects_without_typing_a_block() -> None:
    """``NodeSections.collectives``: each node's entries as the dicts they are (nothing typed, so a
    value typing would refuse passes), ``{}`` for a node without them, a typed section's as its JSON."""
    report = cluster_report()
    raw = report["nodes"]
    raw["node_1"]["nccl"]["communication_tests"]["intra_node_all_reduce"]["success"] = "yes"
    del raw["node_2"]["nccl"]
    nodes = ClusterReport.from_dict(report).nodes
    tests = list(nodes.collectives())
    assert tests[0] is raw["node_0"]["nccl"]["communication_tests"] and tests[2] == {}
    assert tests[1]["intra_node_all_reduce"]["success"] == "yes"
    assert not nodes._typed and not nodes._blocks
    with pytest.raises(msgspec.ValidationError, match=r"node_1\.nccl\.communication_tests"):
        list(nodes.blocks("nccl"))
    typed = NodeSections({"node_0": NodeSections(raw)["node_0"]})
    assert next(typed.collectives()) == raw["node_0"]["nccl"]["communication_tests"]


def test_a_diagnostics_block_keeps_unknown_keys_and_reads_an_empty_one_as_absent() -> None:
    report = cluster_report()
    report["nodes"]["node_0"]["network"]["vendor_check"] = {"ok": True}  # a report from elsewhere
    report["nodes"]["node_1"]["dcgm"] = {}  # as schema 1.0 reports wrote a block they did not fill
    nodes = ClusterReport.from_dict(report).nodes
    network = next(nodes.blocks("network"))
    assert network is not None and network.extra == {"vendor_check": {"ok": True}}
    assert list(network.to_dict())[-1] == "vendor_check"
    assert list(nodes.blocks("dcgm"))[1] is None and nodes["node_1"].dcgm is None
    assert nodes["node_0"].network == network


def test_a_mistyped_diagnostics_block_is_refused_with_its_path() -> None:
    report = cluster_report()
    report["nodes"]["node_1"]["network"]["efa_available"] = "yes"
    where = r"Expected `bool`, got `str` - at `\$\.nodes\.node_1\.network\.efa_available`"
    with pytest.raises(msgspec.ValidationError, match=where):
        list(ClusterReport.from_dict(report).nodes.blocks("network"))
    with pytest.raises(msgspec.ValidationError, match=where):
        ClusterReport.from_dict(report).nodes["node_1"]


CAPTURED = "tests/fixtures/captured"


@pytest.mark.parametrize("path", [f"{CAPTURED}/h200-run-2026-11-26/cluster_report.json",  # schema 1.0
                                  f"{CAPTURED}/h100-run-2026-11-26c/cluster_report.json"])  # 1.1, with load
def test_the_system_and_load_blocks_are_typed_and_written_as_they_were_read(path: str) -> None:
    from gpu_preflight.findings.model import SystemSection

    with open(path) as f:
        report = json.load(f)
    nodes = ClusterReport.from_dict(report).nodes
    for key, system, load in zip(nodes, nodes.blocks("system"), nodes.blocks("load"), strict=True):
        raw = report["nodes"][key]
        assert isinstance(system, SystemSection) and system.cpu is not None and system.cpu.count == 16
        assert json.dumps(system.to_dict()) == json.dumps(raw["system"])
        assert nodes[key].system == system and nodes[key].load == load
        assert (load is None) == ("load" not in raw)
        for gpu, summary in (load or {}).items():
            assert summary.series.t and summary.static["power_limit_w"] == 700.0
            assert json.dumps(summary.to_dict()) == json.dumps(raw["load"][gpu])


def test_a_section_without_system_reads_an_empty_one_and_a_mistyped_load_is_refused_with_its_path() -> None:
    report = cluster_report()
    del report["nodes"]["node_0"]["system"]
    nodes = ClusterReport.from_dict(report).nodes
    assert next(nodes.blocks("system")).to_dict() == {} and nodes["node_0"].system.memory is None
    report = cluster_report()
    report["nodes"]["node_1"]["load"] = {"gpu0": {"gpu": "GPU-0", "static": {}, "phases": {}, "series": {"t": "x"},
                                                  "errors": {}, "lost": None, "ecc_delta": {}}}
    # msgspec names a map's key [...]
    where = r"Expected `array \| null`, got `str` - at `\$\.nodes\.node_1\.load\[\.\.\.\]\.series\.t`"
    with pytest.raises(msgspec.ValidationError, match=where):
        list(ClusterReport.from_dict(report).nodes.blocks("load"))
    with pytest.raises(msgspec.ValidationError, match=where):
        ClusterReport.from_dict(report).nodes["node_1"]
