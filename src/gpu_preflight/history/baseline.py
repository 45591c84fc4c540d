"""``baseline capture``: a GPU-model profile whose performance floors come from a known-good run.

The shipped profiles carry field-survey numbers for a GPU model; a site's own nodes
(their clocks, cooling, NVLink generation, network) are better judged against what they
delivered when they were known to be good. Bandwidth floors are written at
``history.capture_floor_fraction`` of the measured median; expected GEMM throughput at
``history.capture_gemm_fraction`` of it, because ``compute.gemm`` already applies
``perf.gemm_warn_fraction`` / ``perf.gemm_fail_fraction`` to that number.

The file is a complete profile (``--profile FILE`` replaces the automatic one), so the
settings of the shipped profile for the same GPU model are carried over unless
``inherit`` is off.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec

from ..config.profiles import match_profile
from .extract import Measurement

__all__ = ["CaptureError", "Captured", "capture", "render_toml"]

GEMM_DTYPES = ("bf16", "fp16", "tf32", "fp32")


class CaptureError(ValueError):
    """The measurements cannot make a profile (none at all, or several GPU models mixed)."""


class Captured(msgspec.Struct):
    """A profile fragment: identity, measured floors (with how each was derived) and inherited sections."""

    name: str
    title: str
    match: list[str]
    perf: dict[str, float]
    notes: dict[str, str]
    source: str
    inherited_from: str | None = None
    inherited: dict[str, dict[str, Any]] = {}


def _pattern(model: str) -> str:
    """A regular expression matching the model name literally (only regex metacharacters escaped)."""
    return re.sub(r"([.^$*+?{}\[\]\\|()])", r"\\\1", model)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "cpu"


def _medians(measurements: Iterable[Measurement]) -> dict[str, tuple[float, int, str]]:
    values: dict[str, list[float]] = {}
    units: dict[str, str] = {}
    for m in measurements:
        values.setdefault(m.metric, []).append(m.value)
        units[m.metric] = m.unit
    return {k: (statistics.median(v), len(v), units[k]) for k, v in values.items()}


def floors(measurements: list[Measurement], *, floor_fraction: float,
           gemm_fraction: float) -> tuple[dict[str, float], dict[str, str]]:
    """PerfConfig values from measurements, and a note per value saying how it was derived."""
    med = _medians(measurements)
    node_wide = _medians(m for m in measurements if m.node is not None and m.slot is None)
    cluster_wide = _medians(m for m in measurements if m.node is None)
    perf: dict[str, float] = {}
    notes: dict[str, str] = {}

    def put(key: str, fraction: float, picked: list[tuple[str, tuple[float, int, str]]]) -> None:
        if not picked:
            return
        metric, (value, count, unit) = min(picked, key=lambda p: p[1][0])
        perf[key] = float(f"{value * fraction:.4g}")
        notes[key] = f"{fraction:g} x median {value:.4g} {unit} of {metric} ({count} value(s))"

    for dtype in GEMM_DTYPES:
        put(f"gemm_{dtype}_tflops", gemm_fraction, [(k, v) for k, v in med.items() if k == f"gemm.{dtype}"])
    put("allreduce_busbw_min_gbps", floor_fraction,
        [(k, v) for k, v in node_wide.items() if k.startswith("busbw.intra_node.all_reduce@")])
    put("network_busbw_min_gbps", floor_fraction,
        [(k, v) for k, v in cluster_wide.items() if re.match(r"busbw\.(inter_node|distributed)\.all_reduce@", k)])
    put("device_copy_min_gbps", floor_fraction, [(k, v) for k, v in med.items() if k == "memory.device_copy"])
    put("host_transfer_min_gbps", floor_fraction, [(k, v) for k, v in med.items() if k in ("memory.h2d", "memory.d2h")])
    return perf, notes


def capture(measurements: list[Measurement], *, source: str, model: str | None = None, name: str | None = None,
            match: list[str] | None = None, floor_fraction: float = 0.9, gemm_fraction: float = 1.0,
            inherit: bool = True) -> Captured:
    """A profile from measurements of one GPU model (``model`` picks one where several are present)."""
    models = sorted({m.model for m in measurements if m.model})
    if model is not None:
        if model not in models:
            raise CaptureError(f"no measurement of GPU model {model!r} (found: {', '.join(models) or 'none'})")
        measurements = [m for m in measurements if m.model == model]
    elif len(models) > 1:
        raise CaptureError(f"measurements of several GPU models ({', '.join(models)}): pick one with --model")
    else:
        model = models[0] if models else None
    perf, notes = floors(measurements, floor_fraction=floor_fraction, gemm_fraction=gemm_fraction)
    if not perf:
        raise CaptureError("no GEMM, bus bandwidth or memory bandwidth measurement to capture "
                           "(run the workloads: gpu-preflight run without --node-only)")
    today = datetime.now(UTC).date().isoformat()
    out = Captured(name or f"baseline-{_slug(model or 'cpu')}", f"{model or 'CPU workers'} baseline ({today})",
                   match if match is not None else ([_pattern(model)] if model else []), perf, notes, source)
    if inherit and model:
        shipped = match_profile([model])
        if shipped is not None:
            out.inherited_from = shipped.name
            out.inherited = {s: dict(v) for s, v in shipped.layer.data.items()}
    return out


def toml_value(value: Any) -> str:
    """A TOML literal for a setting value (strings as literal strings where possible: regexes stay readable)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return f"'{value}'" if "'" not in value and "\n" not in value else json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def render_toml(c: Captured) -> str:
    """The profile file: loads with :func:`gpu_preflight.config.profiles.load_profile_file`."""
    lines = [f"# Captured by `gpu-preflight baseline capture` from {c.source}.",
             "# Use it with: gpu-preflight run --profile THIS_FILE", "",
             "[profile]", f"name = {toml_value(c.name)}", f"title = {toml_value(c.title)}",
             f"match = {toml_value(c.match)}", ""]
    for section, values in c.inherited.items():
        if section == "perf":
            continue
        lines.append(f"# from the shipped profile {c.inherited_from}")
        lines.append(f"[{section}]")
        lines += [f"{k} = {toml_value(v)}" for k, v in values.items()]
        lines.append("")
    lines.append("[perf]")
    for key, value in c.perf.items():
        lines.append(f"{key} = {toml_value(value)}  # {c.notes[key]}")
    for key, value in (c.inherited.get("perf") or {}).items():
        if key not in c.perf:
            lines.append(f"{key} = {toml_value(value)}  # from the shipped profile {c.inherited_from}")
    return "\n".join(lines) + "\n"
