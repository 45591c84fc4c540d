"""``--verbose``: the acceptance suite's lines come as each workload finishes, not after the gather.

A real two-rank gloo self-launched run whose ranks pause for ``PAUSE_S`` as they enter the
training stage (a rank hook): each stderr line is stamped as it arrives, and the ``[COMPUTE]``
lines must come a pause before the ``[TRAIN]`` lines. Printed after the gather, all the lines
would arrive together.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from .conftest import REPO
from .slow_hooks import HOOKS_REF, PAUSE_S
from .test_acceptance_suite import BASE_ENV


def test_compute_lines_come_before_training_ends(tmp_path: Path) -> None:
    env = {**BASE_ENV, "GPU_PREFLIGHT_RANK_HOOKS": HOOKS_REF,
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen([sys.executable, "-m", "gpu_preflight", "run", "--format", "json", "--verbose",
                             "--no-history", "--timeout-s", "30", "--report-dir", str(tmp_path), "--steps", "5",
                             "--numel", "256"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    stamped: list[tuple[float, str]] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            stamped.append((time.monotonic(), line.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert proc.stdout is not None
        out = proc.stdout.read()  # stderr is the reader's alone: communicate() would take lines from it too
        proc.wait(timeout=300)
    finally:
        proc.kill()
    reader.join(10)
    text = "\n".join(line for _, line in stamped)
    assert proc.returncode in (0, 1, 2), text[-3000:]
    assert out.lstrip().startswith("{"), "stdout holds the JSON alone"

    def when(prefix: str) -> list[float]:
        return [t for t, line in stamped if line.startswith(prefix)]

    env_at, compute_at, train_at, ddp_at = when("[ENV] "), when("[COMPUTE] "), when("[TRAIN] "), when("[DDP_TRAIN] ")
    assert len(env_at) == 1 and len(compute_at) == 2 and len(train_at) == 2 and len(ddp_at) == 1, text[-3000:]
    assert min(train_at) - max(compute_at) >= PAUSE_S * 0.8, text[-3000:]  # printed before the pause, not after
    assert env_at[0] <= min(compute_at) and max(train_at) <= ddp_at[0]
    written = when("gpu-preflight: report written to")
    assert written and max(compute_at) <= written[0] - PAUSE_S * 0.8
