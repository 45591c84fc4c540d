"""Workloads on the CPU: GEMM with its correctness check, training smoke."""

from __future__ import annotations

import torch

from gpu_preflight.workloads.compute import TOLERANCE, freivalds_error, run_gemm
from gpu_preflight.workloads.stack import read_stack
from gpu_preflight.workloads.training import run_single


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
