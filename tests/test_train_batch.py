"""``--batch-size`` / ``workload.train_batch_size``: the training smokes' samples per step.

The default (512, the whole set) must leave the smoke exactly as it was; a smaller batch takes
successive minibatches, and the DDP smoke's record in ``ddp_training_result.json`` says how
many make one pass over a rank's share (a real two-rank gloo run).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gpu_preflight.config.schema import WorkloadConfig
from gpu_preflight.workloads.training import SAMPLES, _model_and_data, _train, batching, run_single

from .conftest import REPO
from .test_acceptance_suite import BASE_ENV
from .torch_extra import needs_torch

pytestmark = needs_torch


def test_the_default_batch_is_the_whole_set_and_trains_as_before() -> None:
    import torch

    assert WorkloadConfig().train_batch_size == SAMPLES == 512
    model, x, y = _model_and_data(torch, torch.device("cpu"), seed=7)
    before = _train(torch, model, x, y, 5, 0.05)  # the loop as it was: every sample each step
    result = run_single(torch.device("cpu"), 5, 0.2)
    assert (result.loss_start, result.loss_end) == before[:2]  # bit-identical
    assert (result.batch_size, result.batches_per_epoch) == (512, 1)


def test_a_smaller_batch_takes_minibatches() -> None:
    import torch

    full, small = run_single(torch.device("cpu"), 4, 0.2), run_single(torch.device("cpu"), 4, 0.2, batch=100)
    assert (small.batch_size, small.batches_per_epoch) == (100, 6)  # 512 samples: 5 full batches and a part
    assert small.loss_start != full.loss_start  # the first step saw 100 samples, not 512
    assert batching(256, 4096) == (256, 1) and batching(256, 64) == (64, 4) and batching(255, 64) == (64, 4)


def test_batch_size_reaches_the_ddp_smoke_of_a_real_run(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--format", "json", "--quiet",
                          "--no-history", "--timeout-s", "30", "--report-dir", str(tmp_path), "--check", "train.*",
                          "--steps", "8", "--batch-size", "64"],
                         capture_output=True, text=True, timeout=300, env=BASE_ENV, cwd=REPO)
    assert out.returncode in (0, 1, 2), out.stderr[-3000:]  # judged (8 small steps may not learn enough)
    result = json.loads((tmp_path / "ddp_training_result.json").read_text())
    assert result["world_size"] == 2 and result["steps"] == 8
    assert (result["batch_size"], result["batches_per_epoch"]) == (64, 4)  # each rank's 256 samples in fours
