"""``gpu_preflight.run`` without the command line: a typed request in, the report and exit code out.

The node runs replay the real H200 capture (eight GPUs), so they judge real readings on any
machine; no argparse is involved anywhere here except where a test checks that the CLI
builds the same request.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gpu_preflight.cli.main import build_parser
from gpu_preflight.cli.run_cmd import run_request
from gpu_preflight.outputs.options import OutputOptions
from gpu_preflight.report.model import ClusterReport
from gpu_preflight.run import LocaliseOptions, RunRequest, RunSettings, RunUsageError, run, worker_argv

from .conftest import H200_DUMP


def replayed(**settings: object) -> RunSettings:
    return RunSettings(replay=str(H200_DUMP), include=("gpu.*",), **settings)  # type: ignore[arg-type]


def test_a_library_run_returns_the_report_and_exit_code_and_writes_it(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = OutputOptions(report_dir=str(tmp_path), report_name="acceptance.json", history=False)
    result = run(RunRequest(replayed(), out))
    assert result.report is not None
    assert isinstance(result.report, ClusterReport)
    assert result.exit_code == result.report.cluster_summary.exit_code
    saved = json.loads((tmp_path / "acceptance.json").read_text())
    assert saved == result.report.to_dict()  # the report as written: artifact paths and all
    assert not (tmp_path / "report.json").exists()  # the name asked for, not the default beside it
    captured = capsys.readouterr()
    assert captured.out == ""  # no show callback: a library run prints no verdict
    assert f"report written to {tmp_path / 'acceptance.json'}" in captured.err


def test_the_expected_gpu_count_is_a_field_that_reaches_the_checks_and_the_report() -> None:
    quiet = OutputOptions(history=False)
    eight = run(RunRequest(replayed(expect_gpus=8), quiet))
    nine = run(RunRequest(replayed(expect_gpus=9), quiet))
    assert eight.report is not None and nine.report is not None
    assert eight.report.cluster_info.expected_total_gpus == 8
    assert nine.report.cluster_info.expected_total_gpus == 9
    count = [f for f in nine.report.findings if f.check_id == "gpu.inventory.count"]
    assert [f.code for f in count] == ["gpus_missing"] and nine.exit_code == 2
    unset = run(RunRequest(replayed(), quiet))
    assert unset.report is not None and unset.report.cluster_info.expected_total_gpus is None


def test_the_show_callback_gets_the_final_report_and_the_output_options(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []
    out = OutputOptions(format="json", history=False)
    result = run(RunRequest(replayed(), out), show=lambda report, o: seen.append((report.fail_on, o.format)))
    assert seen == [("fail", "json")] and result.report is not None
    assert result.report.run.extra["wall_s"] > 0  # scored after the run, with its whole wall time
    assert result.report.cluster_summary.health_scores is not None


def test_a_pattern_that_matches_no_check_cannot_start_a_run() -> None:
    with pytest.raises(RunUsageError, match=r"gpu\.nothing"):
        run(RunRequest(replayed(exclude=("gpu.nothing-like-this",))))


def test_a_report_directory_that_cannot_be_written_still_returns_the_verdict_with_exit_3(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory\n")
    result = run(RunRequest(replayed(), OutputOptions(report_dir=str(blocker / "out"), history=False)))
    assert result.exit_code == 3 and result.report is not None


@pytest.mark.parametrize("bad", [
    {"suite": "long"}, {"fail_on": "error"}, {"expect_gpus": 300}, {"timeout_s": float("nan")}, {"timeout_s": 0.0},
])
def test_settings_refuse_values_the_cli_would_refuse(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        RunSettings(**bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["", ".", "..", "a/b.json", "/tmp/x.json", "report.html", "artifacts", "x\0y"])
def test_a_report_name_must_be_a_bare_file_name(name: str) -> None:
    with pytest.raises(ValueError):
        OutputOptions(report_name=name)


def test_localise_options_are_checked() -> None:
    with pytest.raises(ValueError):
        LocaliseOptions(mode="pairs")
    with pytest.raises(ValueError):
        LocaliseOptions(exclude_style="csv")


def test_workers_are_started_with_the_request_they_were_given() -> None:
    """Self-launched workers re-read their flags: what they parse is the supervisor's request."""
    argv = ["run", "--full", "--check", "gpu.*", "--skip", "gpu.ecc.*", "--profile", "h100", "--set",
            "gpu.temp_margin_c=8", "--expect-gpus", "4", "--timeout-s", "12.5", "--fail-on", "warn",
            "--report-dir", "/tmp/r", "--no-history", "--history-db", "/tmp/h.sqlite", "--cluster-name", "c1",
            "--steps", "5", "--epochs", "2", "--format", "json", "--verbose"]
    request = run_request(build_parser("run").parse_args(argv))
    worker = run_request(build_parser("run").parse_args(worker_argv(request)))
    assert worker.run == request.run
    kept = ("report_dir", "history", "history_db", "cluster_name")
    assert {k: getattr(worker.output, k) for k in kept} == {k: getattr(request.output, k) for k in kept}
    assert "--format" not in worker_argv(request)  # workers report to the supervisor, they print nothing
    plain = run_request(build_parser("run").parse_args(["run"]))
    assert run_request(build_parser("run").parse_args(worker_argv(plain))).run == dataclasses.replace(plain.run)
