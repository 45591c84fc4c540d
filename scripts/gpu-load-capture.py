"""Record what a GPU does under load: NVML at 10 Hz through marked workload phases.

Run on a GPU machine (needs torch with CUDA and nvidia-ml-py). Writes ``load_series.json``
(per GPU: static limits once, then one sample per tick with the phase it fell in) and
``load_summary.json`` (per phase min/median/max, GEMM throughput with the sampler off and
on, alternated, and what one tick of reads costs) to ``$OUT``. This is the recording that the
under-load checks (issue 18) are tested against, and the measurement of the sampler's cost.

    OUT=/tmp/out python3 scripts/gpu-load-capture.py [--seconds-scale 1.0]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from typing import Any

import pynvml
import torch


def _try(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as exc:  # a field this GPU or driver does not expose
        return {"error": type(exc).__name__ + ": " + str(exc)[:80]}


def static_info(h: Any) -> dict[str, Any]:
    n = pynvml
    return {
        "name": _try(n.nvmlDeviceGetName, h),
        "power_limit_mw": _try(n.nvmlDeviceGetEnforcedPowerLimit, h),
        "power_default_limit_mw": _try(n.nvmlDeviceGetPowerManagementDefaultLimit, h),
        "max_sm_mhz": _try(n.nvmlDeviceGetMaxClockInfo, h, n.NVML_CLOCK_SM),
        "max_mem_mhz": _try(n.nvmlDeviceGetMaxClockInfo, h, n.NVML_CLOCK_MEM),
        "app_sm_mhz": _try(n.nvmlDeviceGetApplicationsClock, h, n.NVML_CLOCK_SM),
        "temp_slowdown_c": _try(n.nvmlDeviceGetTemperatureThreshold, h, n.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
        "temp_shutdown_c": _try(n.nvmlDeviceGetTemperatureThreshold, h, n.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN),
        "temp_gpu_max_c": _try(n.nvmlDeviceGetTemperatureThreshold, h, n.NVML_TEMPERATURE_THRESHOLD_GPU_MAX),
        "temp_mem_max_c": _try(n.nvmlDeviceGetTemperatureThreshold, h, n.NVML_TEMPERATURE_THRESHOLD_MEM_MAX),
    }


MEM_TEMP_FIELD = 82  # NVML_FI_DEV_MEMORY_TEMP


def sample(h: Any) -> dict[str, Any]:
    n = pynvml
    s: dict[str, Any] = {"t": time.monotonic()}
    s["sm_mhz"] = _try(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_SM)
    s["mem_mhz"] = _try(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_MEM)
    s["power_mw"] = _try(n.nvmlDeviceGetPowerUsage, h)
    s["temp_c"] = _try(n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU)
    fv = _try(n.nvmlDeviceGetFieldValues, h, [MEM_TEMP_FIELD])
    if isinstance(fv, list) and fv and fv[0].nvmlReturn == 0:
        s["mem_temp_c"] = fv[0].value.uiVal
    reasons = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or n.nvmlDeviceGetCurrentClocksThrottleReasons
    s["event_reasons"] = _try(reasons, h)
    util = _try(n.nvmlDeviceGetUtilizationRates, h)
    if not isinstance(util, dict):
        s["util_gpu"], s["util_mem"] = util.gpu, util.memory
    s["read_s"] = round(time.monotonic() - s["t"], 6)
    return s


class Sampler(threading.Thread):
    """Reads every GPU every ``1/hz`` s into ``samples`` with the current phase label."""

    def __init__(self, handles: list[Any], hz: float) -> None:
        super().__init__(daemon=True)
        self.handles, self.period = handles, 1.0 / hz
        self.samples: list[list[dict[str, Any]]] = [[] for _ in handles]
        self.phase = "idle"
        self.stop_event = threading.Event()

    def run(self) -> None:
        nxt = time.monotonic()
        while not self.stop_event.is_set():
            for i, h in enumerate(self.handles):
                s = sample(h)
                s["phase"] = self.phase
                self.samples[i].append(s)
            nxt += self.period
            self.stop_event.wait(max(0.0, nxt - time.monotonic()))


def gemm_for(seconds: float, n: int, dtype: torch.dtype) -> float:
    """TFLOP/s of back-to-back n³ products for about ``seconds``."""
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    torch.matmul(a, b)
    torch.cuda.synchronize()
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            torch.matmul(a, b)
        torch.cuda.synchronize()
        done += 10
    return 2 * n**3 * done / (time.perf_counter() - t0) / 1e12


def copy_for(seconds: float, nbytes: int) -> float:
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            dst.copy_(src)
        torch.cuda.synchronize()
        done += 10
    return 2 * nbytes * done / (time.perf_counter() - t0) / 1e9


def h2d_d2h_for(seconds: float, nbytes: int) -> float:
    host = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        dev.copy_(host, non_blocking=True)
        host.copy_(dev, non_blocking=True)
        torch.cuda.synchronize()
        done += 2
    return nbytes * done / (time.perf_counter() - t0) / 1e9


def summarize(samples: list[dict[str, Any]], static: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for phase in dict.fromkeys(s["phase"] for s in samples):
        rows = [s for s in samples if s["phase"] == phase]
        stats: dict[str, Any] = {"n": len(rows), "seconds": round(rows[-1]["t"] - rows[0]["t"], 2)}
        for key in ("sm_mhz", "mem_mhz", "power_mw", "temp_c", "mem_temp_c", "util_gpu", "read_s"):
            vals = [s[key] for s in rows if isinstance(s.get(key), (int, float))]
            if vals:
                stats[key] = {"min": min(vals), "median": statistics.median(vals), "max": max(vals)}
        reasons = [s["event_reasons"] for s in rows if isinstance(s.get("event_reasons"), int)]
        bits: dict[str, int] = {}
        for r in reasons:
            for bit in range(16):
                if r >> bit & 1:
                    bits[hex(1 << bit)] = bits.get(hex(1 << bit), 0) + 1
        stats["event_reason_bits_samples"] = bits
        limit = static.get("power_limit_mw")
        if isinstance(limit, int) and "power_mw" in stats:
            stats["power_max_fraction_of_limit"] = round(stats["power_mw"]["max"] / limit, 3)
        out[phase] = stats
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every phase's length")
    ap.add_argument("--hz", type=float, default=10.0)
    args = ap.parse_args()
    out = os.environ.get("OUT", "gpu-load-capture")
    os.makedirs(out, exist_ok=True)
    pynvml.nvmlInit()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    static = [static_info(h) for h in handles]
    tick_costs = []
    for _ in range(50):
        t0 = time.perf_counter()
        for h in handles:
            sample(h)
        tick_costs.append(time.perf_counter() - t0)
    pcie_cost = None
    if hasattr(pynvml, "nvmlDeviceGetPcieThroughput"):
        t0 = time.perf_counter()
        _try(pynvml.nvmlDeviceGetPcieThroughput, handles[0], pynvml.NVML_PCIE_UTIL_TX_BYTES)
        pcie_cost = time.perf_counter() - t0

    sc = args.scale
    sampler = Sampler(handles, args.hz)
    sampler.start()
    phases: list[dict[str, Any]] = []
    results: dict[str, float] = {}

    def phase(name: str, fn: Any, *fargs: Any) -> None:
        sampler.phase = name
        t0 = time.monotonic()
        value = fn(*fargs) if fn else time.sleep(fargs[0])
        phases.append({"phase": name, "start": t0, "end": time.monotonic()})
        if value is not None:
            results[name] = round(value, 2)
            print(f"{name}: {value:.1f}", flush=True)

    phase("idle_before", None, 3 * sc)
    phase("gemm_bf16", gemm_for, 15 * sc, 8192, torch.bfloat16)
    phase("gemm_fp16", gemm_for, 4 * sc, 8192, torch.float16)
    torch.backends.cuda.matmul.allow_tf32 = True
    phase("gemm_tf32", gemm_for, 4 * sc, 8192, torch.float32)
    torch.backends.cuda.matmul.allow_tf32 = False
    phase("gemm_fp32", gemm_for, 4 * sc, 4096, torch.float32)
    phase("memory_copy", copy_for, 6 * sc, 4 << 30)
    phase("h2d_d2h", h2d_d2h_for, 5 * sc, 1 << 30)
    phase("idle_after", None, 4 * sc)
    sampler.stop_event.set()
    sampler.join()

    # The sampler's cost on the GEMM: alternate off / 10 Hz / 100 Hz windows of the same product.
    overhead: dict[str, list[float]] = {"off": [], "10hz": [], "100hz": []}
    for _ in range(4):
        for label, hz in (("off", None), ("10hz", 10.0), ("100hz", 100.0)):
            s = Sampler(handles, hz) if hz else None
            if s:
                s.start()
            overhead[label].append(gemm_for(2.5 * sc, 8192, torch.bfloat16))
            if s:
                s.stop_event.set()
                s.join()
    med = {k: statistics.median(v) for k, v in overhead.items()}
    summary = {
        "gpus": static, "hz": args.hz, "results": results, "phases": phases,
        "per_gpu_phase_stats": [summarize(s, st) for s, st in zip(sampler.samples, static, strict=True)],
        "tick_read_s": {"median": statistics.median(tick_costs), "max": max(tick_costs), "gpus": len(handles)},
        "pcie_throughput_read_s": pcie_cost,
        "gemm_bf16_overhead_tflops": overhead,
        "gemm_bf16_ratio_10hz_vs_off": round(med["10hz"] / med["off"], 4),
        "gemm_bf16_ratio_100hz_vs_off": round(med["100hz"] / med["off"], 4),
        "torch": torch.__version__, "driver": pynvml.nvmlSystemGetDriverVersion(),
    }
    with open(os.path.join(out, "load_series.json"), "w") as fh:
        json.dump({"gpus": static, "hz": args.hz, "phases": phases, "samples": sampler.samples}, fh)
    with open(os.path.join(out, "load_summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    print(json.dumps({k: summary[k] for k in ("results", "tick_read_s", "gemm_bf16_ratio_10hz_vs_off",
                                              "gemm_bf16_ratio_100hz_vs_off")}, indent=1))


if __name__ == "__main__":
    main()
