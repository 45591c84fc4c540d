"""Shared fixtures: where the third-party corpus and our own captured data live."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# Property tests judge what the code does, never how fast this machine draws examples: a loaded
# 2-core CI runner made Hypothesis's "input generation is slow" health check fail a console test.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
H200_DUMP = FIXTURES / "captured" / "h200-580.159.04" / "nvml_capture.json"


def corpus_root() -> Path:
    """The shared corpus: ``$GPU_PREFLIGHT_CORPUS`` or ``../shared/corpus`` beside the repo."""
    return Path(os.environ.get("GPU_PREFLIGHT_CORPUS", REPO.parent / "shared" / "corpus"))


def corpus_present() -> bool:
    return (corpus_root() / "MANIFEST.md").is_file()


def corpus_required() -> bool:
    """Under CI the real-world corpus layer must run: its absence is a failure, not a skip."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


CORPUS_NOTICE = ("corpus not found at {root}: {n} test(s) that read third-party real outputs were skipped "
                 "(the project's own fixtures still cover every parser); set GPU_PREFLIGHT_CORPUS=/path/to/corpus "
                 "to run them")
CORPUS_SKIP = "no corpus (see the 'corpus not found' line above)"


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The corpus directory. Absent: a skip, counted for the one-line notice at the end, on a
    user's clone (never reached under CI, where :func:`pytest_configure` stops the session first)."""
    if not corpus_present():
        pytest.skip(CORPUS_SKIP)
    return corpus_root()


@pytest.fixture(scope="session")
def stub_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stub libnvidia-ml.so.1 (tests/nvml_stub), compiled with gcc once per session."""
    from .nvml_stub.stub import build_stub

    return build_stub(tmp_path_factory.mktemp("fake_nvml"))


@pytest.fixture
def h200_dump() -> dict[str, Any]:
    """A fresh copy of the real H200 NVML dump, safe to edit for fault injection."""
    return json.loads(H200_DUMP.read_text())


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-gpu", action="store_true", default=False,
                     help="run tests that need a real NVIDIA GPU (they fail, not skip, without one)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Hardware tests are opt-in: deselected unless --run-gpu, and then they must find a GPU."""
    if config.getoption("--run-gpu"):
        return
    selected = [i for i in items if "gpu" not in i.keywords]
    deselected = [i for i in items if "gpu" in i.keywords]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected


def pytest_report_header(config: pytest.Config) -> str:
    return f"corpus: {corpus_root()}" if corpus_present() else f"corpus: none at {corpus_root()}"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The one line a user without the corpus needs: what was left out and how to include it."""
    skipped = [r for r in terminalreporter.stats.get("skipped", [])
               if isinstance(r.longrepr, tuple) and CORPUS_SKIP in str(r.longrepr[2])]
    if skipped:
        terminalreporter.write_line(CORPUS_NOTICE.format(root=corpus_root(), n=len(skipped)))


def pytest_configure(config: pytest.Config) -> None:
    """Runs during tests keep their history in a scratch directory, never in the user's.

    Under CI (``CI=true``) a missing corpus stops the session here, in its first second,
    rather than as hundreds of failures at the end of a long run.
    """
    if corpus_required() and not corpus_present():
        pytest.exit(f"CI=true but corpus not found at {corpus_root()}: set GPU_PREFLIGHT_CORPUS", returncode=1)
    os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="gpu-preflight-test-xdg-")
    os.environ.pop("GPU_PREFLIGHT_HISTORY", None)


@pytest.fixture(autouse=True)
def _reports_match_schema(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every report.json a test writes under its tmp_path is valid against the shipped schema."""
    root = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if root is None:
        return
    from .report_schema_check import check_reports_under

    bad = check_reports_under(root)
    assert not bad, "report.json does not match gpu_preflight/data/report.schema.json:\n" + "\n".join(bad)
