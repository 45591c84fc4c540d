"""Read one GPU through NVML at a fixed rate while the workloads run, phase by phase.

The node checks read NVML once, at idle. A GPU that is fine at idle but throttles,
overheats or hits a power brake under load passes them all, and its slower GEMM then has
no explanation. A :class:`LoadSampler` runs beside the workloads in its own daemon thread
and reads a small field set per tick (SM and memory clock, power draw, GPU and memory
temperature, clock event reasons, utilisation): about 0.1 ms of NVML calls per GPU, which
on a real H100 changed GEMM throughput by 0.14 % at 10 Hz and 0.24 % at 100 Hz
(``tests/fixtures/captured/h100-run-2026-11-26``). The workload marks the phase it is in
(:meth:`LoadSampler.mark`), so every sample says what the GPU was doing.

Samples are kept as columns (one list per field, no object per sample) and capped: past
``max_samples`` every other sample is dropped and the period doubles, so a long run keeps
its whole span at a coarser rate in bounded memory. A call NVML refuses gives ``None``
for that field and is counted; a lost GPU (``GPU_IS_LOST``) stops the sampler and is
reported. :func:`summarize` (pure) turns the columns into what travels in a rank's
payload: per phase min/median/max, the share of samples with each clock event reason,
and a downsampled series for plots.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from .nvml import ECC_TOTALS

MEMORY_TEMP_FIELD = 82  # NVML_FI_DEV_MEMORY_TEMP
SERIES = ("sm_mhz", "mem_mhz", "power_w", "temp_c", "mem_temp_c", "reasons", "util_gpu")
PLOTTED = ("sm_mhz", "power_w", "temp_c")
GPU_IS_LOST = 15  # NVML_ERROR_GPU_IS_LOST


class LoadRecord(msgspec.Struct):
    """What one sampler saw: the GPU's limits, phase spans and the sampled columns."""

    gpu: str
    static: dict[str, Any]
    t: list[float] = []
    phase: list[int] = []
    columns: dict[str, list[float | None]] = msgspec.field(default_factory=lambda: {k: [] for k in SERIES})
    phases: list[str] = []
    errors: dict[str, int] = {}
    lost: str | None = None
    period_s: float = 0.1
    ecc_before: dict[str, int | None] = {}
    ecc_after: dict[str, int | None] = {}


def _value(nvml: Any, fn: str, handle: Any, *args: Any) -> tuple[Any, int | None]:
    """(value, None) or (None, NVML error code): refusals are data, not exceptions."""
    try:
        return getattr(nvml, fn)(handle, *args), None
    except Exception as exc:  # NVMLError or a missing binding in an older pynvml
        return None, int(getattr(exc, "value", -1) or -1)


class LoadSampler:
    """Samples one GPU every ``1/hz`` seconds in a daemon thread until :meth:`stop`.

    ``nvml`` is the pynvml module (already initialised by the caller), ``handle`` the
    device handle. Tests drive :meth:`sample_once` directly for exact series.
    """

    def __init__(self, nvml: Any, handle: Any, gpu: str, hz: float = 10.0, max_samples: int = 20_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not hz > 0:
            raise ValueError(f"sampling rate must be positive, got {hz!r}")
        self.nvml, self.handle, self.clock = nvml, handle, clock
        self.max_samples = max(2, max_samples)
        self.record = LoadRecord(gpu=gpu, static=self._static(), period_s=1.0 / hz)
        self.record.ecc_before = self._ecc()
        self._phase = self._phase_index("idle")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = clock()

    def _static(self) -> dict[str, Any]:
        n, h = self.nvml, self.handle
        limit, _ = _value(n, "nvmlDeviceGetEnforcedPowerLimit", h)
        static: dict[str, Any] = {"power_limit_w": limit / 1000.0 if isinstance(limit, int) else None}
        for key, which in (("temp_shutdown_c", 0), ("temp_slowdown_c", 1), ("temp_mem_max_c", 2),
                           ("temp_gpu_max_c", 3)):
            static[key], _ = _value(n, "nvmlDeviceGetTemperatureThreshold", h, which)
        static["max_sm_mhz"], _ = _value(n, "nvmlDeviceGetMaxClockInfo", h, 1)
        return {k: v if isinstance(v, (int, float)) else None for k, v in static.items()}

    def _ecc(self) -> dict[str, int | None]:
        out: dict[str, int | None] = {}
        for key in ("volatile_corrected", "volatile_uncorrected"):  # the collector's own (errorType, counterType)
            value, _ = _value(self.nvml, "nvmlDeviceGetTotalEccErrors", self.handle, *ECC_TOTALS[key])
            out[key] = int(value) if isinstance(value, int) else None
        return out

    def _phase_index(self, name: str) -> int:
        if name not in self.record.phases:
            self.record.phases.append(name)
        return self.record.phases.index(name)

    def mark(self, phase: str) -> None:
        """The workload that starts now; every later sample is filed under it."""
        self._phase = self._phase_index(phase)

    def sample_once(self) -> None:
        """Read the field set once and append it (a lost GPU ends the sampling)."""
        n, h, rec = self.nvml, self.handle, self.record
        reads: dict[str, tuple[Any, int | None]] = {
            "sm_mhz": _value(n, "nvmlDeviceGetClockInfo", h, 1),
            "mem_mhz": _value(n, "nvmlDeviceGetClockInfo", h, 2),
            "power_w": _value(n, "nvmlDeviceGetPowerUsage", h),
            "temp_c": _value(n, "nvmlDeviceGetTemperature", h, 0),
            "reasons": _value(n, "nvmlDeviceGetCurrentClocksEventReasons", h),
        }
        util, code = _value(n, "nvmlDeviceGetUtilizationRates", h)
        reads["util_gpu"] = (getattr(util, "gpu", None), code)
        fields, code = _value(n, "nvmlDeviceGetFieldValues", h, [MEMORY_TEMP_FIELD])
        mem_temp = None
        if isinstance(fields, (list, tuple)) and fields and getattr(fields[0], "nvmlReturn", 1) == 0:
            mem_temp = getattr(getattr(fields[0], "value", None), "uiVal", None)
        reads["mem_temp_c"] = (mem_temp, code)
        if any(c == GPU_IS_LOST for _, c in reads.values()):
            rec.lost = "NVML: GPU is lost"
            self._stop.set()
            return
        rec.t.append(round(self.clock() - self._started, 3))
        rec.phase.append(self._phase)
        for key, (value, err) in reads.items():
            if err is not None:
                rec.errors[key] = rec.errors.get(key, 0) + 1
            if key == "power_w" and isinstance(value, int):
                value = value / 1000.0
            rec.columns[key].append(value if isinstance(value, (int, float)) else None)
        if len(rec.t) > self.max_samples:
            self._halve()

    def _halve(self) -> None:
        """Keep every other sample and sample half as often: the whole span in bounded memory."""
        rec = self.record
        rec.t, rec.phase = rec.t[::2], rec.phase[::2]
        for key in rec.columns:
            rec.columns[key] = rec.columns[key][::2]
        rec.period_s *= 2

    def _run(self) -> None:
        next_at = self.clock()
        while not self._stop.is_set():
            try:
                self.sample_once()
            except Exception as exc:  # a sampler bug must cost the series, never the workload
                self.record.errors[f"crash: {type(exc).__name__}: {exc}"[:120]] = 1
                return
            next_at += self.record.period_s
            self._stop.wait(max(0.0, next_at - self.clock()))

    def start(self) -> LoadSampler:
        self._thread = threading.Thread(target=self._run, name=f"load-sampler-{self.record.gpu}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 2.0) -> LoadRecord:
        """Stop sampling (a hung NVML call is left behind after ``timeout_s``) and return the record."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                self.record.errors["stop_timeout"] = 1
        if self.record.lost is None:
            self.record.ecc_after = self._ecc()
        return self.record


def _stats(values: Sequence[float | None]) -> dict[str, float] | None:
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return None
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)}


def _bit_shares(reasons: Sequence[float | None]) -> dict[str, float]:
    """Share of the phase's readable samples with each clock event reason bit set."""
    masks = [int(r) for r in reasons if r is not None]
    if not masks:
        return {}
    out: dict[str, float] = {}
    for bit in range(32):
        n = sum(1 for m in masks if m >> bit & 1)
        if n:
            out[f"0x{1 << bit:x}"] = round(n / len(masks), 4)
    return out


def summarize(record: LoadRecord, max_points: int = 240) -> dict[str, Any]:
    """The compact form a rank sends: per phase statistics and a downsampled series.

    Phases are listed in the order they ran; each has ``n`` samples, ``seconds``, the
    min/median/max of every field, ``reason_share`` (bit → share of samples) and
    ``power_max_fraction`` (of the enforced limit). ``series`` holds at most
    ``max_points`` samples of t, phase index, SM clock, power and temperature; with
    ``max_points`` 0 it is empty (a large cluster's ranks send statistics only: 80,000
    series would not fit rank 0's memory, and nobody reads them one by one).
    """
    phases: dict[str, dict[str, Any]] = {}
    for index, name in enumerate(record.phases):
        rows = [i for i, p in enumerate(record.phase) if p == index]
        if not rows:
            continue
        entry: dict[str, Any] = {"n": len(rows), "start_s": record.t[rows[0]],
                                 "seconds": round(record.t[rows[-1]] - record.t[rows[0]] + record.period_s, 3)}
        for key in SERIES:
            if key == "reasons":
                continue
            stats = _stats([record.columns[key][i] for i in rows])
            if stats is not None:
                entry[key] = stats
        entry["reason_share"] = _bit_shares([record.columns["reasons"][i] for i in rows])
        limit = record.static.get("power_limit_w")
        if limit and "power_w" in entry:
            entry["power_max_fraction"] = round(entry["power_w"]["max"] / limit, 4)
        phases[name] = entry
    step = max(1, -(-len(record.t) // max_points)) if max_points > 0 else 1
    keep = range(0, len(record.t), step) if max_points > 0 else range(0)
    series = {"t": [record.t[i] for i in keep], "phase": [record.phase[i] for i in keep],
              **{k: [record.columns[k][i] for i in keep] for k in PLOTTED}}
    ecc = {k: (record.ecc_after.get(k) or 0) - (v or 0) for k, v in record.ecc_before.items()
           if isinstance(v, int) and isinstance(record.ecc_after.get(k), int)}
    return {"gpu": record.gpu, "static": record.static, "hz": round(1.0 / record.period_s, 3),
            "samples": len(record.t), "phase_names": list(record.phases), "phases": phases, "series": series,
            "errors": dict(record.errors), "lost": record.lost, "ecc_delta": ecc}


def resolve_handle(nvml: Any, uuid: str | None, pci_bus_id: str | None, index: int) -> Any:
    """The NVML handle of the CUDA device a rank uses: by UUID, else PCI bus id, else index.

    CUDA and NVML can number GPUs differently (``CUDA_VISIBLE_DEVICES``, PCI vs fastest-first
    order), so the index is the last resort.
    """
    lookups: tuple[tuple[str, Any], ...] = (("nvmlDeviceGetHandleByUUID", uuid),
                                              ("nvmlDeviceGetHandleByPciBusId", pci_bus_id),
                                              ("nvmlDeviceGetHandleByIndex", index))
    last: Exception | None = None
    for fn, key in lookups:
        if key is None:
            continue
        try:
            return getattr(nvml, fn)(key)
        except Exception as exc:  # not this way: try the next
            last = exc
    raise LookupError(f"no NVML handle for GPU uuid={uuid} pci={pci_bus_id} index={index}: {last}")

