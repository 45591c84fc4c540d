"""The ``system`` fact: host memory, disks, CPU, limits, NUMA and running services."""

from __future__ import annotations

from ..backends.system import read_system
from ..records import SystemFacts
from ..registry import ProbeContext, probe


@probe("system")
def system_probe(ctx: ProbeContext) -> SystemFacts:
    """Read host resources; disk paths come from the config plus the report directory."""
    paths = list(ctx.config.system.disk_paths)
    report_dir = ctx.options.get("report_dir")
    if report_dir:
        paths.append(str(report_dir))
    return read_system(paths)
