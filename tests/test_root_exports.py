"""The PyTorch elastic health-check names import from the package root (a one-line migration),
are the same objects as in gpu_preflight.health / .server, and cost nothing until used."""

from __future__ import annotations

import subprocess
import sys

import gpu_preflight
from gpu_preflight import health, server

SEED_NAMES = {"GPUHealthCheck": health, "create_gpu_health_check": health, "quick_gpu_health_check": health,
              "is_gb200_platform": health, "get_gb200_static_mapping": health, "check_pynvml_availability": health,
              "PynvmlMixin": health, "GPUHealthCheckServer": server, "create_gpu_healthcheck_server": server}


def test_the_seed_names_come_from_the_package_root() -> None:
    for name, module in SEED_NAMES.items():
        assert getattr(gpu_preflight, name) is getattr(module, name), name
        assert name in gpu_preflight.__all__


def test_importing_the_package_imports_none_of_them() -> None:
    code = ("import sys, gpu_preflight; "
            "print(sorted(m for m in sys.modules if m.startswith(('gpu_preflight.health', 'gpu_preflight.server'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
