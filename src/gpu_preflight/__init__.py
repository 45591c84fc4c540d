"""gpu-preflight: is this GPU cluster fit for distributed training, and if not, why?

Library use::

    from gpu_preflight import run_checks, build_report
    node = run_checks(replay="node.json", include=["gpu.*"])
    print(node.status, node.exit_code)
    report = build_report([node])   # the canonical JSON report dict
"""

from __future__ import annotations

__version__ = "0.1.0"

from .engine import RunOptions, run_checks  # noqa: E402
from .model import NA, CheckResult, Finding, NodeReport, Status  # noqa: E402
from .report.canonical import build_report  # noqa: E402

__all__ = ["NA", "CheckResult", "Finding", "NodeReport", "RunOptions", "Status", "__version__",
           "build_report", "run_checks"]
