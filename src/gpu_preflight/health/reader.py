"""NVML reads for the health API and the monitor loop: the node checks, bounded.

Every read goes through :func:`~gpu_preflight.engine.run_checks` (probe → records →
checks), so the health API, the health server and ``gpu-preflight run`` judge the same
facts with the same code. What a long-running caller needs on top lives here:

* a process-wide re-entrant lock, so one NVML reader runs at a time;
* a deadline on every read, so a hung NVML call never blocks a caller;
* accounting of reads that left a thread blocked in the driver. After
  ``max_blocked_reads`` of them in a row, live reads are suspended: a GPU that hangs
  NVML needs a reset, which needs this process to let go of it anyway, and a monitor
  must not leak one blocked thread per interval for days.
"""

from __future__ import annotations

import threading

from ..deadline import OneAtATime, Stuck, Timeout
from ..engine import RunOptions, run_checks
from ..model import NodeReport

NVML_LOCK = threading.RLock()
MAX_BLOCKED_READS = 3
DEADLINE_MARGIN_S = 2.0


class NvmlSuspended(Timeout):
    """Live reads stopped because earlier ones left calls blocked in the driver."""


def deadline_for(timeout_s: float) -> float:
    """Outer deadline of a run whose probes are bounded by ``timeout_s`` (checks are pure)."""
    return timeout_s + DEADLINE_MARGIN_S


def left_blocked(report: NodeReport) -> bool:
    """Whether a live run left an NVML call blocked: a hung GPU or a timed-out gpu probe."""
    dump = report.raw_artifacts.get("nvml_dump")
    if dump is not None and '"timed_out"' in dump[1]:
        return True
    return "gpu" not in report.facts and any(
        f.code == "probe_failed" and f.check_id.startswith("gpu.") for f in report.findings)


class NvmlReader:
    """Runs node checks that read NVML, one at a time, each within a deadline."""

    def __init__(self, name: str = "nvml-read", max_blocked_reads: int = MAX_BLOCKED_READS) -> None:
        self._call = OneAtATime(name)
        self.max_blocked_reads = max_blocked_reads
        self.blocked_reads = 0

    def run(self, options: RunOptions) -> NodeReport:
        """Run the checks of ``options``; raise :class:`Timeout` (or a subclass) if they hang.

        A replayed run never touches NVML, so it never counts as blocked.
        """
        live = options.replay is None
        deadline = deadline_for(options.probe_limit_s)
        if not NVML_LOCK.acquire(timeout=deadline):
            raise Timeout(f"NVML busy: another reader held it for more than {deadline:g} s")
        try:
            if live and self.blocked_reads >= self.max_blocked_reads:
                raise NvmlSuspended(
                    f"NVML reads suspended: {self.blocked_reads} reads in a row left calls blocked in the "
                    "driver (a hung GPU); reset the GPU or reboot, then restart the monitor")
            try:
                report = self._call(lambda: run_checks(options), deadline)
            except Stuck:
                raise
            except Timeout:
                self.blocked_reads += live
                raise
            if live:
                self.blocked_reads = self.blocked_reads + 1 if left_blocked(report) else 0
            return report
        finally:
            NVML_LOCK.release()
