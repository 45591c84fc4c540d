"""Tests that run torch (workloads, torchrun, the job's store) skip with one reason where the
torch extra is not installed: a checkout with only the test extra runs everything else green,
and the skip line says what to install."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

NO_TORCH = "needs the torch extra, not installed here (pip install -e '.[torch]')"
HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason=NO_TORCH)


def torch_or_skip(module: str = "torch") -> Any:
    """``module`` imported, or the test (or test module) skipped with :data:`NO_TORCH`."""
    return pytest.importorskip(module, reason=NO_TORCH)
