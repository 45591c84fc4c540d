"""The findings every diagnostic check gives when its tool says nothing about the node.

One rule for all tools, so they cannot drift apart: a tool that is not installed is a
SKIP with the reason (the node may simply not have DCGM); a tool that hung, could not
start, or exited with an error and printed nothing readable is an ERROR naming the tool
and its command — nothing was measured, so it is never a PASS.
"""

from __future__ import annotations

from ..model import Finding, Status
from ..records.tools import ToolRun

__all__ = ["not_run", "unreadable"]

_INSTALL = {
    "dcgmi": "Install DCGM (datacenter-gpu-manager) and start nv-hostengine, or set diagnostics.dcgm_enabled=false.",
    "fi_info": "Install libfabric's utilities (libfabric-bin, or the EFA installer's /opt/amazon/efa/bin).",
    "fi_pingpong": "Install libfabric's fabtests (fi_pingpong) on every node.",
    "lspci": "Install pciutils.",
}


def not_run(check_id: str, subject: str, run: ToolRun) -> Finding | None:
    """SKIP for a missing tool, ERROR for a hung or unstartable one; ``None`` when the tool ran."""
    if run.missing:
        return Finding(check_id, Status.SKIP, subject, "not_installed", f"not run: {run.problem}",
                       recommendation=_INSTALL.get(run.tool), details={"argv": run.argv})
    if run.problem is None:
        return None
    code = "tool_timeout" if run.timed_out else "tool_failed"
    return Finding(check_id, Status.ERROR, subject, code, f"could not measure: {run.problem}",
                   details={"argv": run.argv, "artifact": run.artifact_file, "stderr": run.stderr_tail[-500:]},
                   recommendation=f"Run `{' '.join(run.argv)}` by hand on this node to see why it "
                                  + ("hangs." if run.timed_out else "does not start."))


def unreadable(check_id: str, subject: str, run: ToolRun, parse_error: str | None) -> Finding:
    """ERROR for a tool that ran but left no readable result (its exit status and last words)."""
    status = f"exit status {run.rc}" if run.rc is not None else "no exit status"
    said = f": {run.stderr_tail.strip().splitlines()[-1][:200]}" if run.stderr_tail.strip() else ""
    return Finding(check_id, Status.ERROR, subject, "unreadable_output",
                   f"could not measure: `{' '.join(run.argv)}` gave no readable result ({status}{said})"
                   + (f"; {parse_error}" if parse_error else ""),
                   details={"argv": run.argv, "rc": run.rc, "artifact": run.artifact_file,
                            "parse_error": parse_error},
                   recommendation="Check the saved raw output (see artifacts) and run the command by hand.")
