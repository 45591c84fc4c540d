"""Damaged replay dumps never pass: a seeded generator of mutations over the captured H200 dump.

Each mutation (delete a key, a wrong type, a negative number, ``null``, a GPU count that
does not match the devices, an NVML error in place of a value) must end in one of:

- the dump is refused (:class:`ReplayError` naming the key: the run exits 3, or every
  GPU check is ERROR when called as a library);
- the run's worst status is WARN, FAIL or ERROR (the undamaged dump's is SKIP, since it
  holds no kernel log, so SKIP counts as "passed" here);
- the mutation is *provably harmless*: the GPU facts built from the mutated dump equal
  those built from the original. Checks are pure functions of facts and config, so a
  mutation that leaves the facts unchanged (a key no check reads, such as the InfoROM
  version) cannot change any verdict.

A benign refusal (NotSupported, which older GPUs answer) is not damage and is not
generated: it is a valid reading that a check SKIPs.
"""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight import run_checks
from gpu_preflight.model import Status, jsonable
from gpu_preflight.probes.gpu import ReplayError, facts_from_dump, load_dump

CAPTURED = Path(__file__).parent / "fixtures" / "captured" / "h200-run-2026-11-26" / "snapshot.json"
SEED = 20261126
MUTATIONS = 400
UNKNOWN_ERROR = {"error": "NVMLError_Unknown", "value": 999, "str": "Unknown Error"}
GPU_LOST = {"error": "NVMLError_GpuIsLost", "value": 15, "str": "GPU is lost"}
WRONG_TYPES: tuple[Any, ...] = ("garbage", [], {}, True, 1.5, [1, "x"])

Dump = dict[str, Any]
Path_ = tuple[Any, ...]


def original() -> Dump:
    data: Dump = json.loads(CAPTURED.read_text())
    return data


def leaves(node: Any, at: Path_ = ()) -> Iterator[Path_]:
    """Every key path below ``system`` and ``devices`` (objects and their members)."""
    if isinstance(node, dict):
        for key, child in node.items():
            yield (*at, key)
            yield from leaves(child, (*at, key))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            yield (*at, i)
            yield from leaves(child, (*at, i))


def parent(dump: Dump, path: Path_) -> Any:
    node: Any = dump
    for key in path[:-1]:
        node = node[key]
    return node


def mutate(dump: Dump, rng: random.Random) -> str:
    """Apply one random damage to ``dump``; return its description."""
    kind = rng.choice(("delete", "wrong_type", "negative", "null", "count", "error", "device"))
    if kind == "count":
        count = dump["system"]["nvmlDeviceGetCount"]
        choice = rng.choice(("plus", "minus", "error", "missing"))
        if choice == "error":
            dump["system"]["nvmlDeviceGetCount"] = dict(UNKNOWN_ERROR)
        elif choice == "missing":
            del dump["system"]["nvmlDeviceGetCount"]
        else:
            count["ok"] += 1 if choice == "plus" else -1
        return f"count {choice}"
    if kind == "device":
        extra = rng.choice(({}, {"nvmlDeviceGetName": {"ok": "NVIDIA H200"}}, copy.deepcopy(dump["devices"][0])))
        dump["devices"].append(extra)
        if rng.random() < 0.5:
            dump["system"]["nvmlDeviceGetCount"] = {"ok": len(dump["devices"])}
        return f"device {len(extra)} keys"
    paths = [p for p in leaves({"system": dump["system"], "devices": dump["devices"]})]
    if kind == "negative":
        paths = [p for p in paths if isinstance(parent(dump, p)[p[-1]], int)
                 and not isinstance(parent(dump, p)[p[-1]], bool)]
    if kind == "error":
        paths = [p for p in paths if isinstance(parent(dump, p)[p[-1]], dict) and "ok" in parent(dump, p)[p[-1]]]
    path = rng.choice(paths)
    holder = parent(dump, path)
    if kind == "delete":
        del holder[path[-1]]  # a list index: the element goes, like a lost array entry
    elif kind == "wrong_type":
        holder[path[-1]] = rng.choice([w for w in WRONG_TYPES if type(w) is not type(holder[path[-1]])])
    elif kind == "negative":
        holder[path[-1]] = -rng.choice((1, 5, 2**31))
    elif kind == "null":
        holder[path[-1]] = None
    else:
        holder[path[-1]] = dict(rng.choice((UNKNOWN_ERROR, GPU_LOST)))
    return f"{kind} {'.'.join(map(str, path))}"


def facts_json(dump: Dump) -> Any:
    return jsonable(facts_from_dump(dump, source="replay:x"))


def worst_status(path: Path) -> Status:
    node = run_checks(replay=str(path), include=["gpu.*"], environ={})
    return Status.worst(f.status for f in node.findings)


def test_no_damaged_dump_passes(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    baseline = facts_json(original())
    outcomes = {"refused": 0, "not_pass": 0, "harmless": 0}
    passed: list[str] = []
    for i in range(MUTATIONS):
        dump = original()
        what = mutate(dump, rng)
        path = tmp_path / f"m{i}.json"
        path.write_text(json.dumps(dump))
        try:
            load_dump(path)
        except ReplayError as exc:
            assert "damaged NVML dump" in str(exc) or "not an" in str(exc) or "is not an object" in str(exc), exc
            outcomes["refused"] += 1
            continue
        if facts_json(dump) == baseline:
            outcomes["harmless"] += 1
            continue
        status = worst_status(path)
        if status not in (Status.WARN, Status.FAIL, Status.ERROR):
            passed.append(f"{what}: {status.value}")
        else:
            outcomes["not_pass"] += 1
    assert not passed, passed
    assert outcomes["refused"] > MUTATIONS // 3 and outcomes["not_pass"] > 0, outcomes


def dump_with_two_gpus() -> Dump:
    dump = original()
    second = copy.deepcopy(dump["devices"][0])
    second["nvmlDeviceGetIndex"] = {"ok": 1}
    dump["devices"].append(second)
    dump["system"]["nvmlDeviceGetCount"] = {"ok": 2}
    return dump


def _set(path: Path_, value: Any) -> Callable[[Dump], None]:
    def edit(dump: Dump) -> None:
        parent(dump, path)[path[-1]] = value
    return edit


@pytest.mark.parametrize(("edit", "key"), [
    (_set(("devices", 1), {}), "devices[1].nvmlDeviceGetIndex"),
    (_set(("devices", 0, "ecc_total", "volatile_uncorrected", "ok"), -1), "devices[0].ecc_total.volatile_uncorrected"),
    (_set(("devices", 0, "nvmlDeviceGetTemperature", "ok"), None), "devices[0].nvmlDeviceGetTemperature"),
    (_set(("devices", 0, "nvmlDeviceGetRemappedRows", "ok"), "garbage"), "devices[0].nvmlDeviceGetRemappedRows"),
    (_set(("system", "nvmlDeviceGetCount"), {"ok": 3}), "3 GPU(s) announced but 2 described"),
    (_set(("system", "nvmlDeviceGetCount"), dict(UNKNOWN_ERROR)), "system.nvmlDeviceGetCount: no GPU count"),
])
def test_the_reported_damages_are_refused_naming_the_key(tmp_path: Path, edit: Callable[[Dump], None],
                                                          key: str) -> None:
    dump = dump_with_two_gpus()
    edit(dump)
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(dump))
    with pytest.raises(ReplayError, match="damaged NVML dump") as info:
        load_dump(path)
    assert key in str(info.value)
    assert worst_status(path) is Status.ERROR


def test_a_damaged_dump_is_one_line_and_exit_3(tmp_path: Path) -> None:
    dump = dump_with_two_gpus()
    dump["devices"][1] = {}
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(dump))
    proc = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--replay", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 3, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "devices[1]" in proc.stderr


def test_captured_dumps_and_a_timed_out_partial_gpu_still_replay(tmp_path: Path) -> None:
    for name in ("h200-580.159.04/nvml_capture.json", "h200-run-2026-11-26/snapshot.json",
                 "h200-run-2026-11-26b/snapshot.json"):
        load_dump(CAPTURED.parents[1] / name)
    dump = original()
    partial = {k: v for k, v in dump["devices"][0].items() if k in ("nvmlDeviceGetName", "nvmlDeviceGetUUID")}
    dump["devices"][0] = {**partial, "timed_out": {"call": "nvmlDeviceGetSerial", "after_s": 8.0}}
    path = tmp_path / "partial.json"
    path.write_text(json.dumps(dump))
    load_dump(path)
    assert worst_status(path) is Status.FAIL  # gpu.nvml: the GPU hung NVML
