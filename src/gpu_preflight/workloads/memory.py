"""GPU memory: device copy bandwidth, pinned host↔device bandwidth, pattern write/verify.

Copy bandwidth counts bytes read plus written (as the H200 capture's 4200 GB/s does).
The pattern test fills a share of free memory with address-derived and fixed patterns and
counts mismatches on read-back: a bad HBM stack shows up as wrong words, not as a crash.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec
from msgspec.structs import asdict

GB = 1e9
CHUNK_WORDS = 1 << 26  # 512 MiB of int64 scratch per comparison step


class MemoryResult(msgspec.Struct):
    """The memory test: copy and host transfer bandwidths, bytes pattern-tested, errors found and which patterns ran."""

    device_copy_gbps: float | None = None
    h2d_gbps: float | None = None
    d2h_gbps: float | None = None
    pattern_bytes: int = 0
    pattern_errors: int = 0
    patterns: list[str] = []
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _timed(torch: Any, device: Any, fn: Any, iters: int) -> float:
    fn()
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize(device)
    return (time.perf_counter() - t0) / iters


def _copy_bandwidth(torch: Any, device: Any, nbytes: int, iters: int) -> float:
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    return float(2 * src.numel() * 4 / _timed(torch, device, lambda: dst.copy_(src), iters) / GB)


def _host_bandwidth(torch: Any, device: Any, nbytes: int, iters: int) -> tuple[float, float]:
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(nbytes, dtype=torch.uint8, device=device)
    h2d = nbytes / _timed(torch, device, lambda: dev.copy_(host, non_blocking=True), iters) / GB
    d2h = nbytes / _timed(torch, device, lambda: host.copy_(dev, non_blocking=True), iters) / GB
    return h2d, d2h


def run_memory(device: Any, *, copy_bytes: int, transfer_bytes: int, pattern_fraction: float,
               iters: int = 10) -> MemoryResult:
    """Measure on one CUDA device; the caller decides that a GPU is present."""
    # optional: torch comes with the [torch] extra, not with a node-only install
    import torch

    result = MemoryResult()
    try:
        result.device_copy_gbps = _copy_bandwidth(torch, device, copy_bytes, iters)
        result.h2d_gbps, result.d2h_gbps = _host_bandwidth(torch, device, transfer_bytes, iters)
        torch.cuda.empty_cache()
        free, _ = torch.cuda.mem_get_info(device)
        words = int(free * pattern_fraction) // 8
        if words > 0:
            buf = torch.empty(words, dtype=torch.int64, device=device)
            for name, fill in (("address", None), ("ones", -1), ("alternating", 0x5555555555555555)):
                if fill is None:
                    for start in range(0, words, CHUNK_WORDS):  # one arange past 2**32 elements goes wrong on CUDA
                        part = buf[start:start + CHUNK_WORDS]
                        torch.arange(start, start + part.numel(), device=device, out=part)
                    expected: Any = None
                else:
                    buf.fill_(fill)
                    expected = fill
                torch.cuda.synchronize(device)
                bad = 0
                for start in range(0, words, CHUNK_WORDS):  # bounded scratch: the buffer fills most memory
                    part = buf[start:start + CHUNK_WORDS]
                    want = torch.arange(start, start + part.numel(), device=device) if expected is None else expected
                    bad += int((part != want).sum().item())
                result.pattern_errors += bad
                result.patterns.append(name)
            result.pattern_bytes = words * 8
            del buf
            torch.cuda.empty_cache()
    except Exception as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    return result
