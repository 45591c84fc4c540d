"""Shared fixtures: where the third-party corpus and our own captured data live."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
H200_DUMP = FIXTURES / "captured" / "h200-580.159.04" / "nvml_capture.json"


def corpus_root() -> Path:
    """The shared corpus: ``$GPU_PREFLIGHT_CORPUS`` or ``../shared/corpus`` beside the repo."""
    return Path(os.environ.get("GPU_PREFLIGHT_CORPUS", REPO.parent / "shared" / "corpus"))


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The corpus directory; its absence is a test failure, never a skip (CI must run these)."""
    root = corpus_root()
    if not (root / "MANIFEST.md").is_file():
        pytest.fail(f"corpus not found at {root}: set GPU_PREFLIGHT_CORPUS")
    return root


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


def pytest_configure(config: pytest.Config) -> None:
    """Runs during tests keep their history in a scratch directory, never in the user's."""
    os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="gpu-preflight-test-xdg-")
    os.environ.pop("GPU_PREFLIGHT_HISTORY", None)
