"""The NVML table (records/nvml_fields.py) against what it feeds: the record, the reader, the schema.

Why: the table is the one place a reading is declared; these tests make the places derived
from it unable to drift: every GpuRecord field NVML fills is filled by exactly one reading,
every reading a record field comes from is validated on replay, the reader stores each
answer where the table says, and a replayed captured snapshot gives every field the type
GpuRecord declares.
"""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import fields

from gpu_preflight.backends import nvml
from gpu_preflight.backends.nvml_session import PLAN, SETTING_CALLS
from gpu_preflight.model import NA
from gpu_preflight.probes import _dump_schema as schema
from gpu_preflight.probes.gpu import facts_from_dump
from gpu_preflight.records import GpuRecord
from gpu_preflight.records import nvml_fields as table

CAPTURED = Path(__file__).parent / "fixtures" / "captured"
NOT_FROM_NVML = {"lost", "call_errors"}  # what gpu_record notes about the reads themselves


def filled() -> list[str]:
    return [attr for r in table.TABLE for attr, _ in r.fills]


def test_every_nvml_field_of_the_record_is_filled_by_exactly_one_reading() -> None:
    names = filled()
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert set(names) == {f.name for f in fields(GpuRecord)} - NOT_FROM_NVML


def test_a_reading_with_fills_is_checked_on_replay_and_only_such_a_reading() -> None:
    for r in table.TABLE:
        if r.fn == table.NVLINK:
            continue  # validated link by link (_dump_schema._nvlinks)
        assert bool(r.fills) == (r.check is not None), r.path
    checked = {key for key, _, _ in schema.DEVICE} | {k for keys, _ in schema.ALTERNATIVES.values() for k in keys[:1]}
    checked |= {f"{g}.{k}" for g, members in schema.GROUPS.items() for k in members}
    checked |= {f"field_values.{name}" for name in schema.FIELDS_READ}
    assert checked == {r.path for r in table.TABLE if r.check}


def test_paths_are_unique_and_the_conversion_order_names_known_readings() -> None:
    paths = [r.path for r in table.TABLE]
    assert len(paths) == len(set(paths))
    assert set(table.CONVERTED_FIRST) <= {r.path for r in table.TABLE if r.fills}
    assert len(table.CONVERTED) == sum(1 for r in table.TABLE if r.fills)


def test_the_reader_calls_the_table_in_its_order_then_the_links_then_the_fields() -> None:
    assert [key for _, _, key, _, _ in nvml.PLAN] == [r.path for r in table.CALLS]
    assert PLAN is nvml.PLAN
    assert [r.fn for r in table.TABLE[len(table.CALLS):]] == [table.NVLINK] + [table.FIELD] * len(table.FIELDS)
    assert nvml.STATIC_DEVICE_CALLS == table.KEPT and SETTING_CALLS == table.SETTINGS
    assert not table.KEPT & table.SETTINGS


def _record_types() -> dict[str, Any]:
    hints = typing.get_type_hints(GpuRecord)
    return {name: hint for name, hint in hints.items() if name not in NOT_FROM_NVML}


def _matches(v: Any, hint: Any) -> bool:
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    return any(isinstance(v, typing.get_origin(o) or o) for o in options)


@pytest.mark.parametrize("snapshot", sorted(str(p.relative_to(CAPTURED)) for p in CAPTURED.glob("*/snapshot.json")))
def test_a_replayed_capture_gives_each_field_its_declared_type(snapshot: str) -> None:
    dump = json.loads((CAPTURED / snapshot).read_text())
    assert not schema.dump_problems(dump)
    for gpu in facts_from_dump(dump, "replay").gpus:
        for name, hint in _record_types().items():
            got = getattr(gpu, name)
            assert _matches(got, hint), (name, got, hint)
        assert not isinstance(gpu.temperature_c, NA) and not gpu.call_errors


def test_a_reading_older_snapshots_lack_is_not_a_problem_when_missing() -> None:
    dump = json.loads((CAPTURED / "h200-run-2026-11-26" / "snapshot.json").read_text())
    dump["devices"][0].pop("memory_errors", None)
    assert not schema.dump_problems(dump)
    dump["devices"][0].pop("nvmlDeviceGetTemperature")
    assert schema.dump_problems(dump) == ["devices[0].nvmlDeviceGetTemperature: missing"]
