"""How ranks leave a run: in an order launchers do not punish, with the verdict where they read it.

Launchers react to the first worker that exits non-zero: torchrun's agent SIGTERMs the rest
of its node's workers at once, ``mpirun`` aborts the whole job, ``srun`` reports each task.
So a run whose verdict is WARN or FAIL ends in a fixed order: ranks that do not carry the
verdict announce that they are leaving and exit 0; a rank that carries it waits (bounded)
until they are gone, writes torch elastic's error file, and exits with the verdict's code.
Who carries it depends on what the launcher passes through:

- the reporting rank (rank 0, or whoever took over from a silent rank 0) always;
- under torchrun also each node's lowest rank that still answers (its local rank 0, unless
  that one went silent): every agent must see one of its workers fail, or agents whose workers
  all exited 0 wait at their exit barrier for the others, and an agent whose local rank 0 is
  stuck must be made to stop it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..backends.launcher.topology import Launcher
from ..findings.canonical import result_line
from ..safeio import write_text

if TYPE_CHECKING:
    from ..findings.model import ClusterReport

ERROR_FILE_ENV = "TORCHELASTIC_ERROR_FILE"
LINE_MAX = 500


def carries_verdict(launcher: Launcher, *, reporting: bool, node_carrier: bool) -> bool:
    """Whether this rank exits with the verdict's code (the others exit 0 first).

    ``node_carrier``: this rank is the lowest rank of its node that still answers.
    """
    return reporting or (launcher is Launcher.TORCHRUN and node_carrier)


def verdict_text(report: ClusterReport) -> str:
    """One line a launcher can show for the run: status, exit code, result line, first issues."""
    s = report.cluster_summary
    text = f"gpu-preflight {s.overall_status.value} (exit {s.exit_code}): {result_line(report)}"
    for issue in s.issues:
        if len(text) + len(str(issue)) + 3 > LINE_MAX:
            break
        text += " | " + str(issue)
    return " ".join(text.split())[:LINE_MAX]


def write_error_file(line: str, code: int, environ: Mapping[str, str] | None = None) -> Path | None:
    """torch elastic's error file (``TORCHELASTIC_ERROR_FILE``), so torchrun's failure summary
    shows this line where it would print a traceback. Nothing without the variable or at exit 0.

    The layout is :class:`~torch.distributed.elastic.multiprocessing.errors.ErrorHandler`'s:
    torchrun's ``ProcessFailure`` reads ``message.extraInfo.py_callstack`` for the summary's
    ``traceback :`` field and ``message.extraInfo.timestamp`` to pick the first failure.
    """
    path = (os.environ if environ is None else environ).get(ERROR_FILE_ENV)
    if not path or code == 0:
        return None
    data = {"message": {"message": line, "errorCode": code,
                        "extraInfo": {"py_callstack": line, "timestamp": str(int(time.time()))}}}

    try:
        return write_text(path, json.dumps(data))
    except (OSError, ValueError):
        return None


def process_gone(pid: int) -> bool:
    """The process has exited (absent, or a zombie waiting for its parent to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] in (["Z"], ["X"])


def wait_gone(pids: list[int], deadline: float) -> bool:
    """Wait (until ``deadline``, monotonic) for these processes to exit; whether they all did."""
    while True:
        if all(process_gone(p) for p in pids):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
