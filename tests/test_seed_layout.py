"""The SageMaker health check's JSON layout (spec 000): every key path of the seed's example
exists in our report for the same scenario, with the same JSON type.

The scenario is the seed's: two nodes of four ranks, DCGM basic and extended (a full run,
through a stand-in ``dcgmi`` replaying DCGM's own table), EFA providers and the aws-ofi-nccl
plugin (stand-in ``fi_info``, a fake sysfs EFA device), fi_pingpong between the node
leaders, and the distributed all_reduce sweep; the report is built by the real node checks
and the real cluster aggregation. The seed's JSON is read from the user's spec at test
time (``../shared/spec``), never copied into the repository.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.config import Config
from gpu_preflight.config.schema import PerfConfig
from gpu_preflight.engine import run_checks
from gpu_preflight.findings.canonical import node_entry
from gpu_preflight.model import CheckResult, Finding, NodeReport, Status
from gpu_preflight.parsers.infiniband import IbDevice, IbDevicesRecord, IbPort
from gpu_preflight.report.build import assemble_report, build_cluster_report

from . import fake_sysfs
from .conftest import H200_DUMP, REPO
from .diag_tools import replay, tool
from .report_data import cluster_report, gathered_cluster

SPEC_DIR = Path(os.environ.get("GPU_PREFLIGHT_SPEC", REPO.parent / "shared" / "spec"))
DCGM_TABLE = REPO / "tests" / "fixtures" / "evidence" / "spec-dcgmi-diag-r3-targeted-power-fail.txt"
# fi_info -p efa as an EFA instance prints it: one RDM and one DGRAM entry per device.
FI_INFO_EFA = "".join(f"provider: efa\n    fabric: efa\n    domain: rdmap{d}s6-{kind}\n    version: 122.0\n"
                      f"    type: FI_EP_{kind.upper()}\n    protocol: FI_PROTO_EFA\n"
                      for d in range(2) for kind in ("rdm", "dgrm"))
JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null", dict: "object",
              list: "array"}


def seed_report() -> dict[str, Any]:
    """The ```json example of spec 000, its ``...`` elisions dropped."""
    found = sorted(SPEC_DIR.glob("000_*.txt"))
    if not found:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true but the user's spec is not at {SPEC_DIR}: set GPU_PREFLIGHT_SPEC")
        pytest.skip(f"no spec 000 at {SPEC_DIR} (set GPU_PREFLIGHT_SPEC): the seed-layout test needs its example")
    block = re.search(r"```json\n(.*?)\n```", found[0].read_text(encoding="utf-8"), re.DOTALL)
    assert block, f"{found[0]}: no ```json example"
    body = "\n".join(line for line in block.group(1).splitlines() if line.strip() != "...")
    data: dict[str, Any] = json.loads(re.sub(r",(\s*[}\]])", r"\1", body))
    return data


def _norm(path: str) -> str:
    path = re.sub(r"^nodes\.node_\d+", "nodes.<node>", path)
    path = re.sub(r"\.gpu\.gpu_\d+", ".gpu.<gpu>", path)
    return re.sub(r"(parsed_output\.test_results)\.[^.]+(\.[^.]+)?$",
                  lambda m: m.group(1) + ".<cat>" + (".<test>" if m.group(2) else ""), path)


def _walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if path:
        yield path, value
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _walk(inner, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for inner in value:
            yield from _walk(inner, path + "[]")


def key_paths(report: dict[str, Any]) -> dict[str, dict[str, set[str]]]:
    """Normalised key path -> node key (``-`` outside ``nodes``) -> the JSON types found there."""
    out: dict[str, dict[str, set[str]]] = {}
    for path, value in _walk(report):
        m = re.match(r"^nodes\.(node_\d+)", path)
        out.setdefault(_norm(path), {}).setdefault(m.group(1) if m else "-", set()).add(JSON_TYPES[type(value)])
    return out


def layout_gaps(seed: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    """Each seed key path that is missing from ours, or has another type, on any node of ours."""
    wanted, have = key_paths(seed), key_paths(ours)
    gaps = []
    for path, by_node in sorted(wanted.items()):
        (seed_type,) = set().union(*by_node.values())
        allowed = {seed_type, "integer"} if seed_type == "number" else {seed_type}
        nodes = list(ours["nodes"]) if path.startswith("nodes.<node>") else ["-"]
        for node in nodes:
            types = have.get(path, {}).get(node)
            if not types or not types <= allowed:
                gaps.append(f"{path} on {node}: seed {seed_type}, ours {sorted(types) if types else 'missing'}")
    return gaps


def node_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> NodeReport:
    """One node of the seed's scenario: GPUs from the recorded H200 snapshot, and a live full run of
    the system, DCGM and fabric checks with stand-in tools."""
    bindir = tmp_path / "bin"
    replay(bindir, "dcgmi", DCGM_TABLE)
    listing = tmp_path / "fi_info.txt"
    listing.write_text(FI_INFO_EFA)
    replay(bindir, "fi_info", listing)
    tool(bindir, "all_reduce_perf", "exit 127")
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    sysfs = fake_sysfs.build(tmp_path / "sys" / "infiniband", IbDevicesRecord("sysfs", [IbDevice(
        f"rdmap{d}s6", "efa", "0.0.0", [IbPort(1, "ACTIVE", "LINKUP", 100.0, "Unspecified")]) for d in range(2)]),
        driver="efa")
    plugin = tmp_path / "ofi-nccl" / "lib"
    plugin.mkdir(parents=True)
    (plugin / "libnccl-net.so").write_bytes(b"\x7fELF")
    gpus = run_checks(replay=str(H200_DUMP), include=["gpu.*"], environ={})
    live = run_checks(suite="full", include=["system.*", "dcgm.*", "fabric.*"], timeout_s=30, environ={},
                      overrides=[f"diagnostics.infiniband_sysfs={sysfs}",
                                 f"diagnostics.ofi_nccl_plugin_dirs=[{json.dumps(str(plugin))}]"])
    return NodeReport(live.hostname, live.timestamp, gpus.results + live.results,
                      {**live.facts, "gpu": gpus.facts["gpu"]}, raw_artifacts=live.raw_artifacts)


def seed_scenario(node: NodeReport, seed: dict[str, Any]) -> dict[str, Any]:
    """Two nodes × four ranks through the real cluster checks and aggregation."""
    gathered = gathered_cluster(2, 4)
    payloads = gathered["payloads"]
    for index, leader in enumerate((0, 4)):
        payloads[leader]["node_entry"] = node_entry(copy.deepcopy(node), f"node_{index}")
        test = seed["nodes"][f"node_{index}"]["network"]["efa_communication_test"]
        payloads[leader]["pingpong"] = [{
            "test_role": test["test_role"], "peer": None, "provider": "efa", "endpoint": "rdm", "port": 47600,
            "rc": 0, "timed_out": False, "missing": False, "success": True, "error": None,
            "raw_output": test["raw_output"], "pair": 0, "peer_node": 1 - index}]
    report, _ = build_cluster_report(gathered, Config(perf=PerfConfig(gemm_bf16_tflops=670.0)), fail_on="fail",
                                     include=[], exclude=[], suite="full", timeout_s=30.0)
    return report.to_dict()


@pytest.fixture
def seed() -> dict[str, Any]:
    return seed_report()


def test_every_key_path_of_the_seed_exists_in_ours_with_its_type(seed: dict[str, Any], tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    ours = json.loads(json.dumps(seed_scenario(node_run(tmp_path, monkeypatch), seed)))
    assert layout_gaps(seed, ours) == []
    assert ours["cluster_info"]["expected_total_gpus"] == 8  # two nodes of four GPU ranks
    for key, section in ours["nodes"].items():
        levels = section["dcgm"]["diagnostics"]
        assert [levels[k]["level"] for k in ("basic", "extended")] == [1, 2], key
        assert levels["extended"]["raw_output"] == DCGM_TABLE.read_text()  # inline, under the size limit
        for level in ("basic", "extended"):  # DCGM's own strings and rows, Warning/Info included, as the seed
            want = seed["nodes"]["node_0"]["dcgm"]["diagnostics"][level]["parsed_output"]
            got = levels[level]["parsed_output"]
            assert {c: got["test_results"][c] for c in want["test_results"]} == want["test_results"], (key, level)
        assert levels["extended"]["parsed_output"]["overall_status"] == "Mixed"
        assert levels["basic"]["parsed_output"]["tests"][0]["category"] == "Deployment"  # our detail beside it
        tests = section["nccl"]["communication_tests"]
        assert tests["distributed_all_reduce"]["processes_tested"] == 8, key  # the job-wide sweep, on every node
        assert section["summary"]["performance_summary"]["distributed_all_reduce_bandwidth_gbps"] == \
            tests["distributed_all_reduce"]["peak_bandwidth_gbps"]
        assert section["summary"]["test_results"]["nccl_communication"] is True, key  # the cluster checks' result
    ranks = [ours["nodes"][k]["network"]["efa_communication_test"]["rank"] for k in ("node_0", "node_1")]
    assert ranks == [0, 4]
    # the stand-in DCGM table fails GPU 1's targeted power at both levels
    assert {k: ours["cluster_summary"]["test_results"][k] for k in ("dcgm_basic", "dcgm_extended")} == {
        "dcgm_basic": False, "dcgm_extended": False}


def test_the_comparison_finds_a_missing_path_and_a_changed_type(seed: dict[str, Any]) -> None:
    """The layout check itself can fail: a dropped key and a string turned into a list are named."""
    ours = copy.deepcopy(seed)
    del ours["nodes"]["node_1"]["network"]["efa_communication_test"]["rank"]
    ours["nodes"]["node_0"]["dcgm"]["diagnostics"]["basic"]["parsed_output"]["gpu_device_ids"] = ["2237"]
    assert layout_gaps(seed, ours) == [
        "nodes.<node>.dcgm.diagnostics.basic.parsed_output.gpu_device_ids on node_0: seed string, ours ['array']",
        "nodes.<node>.network.efa_communication_test.rank on node_1: seed integer, ours missing",
    ]


def test_node_summaries_count_the_cluster_checks_that_name_them() -> None:
    """node2's slow NVLink is an nccl.collectives FAIL on ``group node2``: node2's nccl_communication is
    false, the other nodes' true; each node's performance summary holds its own node-local figure."""
    report = cluster_report(nodes=3, node_fabric=[450.0, 450.0, 50.0])
    results = {k: s["summary"]["test_results"]["nccl_communication"] for k, s in report["nodes"].items()}
    assert results == {"node_0": True, "node_1": True, "node_2": False}
    assert report["cluster_summary"]["test_results"]["nccl_communication"] is False
    local = {k: s["summary"]["performance_summary"]["intra_node_all_reduce_bandwidth_gbps"]
             for k, s in report["nodes"].items()}
    assert local["node_2"] < 100 < local["node_0"] == local["node_1"]
    assert report["cluster_info"]["expected_total_gpus"] == 6


def test_dcgm_levels_are_judged_on_clusters_that_keep_passes_on_the_node() -> None:
    """Above report.detail_max_nodes PASS findings stay on the node, but a DCGM PASS says its level."""
    def node(host: str, levels: tuple[int, ...]) -> NodeReport:
        findings = [Finding("dcgm.diag", Status.PASS, host, "ok", "all tests passed", details={"level": level})
                    for level in levels]
        return NodeReport(host, "2025-12-03T17:54:41+00:00", [CheckResult("dcgm.diag", "DCGM", findings, 0.1)])

    entries = [node_entry(node(f"h{i}", (1, 2)), f"node_{i}", detail=False) for i in range(3)]
    report = assemble_report(entries, fail_on="fail", assess=False)
    results = report["cluster_summary"]["test_results"]
    assert (results["dcgm_basic"], results["dcgm_extended"], results["dcgm_diagnostics"]) == (True, True, True)
    quick = [node_entry(node("h0", (1,)), "node_0", detail=False)]
    results = assemble_report(quick, fail_on="fail", assess=False)["cluster_summary"]["test_results"]
    assert (results["dcgm_basic"], results["dcgm_extended"]) == (True, False)  # level 2 not run: not tested
    assert "not tested" in assemble_report(quick, fail_on="fail", assess=False)["cluster_summary"][
        "test_results_notes"]["dcgm_extended"]
