"""A rank hook (``GPU_PREFLIGHT_RANK_HOOKS=tests.stage_trace:trace``) that writes when each
rank entered each stage: ``<rank> <stage> <unix time>`` lines appended to the file
``$GP_TEST_STAGE_LOG`` names, so a test can order the ranks' stages against a stand-in tool's
own timestamps (one wall clock: every process runs on this host)."""

from __future__ import annotations

import os
import time
from pathlib import Path

STAGE_LOG = "GP_TEST_STAGE_LOG"
HOOKS_REF = "tests.stage_trace:trace"


class StageTrace:
    def stage(self, rank: int, name: str) -> None:
        path = os.environ.get(STAGE_LOG)
        if path:
            with open(path, "a") as fh:  # one short append per line: the ranks' lines do not interleave
                fh.write(f"{rank} {name} {time.time():.6f}\n")


def read(path: Path) -> list[tuple[int, str, float]]:
    """The logged ``(rank, stage, unix time)`` in the order written."""
    out = []
    for line in path.read_text().splitlines():
        rank, name, when = line.split()
        out.append((int(rank), name, float(when)))
    return out


trace = StageTrace()
