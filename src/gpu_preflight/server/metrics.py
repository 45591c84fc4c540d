"""Prometheus text exposition (format 0.0.4) of the monitor's last result, hand-written.

No ``prometheus_client``: the server keeps its own state and only needs to print it, and
a dependency-free exposition keeps ``/metrics`` cheap. Names follow the Prometheus
conventions: ``gpu_preflight_`` prefix, base units in the name (``_celsius``, ``_watts``,
``_seconds``), ``_total`` on counters only, enum values as state-set gauges (one series
per state, 1 for the current one). A reading NVML could not take is left out, never
exported as a fake 0.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from typing import Any

from .._version import __version__
from ..findings.health import HealthState, HealthStatus
from ..model import NodeReport, Status
from ..records.smi import CLOCK_REASON_BITS

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PREFIX = "gpu_preflight_"
STATUSES = [s.value.lower() for s in Status]
HEALTH_STATES = [s.value for s in HealthState]


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


Labels = tuple[tuple[str, str], ...]


def label_text(items: Labels) -> str:
    """``k="v",...`` for a label set."""
    return ",".join(f'{k}="{escape_label(v)}"' for k, v in items)


@functools.lru_cache(maxsize=16384)
def sample_prefix(full: str, labels: Labels) -> str:
    """``name{labels} `` of one series: a monitor renders the same series every tick, so each
    is escaped and joined once, and a sample costs one concatenation with its value."""
    return f"{full}{{{label_text(labels)}}} " if labels else f"{full} "


@functools.lru_cache(maxsize=4096)
def state_prefixes(full: str, labels: Labels, key: str, states: tuple[str, ...]) -> tuple[str, ...]:
    """The prefixes of one state set's series, one per state."""
    own = tuple((k, v) for k, v in labels if k != key)
    return tuple(sample_prefix(full, (*own, (key, state))) for state in states)


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def number(value: Any) -> float | None:
    """A real reading (bools count as 0/1); ``{"na": ...}`` and None are not."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    return None


class Exposition:
    """Collects metric families and renders them grouped, each with HELP and TYPE once."""

    def __init__(self) -> None:
        self._families: dict[str, tuple[str, str, list[str]]] = {}

    def add(self, name: str, kind: str, help_text: str, value: float,
            labels: Mapping[str, str] | None = None) -> None:
        self.add_series(name, kind, help_text, value, tuple(labels.items()) if labels else ())

    def add_series(self, name: str, kind: str, help_text: str, value: float, labels: Labels = ()) -> None:
        """:meth:`add` with the labels as a tuple of pairs (no mapping built per sample)."""
        full = PREFIX + name
        self._samples(full, kind, help_text).append(sample_prefix(full, labels) + format_value(value))

    def _samples(self, full: str, kind: str, help_text: str) -> list[str]:
        family = self._families.get(full)
        if family is None:
            family = self._families[full] = (kind, help_text, [])
        return family[2]

    def state_set(self, name: str, help_text: str, current: str, states: Iterable[str],
                  labels: Mapping[str, str] | None = None, key: str = "status") -> None:
        full, names = PREFIX + name, tuple(states)
        prefixes = state_prefixes(full, tuple(labels.items()) if labels else (), key, names)
        self._samples(full, "gauge", help_text).extend(
            prefix + ("1" if state == current else "0") for prefix, state in zip(prefixes, names, strict=True))

    def render(self) -> str:
        lines: list[str] = []
        for name, (kind, help_text, samples) in self._families.items():
            lines.append(f"# HELP {name} {escape_help(help_text)}")
            lines.append(f"# TYPE {name} {kind}")
            lines.extend(samples)
        return "\n".join(lines) + "\n" if lines else ""


def node_metrics(out: Exposition, report: NodeReport | None, runs_total: int, failures_total: int,
                 duration_s: float, finished_at: float) -> None:
    """The node checks' part: verdict, per-check status and durations, run counters."""
    out.add("runs_total", "counter", "Monitor ticks that ran the quick node checks.", runs_total)
    out.add("run_failures_total", "counter",
            "Monitor ticks whose node checks did not finish (timeout, NVML suspended, crash).", failures_total)
    out.add("run_duration_seconds", "gauge", "Wall time of the last monitor tick.", duration_s)
    out.add("last_run_timestamp_seconds", "gauge", "Unix time the last monitor tick finished.", finished_at)
    if report is None:
        return
    out.add("info", "gauge", "gpu-preflight build and node.",
            1, {"version": __version__, "hostname": report.hostname, "profile": report.profile or ""})
    out.state_set("node_status", "Verdict of the last quick node checks (1 for the current status).",
                  report.status.value.lower(), STATUSES)
    for result in report.results:
        out.state_set("check_status", "Status of each node check in the last run (1 for the current status).",
                      result.status.value.lower(), STATUSES, {"check": result.check_id})
        out.add("check_duration_seconds", "gauge", "Wall time of each node check in the last run.",
                result.duration_s, {"check": result.check_id})


GPU_METRICS: dict[str, tuple[str, str]] = {  # metric -> (type, help)
    "gpu_temperature_celsius": ("gauge", "GPU die temperature."),
    "gpu_memory_temperature_celsius": ("gauge", "GPU memory (HBM) temperature."),
    "gpu_power_draw_watts": ("gauge", "GPU board power draw."),
    "gpu_power_limit_watts": ("gauge", "Enforced GPU power limit."),
    "gpu_ecc_errors_total": ("counter", "ECC errors by severity, since driver load (scope volatile) or over "
                                        "the GPU's life (scope aggregate)."),
    "gpu_remapped_rows_total": ("counter", "HBM rows remapped, by the severity of the error that caused it."),
    "gpu_row_remap_pending": ("gauge", "1 when a row remap waits for a GPU reset."),
    "gpu_row_remap_failed": ("gauge", "1 when a row remap failed (the GPU needs service)."),
    "gpu_recovery_action": ("gauge", "NVML GPU recovery action: 0 NONE, 1 GPU_RESET, 2 NODE_REBOOT, 3 DRAIN_P2P, "
                                     "4 DRAIN_AND_RESET, 5 RECOVER_IMEX_DOMAIN, 6 BUS_RESET, 7 SYSTEM_REBOOT."),
    "gpu_clock_event_reasons": ("gauge", "Raw NVML clocks event (throttle) reasons bitmask."),
}
GPU_READINGS: tuple[tuple[str, str, Labels], ...] = (  # (record field, metric, extra labels)
    ("temperature_c", "gpu_temperature_celsius", ()),
    ("memory_temperature_c", "gpu_memory_temperature_celsius", ()),
    ("power_draw_w", "gpu_power_draw_watts", ()),
    ("power_limit_w", "gpu_power_limit_watts", ()),
    ("ecc_volatile_corrected", "gpu_ecc_errors_total", (("severity", "corrected"), ("scope", "volatile"))),
    ("ecc_volatile_uncorrected", "gpu_ecc_errors_total", (("severity", "uncorrected"), ("scope", "volatile"))),
    ("ecc_aggregate_corrected", "gpu_ecc_errors_total", (("severity", "corrected"), ("scope", "aggregate"))),
    ("ecc_aggregate_uncorrected", "gpu_ecc_errors_total", (("severity", "uncorrected"), ("scope", "aggregate"))),
    ("remapped_rows_correctable", "gpu_remapped_rows_total", (("severity", "correctable"),)),
    ("remapped_rows_uncorrectable", "gpu_remapped_rows_total", (("severity", "uncorrectable"),)),
    ("remap_pending", "gpu_row_remap_pending", ()),
    ("remap_failure", "gpu_row_remap_failed", ()),
    ("recovery_action", "gpu_recovery_action", ()),
    ("clock_event_reasons", "gpu_clock_event_reasons", ()),
)


@functools.lru_cache(maxsize=1024)
def reading_prefixes(labels: Labels) -> tuple[tuple[str, str, str], ...]:
    """(record field, metric, series prefix) of one GPU's :data:`GPU_READINGS`, built once per GPU."""
    return tuple((field, metric, sample_prefix(PREFIX + metric, (*labels, *extra)))
                 for field, metric, extra in GPU_READINGS)


def _reading_series(out: Exposition, labels: Labels) -> list[tuple[str, list[str], str]]:
    return [(field, out._samples(PREFIX + metric, *GPU_METRICS[metric]), prefix)
            for field, metric, prefix in reading_prefixes(labels)]


@functools.lru_cache(maxsize=1024)
def reason_lines(labels: Labels, mask: int) -> tuple[str, ...]:
    """One GPU's clock event reason series for ``mask``: a mask changes seldom, so each is rendered once."""
    full = PREFIX + "gpu_clock_event_reason_active"
    return tuple(sample_prefix(full, (*labels, ("reason", reason))) + ("1" if mask & bit else "0")
                 for reason, bit in CLOCK_REASON_BITS.items())


def gpu_metrics(out: Exposition, report: NodeReport | None, health: HealthStatus | None) -> None:
    """Per-GPU readings of the last NVML read and each GPU's health verdict."""
    gpu_facts = (report.facts.get("gpu") if report else None) or {}
    labels_of: dict[int, dict[str, str]] = {}
    driver = str(gpu_facts["driver_version"]) if isinstance(gpu_facts.get("driver_version"), str) else ""
    for rec in gpu_facts.get("gpus") or []:
        index = rec.get("index")
        if not isinstance(index, int):
            continue
        labels = (("gpu", str(index)), ("uuid", rec["uuid"] if isinstance(rec.get("uuid"), str) else ""))
        labels_of[index] = dict(labels)
        name = str(rec["name"]) if isinstance(rec.get("name"), str) else ""
        bus = str(rec["pci_bus_id"]) if isinstance(rec.get("pci_bus_id"), str) else ""
        out.add_series("gpu_info", "gauge", "GPU identity (value is always 1).",
                       1, (*labels, ("name", name), ("pci_bus_id", bus), ("driver_version", driver)))
        for field, samples, prefix in _reading_series(out, labels):
            value = number(rec.get(field))
            if value is not None:
                samples.append(prefix + format_value(value))
        mask = number(rec.get("clock_event_reasons"))
        if mask is not None:
            out._samples(PREFIX + "gpu_clock_event_reason_active", "gauge",
                         "1 while the clock event (throttle) reason is active.").extend(
                reason_lines(labels, int(mask)))
    if health is None:
        return
    out.state_set("gpu_health_status", "GPU health of the monitored GPUs: healthy, unhealthy or unknown "
                  "(unknown means it could not be looked at).", health.state.value, HEALTH_STATES, key="state")
    for gpu in health.gpus:
        out.state_set("gpu_health", "Health of each GPU (1 for the current state).", gpu.state.value,
                      HEALTH_STATES, labels_of.get(gpu.index, {"gpu": str(gpu.index), "uuid": ""}), key="state")


def tick_metrics(report: NodeReport | None, health: HealthStatus | None, runs_total: int, failures_total: int,
                 duration_s: float, finished_at: float) -> str:
    """The part of ``/metrics`` that changes once per tick (rendered once, served many times)."""
    out = Exposition()
    node_metrics(out, report, runs_total, failures_total, duration_s, finished_at)
    gpu_metrics(out, report, health)
    return out.render()


def live_metrics(alive: bool, ready: bool, verdict_age_s: float | None, progress_age_s: float | None) -> str:
    """The part of ``/metrics`` that depends on the time of the scrape."""
    out = Exposition()
    out.add("alive", "gauge", "1 when /healthz answers 200 (monitor loop and agent alive).", int(alive))
    out.add("ready", "gauge", "1 when /readyz answers 200 (last verdict: fit for work).", int(ready))
    if verdict_age_s is not None:
        out.add("verdict_age_seconds", "gauge", "Age of the last node verdict.", verdict_age_s)
    if progress_age_s is not None:
        out.add("progress_age_seconds", "gauge", "Time since the agent's alive callback last reported progress.",
                progress_age_s)
    return out.render()


def scrape_duration(seconds: float) -> str:
    out = Exposition()
    out.add("scrape_duration_seconds", "gauge", "Time spent rendering this /metrics response.", seconds)
    return out.render()
