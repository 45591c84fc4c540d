"""``gpu_preflight.run`` without the command line: a typed request in, the report and exit code out.

The node runs replay the real H200 capture (eight GPUs), so they judge real readings on any
machine; no argparse is involved anywhere here except where a test checks that the CLI
builds the same request.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.cli.main import build_parser
from gpu_preflight.cli.run_cmd import run_request
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.outputs.options import OutputOptions
from gpu_preflight.run import (
    REQUEST_ENV,
    LocaliseOptions,
    RunRequest,
    RunSettings,
    RunUsageError,
    request_from_env,
    run,
    worker_env,
)

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
    {"suite": "long"}, {"fail_on": "error"}, {"expect_gpus": 300}, {"expect_gpus": -1}, {"expect_gpus": True},
    {"expect_gpus": 2.0}, {"probe_timeout_s": float("nan")}, {"collective_timeout_s": 0.0},
    {"run_budget_s": float("inf")}, {"probe_timeout_s": 86_401.0},
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
    """Self-launched workers get the supervisor's request typed, through their environment:
    what they run is what the command line asked for, nothing turned back into flags."""
    argv = ["run", "--full", "--check", "gpu.*", "--skip", "gpu.ecc.*", "--profile", "h100", "--set",
            "gpu.temp_margin_c=8", "--expect-gpus", "4", "--timeout-s", "12.5", "--fail-on", "warn",
            "--report-dir", "/tmp/r", "--no-history", "--history-db", "/tmp/h.sqlite", "--cluster-name", "c1",
            "--steps", "5", "--epochs", "2", "--format", "json", "--verbose"]
    request = run_request(build_parser("run").parse_args(argv))
    limits = (request.run.probe_timeout_s, request.run.collective_timeout_s, request.run.run_budget_s)
    assert limits == (12.5, 12.5, None)
    env = {**worker_env(request), "GPU_PREFLIGHT_LAUNCHER": "self"}
    worker = request_from_env(env)
    assert worker is not None and worker.run == request.run
    kept = ("report_dir", "history", "history_db", "cluster_name")
    assert {k: getattr(worker.output, k) for k in kept} == {k: getattr(request.output, k) for k in kept}
    assert worker.output == OutputOptions(**{k: getattr(request.output, k) for k in kept})  # workers print nothing
    assert request_from_env(worker_env(request)) is None  # only a worker our supervisor started reads it
    plain = run_request(build_parser("run").parse_args(["run"]))
    expected = RunRequest(plain.run, OutputOptions(history=plain.output.history, report_dir=plain.output.report_dir))
    assert request_from_env({**worker_env(plain), "GPU_PREFLIGHT_LAUNCHER": "self"}) == expected


@pytest.mark.parametrize("text", ["{", "[]", '{"run": {"suite": "long"}, "output": {}}',
                                  '{"run": {"nope": 1}, "output": {}}', '{"run": {}}'])
def test_a_worker_request_that_is_not_one_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError, match=REQUEST_ENV):
        request_from_env({REQUEST_ENV: text, "GPU_PREFLIGHT_LAUNCHER": "self"})


@pytest.mark.parametrize(("profile", "builds", "finds"), [("auto", 2, 0), ("h200", 1, 1)])
def test_a_node_run_builds_its_config_once_per_profile_and_scores_with_the_one_that_judged(
        monkeypatch: pytest.MonkeyPatch, profile: str, builds: int, finds: int) -> None:
    """Auto: once before the GPU probe (no profile known), once with the matched profile; an
    explicit profile: once, looked up once. The report is built with that same config."""
    import gpu_preflight.config as config_pkg
    import gpu_preflight.engine as engine
    import gpu_preflight.report.build as report_build

    calls = {"build": 0, "find": 0}
    real_build, real_find, real_report = config_pkg.build_config, engine.find_profile, report_build.build

    def counted_build(**kw: Any) -> Any:
        calls["build"] += 1
        return real_build(**kw)

    def counted_find(name: str) -> Any:
        calls["find"] += 1
        return real_find(name)

    seen: list[tuple[str | None, Any]] = []

    def spy_build(nodes: Any, **kw: Any) -> Any:
        seen.append((nodes[0].profile, kw.get("expected_total_gpus")))
        return real_report(nodes, **kw)

    monkeypatch.setattr(engine, "build_config", counted_build)
    monkeypatch.setattr(engine, "find_profile", counted_find)
    monkeypatch.setattr(report_build, "build", spy_build)
    result = run(RunRequest(replayed(profile=profile, expect_gpus=8), OutputOptions(history=False)))
    assert (calls["build"], calls["find"]) == (builds, finds)
    assert result.report is not None and seen == [("h200", 8)]


def test_the_engine_returns_the_config_it_judged_with() -> None:
    from gpu_preflight.engine import RunOptions, check_node

    report, judged = check_node(RunOptions(replay=str(H200_DUMP), include=("gpu.*",), expect_gpus=3))
    assert report.profile == "h200" and judged.profile is not None and judged.profile.name == "h200"
    assert judged.config.gpu.expected_count == 3 and report.config_sources == judged.sources
    assert judged.sources[-1] == "command line" and any(s.startswith("profile h200") for s in judged.sources)
