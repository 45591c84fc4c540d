"""DCGM run on the node: a fake ``dcgmi`` on PATH replays real outputs; levels, exclusions, failures to run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.model import Status
from gpu_preflight.probes.dcgm import dcgm_probe

from .conftest import REPO
from .diag_tools import check, config, hang, probe_ctx, replay, statuses
from .test_parsers_dcgmi import SPEC_WARNING
from .torch_extra import torch_or_skip

SPEC = REPO / "tests" / "fixtures" / "evidence" / "spec-dcgmi-diag-r3-targeted-power-fail.txt"
TORCHRUN_ENV = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "GROUP_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


@pytest.fixture
def bindir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "bin"
    path.mkdir()
    monkeypatch.setenv("PATH", f"{path}:{os.environ['PATH']}")
    return path


def run_cli(bindir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_")}
    env["PATH"] = f"{bindir}:{env['PATH']}"
    return subprocess.run([sys.executable, "-m", "gpu_preflight", *args], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=120)


def test_spec_failure_through_gpu_preflight_run_is_a_fail_naming_gpu_1(bindir: Path, tmp_path: Path) -> None:
    replay(bindir, "dcgmi", SPEC, rc=226)
    out = tmp_path / "report"
    proc = run_cli(bindir, "run", "--node-only", "--check", "dcgm.*", "--format", "json", "--report-dir", str(out))
    assert proc.returncode == 2, proc.stderr
    report = json.loads(proc.stdout)
    fails = [f for f in report["findings"] if f["status"] == "FAIL"]
    assert len(fails) == 1
    fail = fails[0]
    host = report["nodes"]["node_0"]["node_info"]["hostname"]
    assert (fail["check_id"], fail["subject"], fail["code"]) == ("dcgm.diag", f"{host}/gpu1", "targeted_power")
    assert "GPU 1" in fail["summary"] and SPEC_WARNING in fail["summary"]
    assert fail["details"]["level"] == 1 and fail["details"]["gpu"] == 1
    saved = out / "artifacts" / "node_0" / "dcgmi_diag_r1.txt"
    assert saved.read_text() == SPEC.read_text()  # the raw output, byte for byte
    assert {a["name"]: a["path"] for a in report["artifacts"]}["dcgm_diag_r1"] == "artifacts/node_0/dcgmi_diag_r1.txt"
    again = run_cli(bindir, "judge", str(saved), "--format", "json")  # the artifact judges the same way
    assert again.returncode == 2 and SPEC_WARNING in again.stdout


@pytest.mark.parametrize("suite", ["quick", "full"])
def test_report_keeps_each_level_with_its_raw_output_and_saved_path(bindir: Path, tmp_path: Path,
                                                                    suite: str) -> None:
    replay(bindir, "dcgmi", SPEC, rc=226, stderr="dcgmi: a word on stderr")
    out = tmp_path / "report"
    proc = run_cli(bindir, "run", "--node-only", f"--{suite}", "--check", "dcgm.*", "--format", "json",
                   "--report-dir", str(out))
    assert proc.returncode == 2, proc.stderr
    for report in (json.loads(proc.stdout), json.loads((out / "report.json").read_text())):
        levels = report["nodes"]["node_0"]["dcgm"]["diagnostics"]
        assert list(levels) == (["basic", "extended"] if suite == "full" else ["basic"])
        for key, level in levels.items():
            n = level["level"]
            assert level["raw_output_artifact"]["path"] == f"artifacts/node_0/dcgmi_diag_r{n}.txt", key
            assert (out / level["raw_output_artifact"]["path"]).read_text() == level["raw_output"] == SPEC.read_text()
            assert level["stdout"] == level["raw_output"] and level["stderr"] == "dcgmi: a word on stderr\n"
            assert level["exit_code_zero"] is False and level["success"] is True
            parsed = level["parsed_output"]
            assert parsed["overall_status"] == "Mixed" and parsed["gpu_device_ids"] == "2237,2237,2237,2237"
            assert parsed["test_results"]["deployment"]["Denylist"] == "Pass"
        results = report["cluster_summary"]["test_results"]
        assert (results["dcgm_basic"], results["dcgm_extended"], results["dcgm_diagnostics"]) == (
            (False, False, False))  # quick: level 2 not run, false (why: test_results_notes)
        assert report["nodes"]["node_0"]["summary"]["test_results"]["dcgm_basic"] is False


def test_raw_output_inline_stops_at_its_limit(bindir: Path, tmp_path: Path) -> None:
    replay(bindir, "dcgmi", SPEC, rc=226)
    proc = run_cli(bindir, "run", "--node-only", "--check", "dcgm.*", "--format", "json",
                   "--set", "diagnostics.dcgm_raw_output_inline_max_bytes=100")
    level = json.loads(proc.stdout)["nodes"]["node_0"]["dcgm"]["diagnostics"]["basic"]
    assert level["raw_output"] == SPEC.read_text()[:100] and level["raw_output_truncated"] is True
    assert level["raw_output_artifact"]["path"] is None  # no --report-dir: nothing was saved


@pytest.mark.parametrize(("suite", "settings", "expected"), [
    ("quick", {}, ["diag -r 1 -j"]),
    ("full", {}, ["diag -r 1 -j", "diag -r 2 -j"]),
    ("full", {"dcgm_level_full": 3}, ["diag -r 1 -j", "diag -r 3 -j"]),
    ("full", {"dcgm_full_runs_basic": False}, ["diag -r 2 -j"]),
    ("quick", {"dcgm_args": ["-i", "0,1", "-p", "pcie.gpu_nvlinks_expected_up=18"]},
     ["diag -r 1 -j -i 0,1 -p pcie.gpu_nvlinks_expected_up=18"]),
])
def test_level_follows_the_suite_and_r3_only_on_request(bindir: Path, tmp_path: Path, suite: str,
                                                         settings: dict[str, Any], expected: list[str]) -> None:
    log = tmp_path / "argv"
    replay(bindir, "dcgmi", SPEC, argv_log=log)
    facts = dcgm_probe(probe_ctx(config(**settings), suite=suite))
    assert log.read_text().splitlines() == expected
    assert [f.level for f in facts.levels()] == [int(e.split()[2]) for e in expected]
    assert all(f.record is not None for f in facts.levels())


def test_full_run_judges_both_levels_each_finding_naming_its_own(bindir: Path) -> None:
    replay(bindir, "dcgmi", SPEC, rc=226)
    findings = check("dcgm.diag", "dcgm", dcgm_probe(probe_ctx(suite="full")))
    fails = [f for f in findings if f.status is Status.FAIL]
    assert [(f.details["level"], f.code) for f in fails] == [(1, "targeted_power"), (2, "targeted_power")]
    assert fails[0].summary.startswith("level 1: ") and fails[1].summary.startswith("level 2: ")
    assert {f.details["artifact"] for f in fails} == {"dcgmi_diag_r1.txt", "dcgmi_diag_r2.txt"}


def test_extended_level_is_not_started_when_level_1_could_not_reach_dcgm(bindir: Path, tmp_path: Path) -> None:
    log = tmp_path / "argv"
    replay(bindir, "dcgmi", None, rc=255, stderr="Error: unable to establish a connection to the specified host",
           argv_log=log)
    facts = dcgm_probe(probe_ctx(suite="full"))
    assert log.read_text().splitlines() == ["diag -r 1 -j"]  # r2 would only wait out its ten minutes
    findings = check("dcgm.diag", "dcgm", facts)
    assert [(f.status, f.code, f.details["level"]) for f in findings] == [
        (Status.ERROR, "diag_error", 1), (Status.SKIP, "not_run", 2)]
    assert "level 2 not started" in findings[1].summary and "could not run the diagnostic" in findings[1].summary


@pytest.mark.parametrize(("name", "rc", "expected"), [
    ("dcgm/awsome-dcgmi-diag-r2-3.3.3-p4de-a100-pass.txt", 0, {("PASS", "n1", "ok")}),
    # cut by its publisher before the closing border: what passed is shown, the verdict is "incomplete"
    ("dcgm/deepops-dcgmi-diag-r1-legacy-blacklist-pass.txt", 0, {("ERROR", "n1", "incomplete")}),
    ("dcgm/dcgm-issue254-dcgmi-diag-r2-4.4.1-v100-pcie-fail-excerpt.txt", 226, {("FAIL", "n1", "pcie")}),
    ("dcgm/stas00-dcgmi-diag-deployment-row-remap-error-excerpt.txt", 226, {("FAIL", "n1/gpu3", "error")}),
    ("dcgm/hcdeep-dcgmi-diag-r3-4.4.0-plugin-load-error.txt", 226, {("ERROR", "n1", "diag_error")}),
])
def test_corpus_outputs_replayed_by_dcgmi(bindir: Path, corpus: Path, name: str, rc: int,
                                          expected: set[tuple[str, str, str]]) -> None:
    replay(bindir, "dcgmi", corpus / name, rc=rc)
    findings = check("dcgm.diag", "dcgm", dcgm_probe(probe_ctx()))
    worst = Status.worst(f.status for f in findings)
    assert {s for s in statuses(findings) if s[0] == worst.value} == expected, statuses(findings)


def test_excluded_test_failure_is_a_skip(bindir: Path) -> None:
    replay(bindir, "dcgmi", SPEC, rc=226)
    cfg = config(evidence={"dcgm_ignore_tests": ["targeted power"]})
    findings = check("dcgm.diag", "dcgm", dcgm_probe(probe_ctx(cfg)), cfg)
    assert Status.FAIL not in {f.status for f in findings}
    assert ("SKIP", "n1", "targeted_power") in statuses(findings)


def test_absent_dcgmi_is_a_skip_with_the_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    findings = check("dcgm.diag", "dcgm", dcgm_probe(probe_ctx()))
    assert statuses(findings) == [("SKIP", "n1", "not_run")]
    assert "dcgmi not found (looked in PATH)" in findings[0].summary


@pytest.mark.parametrize(("options", "settings", "reason"), [
    ({"replay": "snap.json"}, {}, "replayed snapshot"),
    ({}, {"dcgm_enabled": False}, "disabled (diagnostics.dcgm_enabled = false)"),
])
def test_not_run_on_replay_or_when_disabled(bindir: Path, tmp_path: Path, options: dict[str, Any],
                                            settings: dict[str, Any], reason: str) -> None:
    log = tmp_path / "argv"
    replay(bindir, "dcgmi", SPEC, argv_log=log)
    findings = check("dcgm.diag", "dcgm", dcgm_probe(probe_ctx(config(**settings), **options)))
    assert statuses(findings) == [("SKIP", "n1", "not_run")] and reason in findings[0].summary
    assert not log.exists()


def test_stress_levels_wait_for_the_gpus_of_a_launched_job(bindir: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "argv"
    replay(bindir, "dcgmi", SPEC, argv_log=log)
    for key, value in TORCHRUN_ENV.items():
        monkeypatch.setenv(key, value)
    full = check("dcgm.diag", "dcgm", dcgm_probe(probe_ctx(suite="full")))
    assert {f.details["level"] for f in full[:-1]} == {1}  # the SPEC output, judged at level 1
    assert (full[-1].status, full[-1].code, full[-1].details["level"]) == (Status.SKIP, "not_run", 2)
    assert "torchrun job" in full[-1].summary
    assert log.read_text().splitlines() == ["diag -r 1 -j"]  # level 1 only reads the deployment: it still runs


def test_hung_dcgmi_is_an_error_naming_the_tool_and_the_limit(bindir: Path) -> None:
    hang(bindir, "dcgmi")
    findings = check("dcgm.diag", "dcgm", dcgm_probe(probe_ctx(timeout_s=3.0)))
    assert statuses(findings) == [("ERROR", "n1", "tool_timeout")]
    text = findings[0].summary
    assert "dcgmi diag -r 1 -j` did not finish within 2 s" in text and "raise --timeout-s" in text


def test_dcgmi_failing_without_output_is_an_error(bindir: Path) -> None:
    replay(bindir, "dcgmi", None, rc=255, stderr="Error: unable to establish a connection to the specified host")
    findings = check("dcgm.diag", "dcgm", dcgm_probe(probe_ctx()))
    assert [(f.status, f.code) for f in findings] == [(Status.ERROR, "diag_error")]
    assert "unable to establish a connection" in findings[0].summary


def test_dcgmi_printing_garbage_is_an_error(bindir: Path, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("Segmentation fault (core dumped)\n")
    replay(bindir, "dcgmi", garbage, rc=139)
    findings = check("dcgm.diag", "dcgm", dcgm_probe(probe_ctx()))
    assert statuses(findings) == [("ERROR", "n1", "unreadable_output")]
    assert "exit status 139" in findings[0].summary


def test_in_a_sagemaker_job_without_report_dir_every_artifact_is_kept_with_its_path(bindir: Path,
                                                                                     tmp_path: Path) -> None:
    """Issue 29 item 7: the report and every raw output land in the uploaded output directory, paths filled."""
    replay(bindir, "dcgmi", SPEC, rc=226)
    data = tmp_path / "opt" / "ml" / "output" / "data"
    data.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPU_PREFLIGHT_", "SM_"))}
    env.update(PATH=f"{bindir}:{env['PATH']}", SM_OUTPUT_DATA_DIR=str(data), SM_CURRENT_HOST="algo-1")
    torch_or_skip()
    # with workers (the path that lost the raw outputs): the node checks run in the node leader
    proc = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--no-history", "--skip", "system.*",
                           ], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=300)
    assert proc.returncode == 2, proc.stderr
    metrics = data / "metrics"
    report = json.loads((metrics / "health_check_metrics.json").read_text())
    levels = report["nodes"]["node_0"]["dcgm"]["diagnostics"]
    assert "basic" in levels
    for level in levels.values():
        path = level["raw_output_artifact"]["path"]
        assert path and (metrics / path).read_text() == SPEC.read_text()
    assert report["artifacts"] and all((metrics / a["path"]).is_file() for a in report["artifacts"])
