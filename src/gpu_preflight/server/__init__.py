"""The health-check HTTP server and its monitor loop (``gpu-preflight serve``)."""

from __future__ import annotations

from .healthcheck_server import GPUHealthCheckServer, create_gpu_healthcheck_server

__all__ = ["GPUHealthCheckServer", "create_gpu_healthcheck_server"]
