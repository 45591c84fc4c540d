"""gpu-preflight: is this GPU cluster fit for distributed training, and if not, why?

Library use::

    from gpu_preflight import run_checks, build_report
    node = run_checks(replay="node.json", include=["gpu.*"])
    print(node.status, node.exit_code)
    report = build_report([node])   # the canonical JSON report dict
    node, judged = check_node(RunOptions(replay="node.json"))   # and the config that judged it

The names below are imported on first use, so ``import gpu_preflight`` (and the CLI's
start-up) does not pay for the engine, reporters or their dependencies. The PyTorch elastic
health-check names (``GPUHealthCheck``, ``create_gpu_health_check``,
``quick_gpu_health_check``, ``GPUHealthCheckServer``, ``create_gpu_healthcheck_server``,
``PynvmlMixin``, ``is_gb200_platform``, ``get_gb200_static_mapping``, ``check_pynvml_availability``)
are here too, so moving from ``torch.distributed.elastic`` is a one-line import change
(docs/monitoring.md#migrating-from-torchdistributedelastic).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ._version import __version__

_EXPORTS = {
    "run_checks": "engine", "check_node": "engine", "RunOptions": "engine", "RunSettings": "engine",
    "NA": "model", "CheckResult": "model", "Finding": "model", "NodeReport": "model", "Status": "model",
    "build_report": "report.build",
    "GPUHealthCheck": "health", "create_gpu_health_check": "health", "quick_gpu_health_check": "health",
    "is_gb200_platform": "health", "get_gb200_static_mapping": "health", "check_pynvml_availability": "health",
    "PynvmlMixin": "health",
    "GPUHealthCheckServer": "server", "create_gpu_healthcheck_server": "server",
}

if TYPE_CHECKING:
    from .engine import RunOptions, RunSettings, check_node, run_checks
    from .health import (
        GPUHealthCheck,
        PynvmlMixin,
        check_pynvml_availability,
        create_gpu_health_check,
        get_gb200_static_mapping,
        is_gb200_platform,
        quick_gpu_health_check,
    )
    from .model import NA, CheckResult, Finding, NodeReport, Status
    from .report.build import build_report
    from .server import GPUHealthCheckServer, create_gpu_healthcheck_server

__all__ = ["NA", "CheckResult", "Finding", "GPUHealthCheck", "GPUHealthCheckServer", "NodeReport", "PynvmlMixin",
           "RunOptions", "RunSettings", "Status", "__version__", "build_report", "check_node",
           "check_pynvml_availability", "create_gpu_health_check", "create_gpu_healthcheck_server",
           "get_gb200_static_mapping", "is_gb200_platform", "quick_gpu_health_check", "run_checks"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
