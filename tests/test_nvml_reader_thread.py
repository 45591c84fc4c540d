"""An NVML session reads its GPUs on one kept thread; a read stuck in the driver hands over
to a fresh thread, and the kept one serves again once its call returns."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from gpu_preflight.kept_thread import KeptThread as _KeptThread

from .nvml_stub.gpus import widen
from .nvml_stub.stub import stub_env, write_stub_data

READS = """
import json, sys, threading, time
from gpu_preflight.backends.nvml import NvmlSession, collect
session = NvmlSession()
rows = []
for pause in [float(p) for p in sys.argv[1:]]:
    t0 = time.monotonic()
    dump = collect(device_timeout_s=30, call_timeout_s=0.5, session=session)
    readers = sorted(t.ident for t in threading.enumerate() if t.name == "nvml-read")
    rows.append({"elapsed": time.monotonic() - t0, "readers": readers,
                 "hung": [i for i, d in enumerate(dump["devices"]) if "timed_out" in d],
                 "read": [i for i, d in enumerate(dump["devices"]) if "field_values" in d]})
    time.sleep(pause)
print(json.dumps(rows))
"""


def reads(stub_lib: Path, tmp_path: Path, dump: dict[str, Any], *pauses: float, **extra: str) -> Any:
    data = tmp_path / "nvml.txt"
    write_stub_data(dump, data)
    proc = subprocess.run([sys.executable, "-c", READS, *map(str, pauses)], env=stub_env(stub_lib, data, **extra),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_session_reads_every_tick_on_one_kept_thread(stub_lib: Path, tmp_path: Path,
                                                        h200_dump: dict[str, Any]) -> None:
    rows = reads(stub_lib, tmp_path, widen(h200_dump), 0, 0, 0, 0)
    assert all(r["read"] == list(range(8)) and r["hung"] == [] for r in rows)
    assert len(rows[0]["readers"]) == 1 and all(r["readers"] == rows[0]["readers"] for r in rows)


def test_a_stuck_reader_hands_over_and_serves_again_once_its_call_returns(
        stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    rows = reads(stub_lib, tmp_path, widen(h200_dump), 0, 2.5, 0, FAKE_NVML_HANG="5:nvmlDeviceGetRemappedRows:2")
    for r in rows:  # named at each read's call deadline, the other seven read
        assert r["hung"] == [5] and r["read"] == [0, 1, 2, 3, 4, 6, 7] and r["elapsed"] < 1.8
    first, second, third = (set(r["readers"]) for r in rows)
    kept = first & second & third
    assert len(kept) == 1  # stuck on GPU 5 after the first read, reading again after the third
    assert len(second - kept) >= 1  # still stuck at the second: a fresh thread read (and hung on GPU 5)
    assert not (second - kept) & third  # that one's call returned meanwhile and it ended


def test_a_job_that_raises_ends_the_thread_and_the_next_job_runs() -> None:
    kept = _KeptThread("t-kept", idle_s=5.0)
    ran = threading.Event()
    seen: list[BaseException | None] = []

    def hook(args: Any) -> None:
        seen.append(args.exc_value)

    def fails() -> None:
        raise ZeroDivisionError("a reader's bug")

    old_hook, threading.excepthook = threading.excepthook, hook
    try:
        assert kept.submit(fails)
        deadline = time.monotonic() + 5.0
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)
        assert kept.submit(ran.set)
        assert ran.wait(5.0)
    finally:
        threading.excepthook = old_hook
    assert isinstance(seen[0], ZeroDivisionError)


def test_a_busy_thread_refuses_the_next_job() -> None:
    kept = _KeptThread("t-busy", idle_s=5.0)
    release, done = threading.Event(), threading.Event()

    def stuck() -> None:
        release.wait(10.0)

    assert kept.submit(stuck)
    assert not kept.submit(done.set)  # the caller starts its own thread instead
    release.set()
    deadline = time.monotonic() + 5.0
    while not kept.submit(done.set) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert done.wait(5.0)
