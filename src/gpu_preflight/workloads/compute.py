"""GEMM throughput with a correctness check, per device and dtype.

Correctness uses Freivalds' check — ``C·x`` against ``A·(B·x)`` in float64 for a random
vector ``x`` — which costs O(n²) instead of a second O(n³) product, so it can run on
every measured result. A GPU that computes fast but wrong is the failure this catches.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec
from msgspec.structs import asdict

# Relative error bound of C·x against the float64 reference, per dtype.
TOLERANCE = {"bf16": 2e-2, "fp16": 5e-3, "tf32": 5e-3, "fp32": 1e-4}


class GemmResult(msgspec.Struct):
    """One GEMM measurement: dtype, matrix size, iterations, TFLOPS, error against a reference and whether it is
    correct."""

    dtype: str
    n: int
    iters: int
    tflops: float
    rel_error: float
    correct: bool
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        # Rounded here, once per GPU, so rank 0 can take 80,000 values as they come.
        return {**asdict(self), "tflops": round(self.tflops, 6)}


def _dtype(torch: Any, name: str) -> Any:
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32}[name]


def freivalds_error(a: Any, b: Any, c: Any, gen: Any) -> float:
    """Relative error of ``c·x`` against ``a·(b·x)`` in float64 for a random ``x``."""
    # optional: torch comes with the [torch] extra, not with a node-only install
    import torch

    x = torch.randn(a.shape[1], 1, generator=gen, dtype=torch.float64)
    reference = a.double().cpu() @ (b.double().cpu() @ x)
    got = c.double().cpu() @ x
    return float((got - reference).norm() / reference.norm().clamp_min(1e-30))


def run_gemm(device: Any, dtype: str, n: int, iters: int, seconds: float | None = None) -> GemmResult:
    """Time ``iters`` n×n×n products (or as many as fit in ``seconds``) and verify the last one."""
    # optional: torch comes with the [torch] extra, not with a node-only install
    import torch

    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        gen = torch.Generator(device="cpu").manual_seed(1234)
        a32 = torch.randn(n, n, generator=gen) / n**0.5
        b32 = torch.randn(n, n, generator=gen) / n**0.5
        a = a32.to(device=device, dtype=_dtype(torch, dtype))
        b = b32.to(device=device, dtype=_dtype(torch, dtype))
        c = a @ b  # warm-up (cuBLAS heuristics, CPU thread pools)
        if cuda:
            torch.cuda.synchronize(device)
        done, t0 = 0, time.perf_counter()
        while done < iters or (seconds is not None and time.perf_counter() - t0 < seconds):
            torch.matmul(a, b, out=c)  # into one buffer: no allocator churn inside the timed loop
            done += 1
            if seconds is not None and done >= iters and cuda:
                torch.cuda.synchronize(device)
        if cuda:
            torch.cuda.synchronize(device)
        elapsed = time.perf_counter() - t0
        rel = freivalds_error(a, b, c, gen)
        finite = bool(torch.isfinite(c).all())
        tflops = 2 * n**3 * done / elapsed / 1e12
        return GemmResult(dtype, n, done, tflops, rel, finite and rel <= TOLERANCE[dtype])
    except Exception as exc:  # an unsupported dtype on this device, out of memory...
        return GemmResult(dtype, n, 0, 0.0, float("nan"), False, f"{type(exc).__name__}: {exc}")
