"""Workloads on the CPU: GEMM with its correctness check, training smoke."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpu_preflight.workloads.compute import TOLERANCE, freivalds_error, run_gemm
from gpu_preflight.workloads.stack import read_stack
from gpu_preflight.workloads.training import run_single

from .torch_extra import torch_or_skip

torch = torch_or_skip()


def test_gemm_on_cpu_is_measured_and_verified() -> None:
    r = run_gemm(torch.device("cpu"), "fp32", 256, 3)
    assert r.correct and r.error is None and r.tflops > 0 and r.iters == 3
    assert r.rel_error < TOLERANCE["fp32"]


def test_freivalds_catches_one_wrong_element() -> None:
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(128, 128, generator=gen), torch.randn(128, 128, generator=gen)
    c = a @ b
    assert freivalds_error(a, b, c, torch.Generator().manual_seed(1)) < 1e-5
    c[17, 42] += 1.0
    assert freivalds_error(a, b, c, torch.Generator().manual_seed(1)) > TOLERANCE["fp32"]


def test_unsupported_dtype_is_an_error_not_a_pass() -> None:
    r = run_gemm(torch.device("cpu"), "nonesuch", 64, 1)
    assert not r.correct and r.error


def test_training_smoke_learns_on_cpu() -> None:
    r = run_single(torch.device("cpu"), steps=30, min_drop=0.2)
    assert r.finite and r.improved and r.loss_end < r.loss_start * 0.8


def test_training_smoke_flags_no_progress() -> None:
    r = run_single(torch.device("cpu"), steps=30, min_drop=0.2, lr=0.0)
    assert r.finite and not r.improved


def test_stack_on_a_cpu_build() -> None:
    s = read_stack()
    assert s.torch_version.startswith("2.13") and s.gloo_available and not s.cuda_available


def test_the_training_loop_is_torch_sgd_with_momentum() -> None:
    """Our SGD reproduces torch.optim.SGD(momentum=0.9) step for step on the smoke model."""
    from gpu_preflight.workloads.training import _model_and_data, _train

    ours, x, y = _model_and_data(torch, torch.device("cpu"), seed=7)
    ref, _, _ = _model_and_data(torch, torch.device("cpu"), seed=7)
    _train(torch, ours, x, y, steps=10, lr=0.05)
    opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
    for _ in range(10):
        opt.zero_grad(set_to_none=True)
        torch.nn.CrossEntropyLoss()(ref(x), y).backward()
        opt.step()
    for a, b in zip(ours.parameters(), ref.parameters(), strict=True):
        assert torch.allclose(a, b, rtol=1e-6, atol=1e-7)


DATA_PARALLEL = """
import os, sys, torch, torch.distributed as dist
from gpu_preflight.workloads.training import run_ddp, run_single
rank, world = int(sys.argv[1]), int(sys.argv[2])
dist.init_process_group("gloo", init_method="file://" + sys.argv[3], rank=rank, world_size=world)
single = run_single(torch.device("cpu"), steps=30, min_drop=0.2)
ddp = run_ddp(torch.device("cpu"), steps=30, min_drop=0.2)
dist.destroy_process_group()
print(single.improved, ddp.improved, ddp.params_identical, len(ddp.param_digests or []), "torch._dynamo" in sys.modules)
"""


def test_data_parallel_training_learns_agrees_and_imports_no_dynamo(tmp_path: Path) -> None:
    """Two real gloo ranks: the loss falls, parameters end bit-identical, torch._dynamo is never imported
    (it costs every rank ~4 s; torch.optim's step and DDP's constructor would pull it in)."""
    init = tmp_path / "init"
    procs = [subprocess.Popen([sys.executable, "-c", DATA_PARALLEL, str(r), "2", str(init)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert [o.split() for o, _ in outs] == [["True", "True", "True", "1", "False"]] * 2
