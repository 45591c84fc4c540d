"""The engine fails closed: crashes, hangs, silence and failed probes become ERROR."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_preflight import Status, registry, run_checks
from gpu_preflight.model import Finding
from gpu_preflight.registry import CheckContext, ProbeContext, check, probe

from .conftest import H200_DUMP

RELEASE = threading.Event()


@pytest.fixture
def temp_checks() -> Iterator[None]:
    with registry.CHECKS.scoped(), registry.PROBES.scoped():
        yield from _temp_checks()


def _temp_checks() -> Iterator[None]:
    @probe("boom")
    def boom_probe(ctx: ProbeContext) -> None:
        raise OSError("sensor on fire")

    @probe("slow")
    def slow_probe(ctx: ProbeContext) -> None:
        RELEASE.wait(30)

    @check("test.crash", needs=())
    def crash(ctx: CheckContext) -> list[Finding]:
        """Crashes."""
        raise ZeroDivisionError("oops")

    @check("test.hang", needs=())
    def hang(ctx: CheckContext) -> list[Finding]:
        """Hangs."""
        RELEASE.wait(30)
        return []

    @check("test.silent", needs=())
    def silent(ctx: CheckContext) -> list[Finding]:
        """Says nothing."""
        return []

    @check("test.needs_boom", needs=("boom",))
    def needs_boom(ctx: CheckContext) -> list[Finding]:
        """Needs a probe that fails."""
        return [Finding("test.needs_boom", Status.PASS, ctx.host, "ok", "fine")]

    @check("test.needs_slow", needs=("slow",))
    def needs_slow(ctx: CheckContext) -> list[Finding]:
        """Needs a probe that hangs."""
        return [Finding("test.needs_slow", Status.PASS, ctx.host, "ok", "fine")]

    RELEASE.clear()
    yield
    RELEASE.set()


def only(node: object, check_id: str) -> Finding:
    findings = [f for f in node.findings if f.check_id == check_id]  # type: ignore[attr-defined]
    assert len(findings) == 1, findings
    return findings[0]


def test_crashing_check_is_error_not_pass(temp_checks: None) -> None:
    node = run_checks(include=["test.crash"], environ={})
    f = only(node, "test.crash")
    assert f.status is Status.ERROR and f.code == "check_crashed" and "ZeroDivisionError" in f.summary
    assert node.exit_code == 3


def test_hanging_check_times_out_as_error(temp_checks: None) -> None:
    t0 = time.monotonic()
    node = run_checks(include=["test.hang"], timeout_s=0.5, environ={})
    assert time.monotonic() - t0 < 5
    f = only(node, "test.hang")
    assert f.status is Status.ERROR and f.code == "check_timeout"


def test_silent_check_is_error(temp_checks: None) -> None:
    assert only(run_checks(include=["test.silent"], environ={}), "test.silent").code == "no_result"


def test_failed_probe_makes_dependent_checks_error(temp_checks: None) -> None:
    f = only(run_checks(include=["test.needs_boom"], environ={}), "test.needs_boom")
    assert f.status is Status.ERROR and f.code == "probe_failed" and "sensor on fire" in f.summary


def test_hung_probe_is_error_and_run_finishes(temp_checks: None) -> None:
    t0 = time.monotonic()
    node = run_checks(include=["test.needs_slow", "test.silent"], timeout_s=0.5, environ={})
    assert time.monotonic() - t0 < 5
    f = only(node, "test.needs_slow")
    assert f.status is Status.ERROR and "did not finish within 0.5 s" in f.summary


def test_fail_outranks_error_and_exit_codes() -> None:
    assert Status.worst([Status.PASS, Status.ERROR, Status.FAIL]) is Status.FAIL
    assert Status.worst([Status.PASS, Status.SKIP]) is Status.SKIP
    assert Status.worst([]) is Status.PASS
    assert [s.exit_code for s in (Status.PASS, Status.SKIP, Status.WARN, Status.FAIL, Status.ERROR)] == [0, 0, 1, 2, 3]


def test_fail_on_warn_gates_warnings(tmp_path: Path) -> None:
    node = run_checks(replay=str(H200_DUMP), include=["gpu.*"], overrides=["gpu.pcie_expected_width=32"],
                      environ={})
    assert node.status is Status.WARN and node.exit_code == 1
    node = run_checks(replay=str(H200_DUMP), include=["gpu.*"], overrides=["gpu.pcie_expected_width=32"],
                      fail_on="warn", environ={})
    assert node.exit_code == 2


def test_unknown_check_pattern_is_rejected() -> None:
    with pytest.raises(KeyError, match=r"no check matches 'gpu\.eccc'"):
        run_checks(include=["gpu.eccc"], environ={})


def test_skip_pattern_and_suite_selection() -> None:
    node = run_checks(replay=str(H200_DUMP), include=["gpu.*"], exclude=["gpu.inventory.*", "gpu.nvml"], environ={})
    ids = {r.check_id for r in node.results}
    assert "gpu.ecc.errors" in ids and not any(i.startswith("gpu.inventory") for i in ids) and "gpu.nvml" not in ids


def test_auto_profile_from_gpu_name() -> None:
    node = run_checks(replay=str(H200_DUMP), include=["gpu.pcie"], environ={})
    assert node.profile == "h200"
    assert any("profile h200" in s for s in node.config_sources)
    explicit = run_checks(replay=str(H200_DUMP), include=["gpu.pcie"], profile="b200", environ={})
    assert explicit.profile == "b200"


def test_no_torch_imported_on_node_path() -> None:
    import subprocess
    import sys

    code = (f"import sys, gpu_preflight.cli.main as m; m.main(['run', '--replay', {str(H200_DUMP)!r}, "
            "'--format', 'json']); print('TORCH' if 'torch' in sys.modules else 'CLEAN', file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stderr.strip().endswith("CLEAN"), out.stderr


def test_checks_after_a_hung_one_still_run(temp_checks: None) -> None:
    node = run_checks(include=["test.hang", "test.silent", "test.crash"], timeout_s=0.5, environ={})
    codes = {f.check_id: f.code for f in node.findings}
    assert codes == {"test.hang": "check_timeout", "test.silent": "no_result", "test.crash": "check_crashed"}
