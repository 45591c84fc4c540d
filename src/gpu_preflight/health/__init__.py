"""Continuous GPU health: the elastic-training health-check API.

``GPUHealthCheck`` (synchronous ``__call__``; ``async_check()`` starts background monitoring and
returns None, ``monitor()`` is its awaitable form), ``quick_gpu_health_check``,
``create_gpu_health_check`` and the NVML helpers. Fail-closed: a GPU that could not be
looked at is ``unknown``, never healthy (see :mod:`.gpu_health`).
"""

from __future__ import annotations

from ..findings.health import GpuHealth, HealthState, HealthStatus
from .gpu_health import GPUHealthCheck, create_gpu_health_check, quick_gpu_health_check
from .nvml_helper import (
    GB200_NIC_LAYOUTS,
    PynvmlMixin,
    check_pynvml_availability,
    get_gb200_static_mapping,
    is_gb200_platform,
)

__all__ = [
    "GB200_NIC_LAYOUTS", "GPUHealthCheck", "GpuHealth", "HealthState", "HealthStatus", "PynvmlMixin",
    "check_pynvml_availability", "create_gpu_health_check", "get_gb200_static_mapping", "is_gb200_platform",
    "quick_gpu_health_check",
]
