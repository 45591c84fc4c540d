"""A live node check and the monitor loop on the 8-GPU NVML stub: what they start, how fast a hung GPU is named.

Real components throughout: the CLI and the monitor in their own processes loading the
stub ``libnvidia-ml.so.1`` through pynvml, the real ``dmesg``/``fi_info`` behind wrappers
that only log that they were started, the real ``/dev/kmsg`` where this host lets us read
it, and a regular file standing in for it elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.backends import kernel_log as backend
from gpu_preflight.backends.commands import ToolCache
from gpu_preflight.config import build_config
from gpu_preflight.parsers.infiniband import IbDevice, IbDevicesRecord, IbPort
from gpu_preflight.probes.kernel_log import kernel_log_probe
from gpu_preflight.probes.pcie import pcie_probe
from gpu_preflight.probes.shared import KERNEL_LOG_FOLLOWER, once
from gpu_preflight.registry import ProbeContext, ProbeState, RunInputs

from . import fake_sysfs
from .nvml_stub.gpus import widen
from .nvml_stub.stub import stub_env, write_stub_data

SPIED = ("dmesg", "fi_info", "lspci", "journalctl", "ibstat", "ibv_devinfo")
XID79 = "NVRM: Xid (PCI:0000:03:00): 79, pid=0, GPU has fallen off the bus."


def spy_tools(tmp_path: Path) -> tuple[Path, Path]:
    """Wrappers that log their name and run the real tool (or print nothing where there is none)."""
    bindir, log = tmp_path / "spy-bin", tmp_path / "started.log"
    bindir.mkdir()
    for name in SPIED:
        real = shutil.which(name)
        script = bindir / name
        script.write_text(f'#!/bin/sh\necho {name} >> "{log}"\n' + (f'exec {real} "$@"\n' if real else "exit 0\n"))
        script.chmod(0o755)
    return bindir, log


def started(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def efa_sysfs(tmp_path: Path) -> Path:
    record = IbDevicesRecord("sysfs", [IbDevice("rdmap0s6", "efa", "0.0.0", [
        IbPort(1, "ACTIVE", "LINKUP", 100.0, "Unspecified")])])
    return fake_sysfs.build(tmp_path / "sys" / "infiniband", record, driver="efa")


def node_env(stub_lib: Path, tmp_path: Path, dump: dict[str, Any], bindir: Path | None = None,
             **extra: str) -> dict[str, str]:
    data = tmp_path / "nvml.txt"
    write_stub_data(widen(dump), data)
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_")}
    env = stub_env(stub_lib, data, **{**base, **extra})
    if bindir is not None:
        env["PATH"] = f"{bindir}:{env['PATH']}"
    return env


def run_cli(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--no-history", "--format", "json", *args],
                         env=env, capture_output=True, text=True, timeout=120)
    return out, time.monotonic() - t0


def findings(out: subprocess.CompletedProcess[str], check_id: str) -> list[dict[str, Any]]:
    return [f for f in json.loads(out.stdout)["findings"] if f["check_id"] == check_id]


# --- one live node check ----------------------------------------------------------------


def test_node_check_reads_the_kernel_log_once_and_asks_no_fi_info_without_efa(
        stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    bindir, log = spy_tools(tmp_path)
    env = node_env(stub_lib, tmp_path, h200_dump, bindir)
    out, _ = run_cli(env, "--node-only", "--set", f"diagnostics.infiniband_sysfs={tmp_path / 'no-rdma'}")
    assert out.returncode in (0, 1, 2), out.stderr
    tools = started(log)
    # the Xid check and the PCIe "limited by" check share one read: of /dev/kmsg (no process) where
    # it can be read, else of dmesg
    kmsg = os.access("/dev/kmsg", os.R_OK)
    assert tools.count("dmesg") == (0 if kmsg else 1), tools
    assert tools.count("journalctl") <= 1 and "fi_info" not in tools, tools
    (fi_info,) = findings(out, "fabric.fi_info")
    assert (fi_info["status"], fi_info["code"]) == ("SKIP", "not_expected")
    assert "`fi_info -p efa` not run: no EFA device" in fi_info["summary"]
    facts = json.loads(out.stdout)["nodes"]["node_0"]["facts"]
    assert facts["pcie"]["kernel_log_source"] == facts["kernel_log"]["source"]
    assert facts["kernel_log"]["source"] == "/dev/kmsg" or not kmsg
    (nvml,) = findings(out, "gpu.nvml")
    assert nvml["status"] == "PASS" and "8 GPU(s)" in nvml["summary"]


def test_node_with_an_efa_device_still_runs_fi_info(stub_lib: Path, tmp_path: Path,
                                                    h200_dump: dict[str, Any]) -> None:
    bindir, log = spy_tools(tmp_path)
    env = node_env(stub_lib, tmp_path, h200_dump, bindir)
    out, _ = run_cli(env, "--check", "fabric.*", "--set", f"diagnostics.infiniband_sysfs={efa_sysfs(tmp_path)}")
    assert started(log).count("fi_info") == 1
    (fi_info,) = findings(out, "fabric.fi_info")
    assert fi_info["code"] != "not_expected"  # this node has EFA: libfabric's answer is judged


# --- a hung GPU is named within the NVML call deadline -----------------------------------


def test_hung_gpu_is_named_within_the_call_deadline_while_the_others_are_read(
        stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    env = node_env(stub_lib, tmp_path, h200_dump, FAKE_NVML_HANG="3:nvmlDeviceGetTemperature:600")
    out, elapsed = run_cli(env, "--check", "gpu.nvml", "--check", "gpu.thermal", "--timeout-s", "30")
    assert elapsed < 12, elapsed  # 5 s call deadline + start-up; was 24 s (0.8 x --timeout-s)
    (hung,) = findings(out, "gpu.nvml")
    assert (hung["status"], hung["subject"].split("/")[-1]) == ("FAIL", "gpu3")
    assert "nvmlDeviceGetTemperature did not return within 5.0 s" in hung["summary"]
    thermal = {f["subject"].split("/")[-1]: f["status"] for f in findings(out, "gpu.thermal")}
    assert thermal == {f"gpu{i}": "SKIP" if i == 3 else "PASS" for i in range(8)}  # the others were read


def test_call_deadline_is_a_setting(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    env = node_env(stub_lib, tmp_path, h200_dump, FAKE_NVML_HANG="0:nvmlDeviceGetPowerUsage:600")
    out, elapsed = run_cli(env, "--check", "gpu.nvml", "--set", "gpu.nvml_call_timeout_s=1")
    assert elapsed < 8, elapsed
    (hung,) = [f for f in findings(out, "gpu.nvml") if f["status"] == "FAIL"]
    assert hung["subject"].endswith("gpu0") and "within 1.0 s" in hung["summary"]
    bad, _ = run_cli(env, "--check", "gpu.nvml", "--set", "gpu.nvml_call_timeout_s=0")
    assert bad.returncode == 3 and "nvml_call_timeout_s" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


COLLECT = """
import json, sys, time
from gpu_preflight.backends.nvml import collect
t0 = time.monotonic()
dump = collect(device_timeout_s=30, call_timeout_s=float(sys.argv[1]))
print(json.dumps({"elapsed": time.monotonic() - t0, "devices": dump["devices"]}), flush=True)
import os; os._exit(0)
"""


def test_slow_calls_under_the_deadline_are_not_a_hang(stub_lib: Path, tmp_path: Path,
                                                       h200_dump: dict[str, Any]) -> None:
    """The deadline is per call: a GPU whose calls each answer in time is read whole, however long in all."""
    env = node_env(stub_lib, tmp_path, h200_dump, FAKE_NVML_SLOW="0:nvmlDeviceGetTemperature:0.6,"
                   "0:nvmlDeviceGetPowerUsage:0.6", FAKE_NVML_HANG="5:nvmlDeviceGetUtilizationRates:600")
    proc = subprocess.run([sys.executable, "-c", COLLECT, "1"], env=env, capture_output=True, text=True, timeout=60)
    out = json.loads(proc.stdout)
    slow, hung = out["devices"][0], out["devices"][5]
    assert "timed_out" not in slow and "field_values" in slow  # 1.2 s in all, no call over 1 s
    assert hung["timed_out"] == {"call": "nvmlDeviceGetUtilizationRates", "after_s": 1.0}
    assert all("timed_out" not in d and "field_values" in d for i, d in enumerate(out["devices"]) if i != 5)
    assert out["elapsed"] < 5


SESSION = """
import json, sys
from gpu_preflight.backends.nvml import NvmlSession, collect
session = NvmlSession()
rows = []
for _ in range(3):
    dump = collect(device_timeout_s=30, call_timeout_s=5, session=session)
    rows.append([session.inits, session.is_open, len(dump["devices"]), dump["init_s"] > 0,
                 "nvmlDeviceGetName" in dump["devices"][-1]])
session.close()
rows.append([session.inits, session.is_open])
print(json.dumps(rows))
"""


def test_nvml_session_initialises_once_and_starts_afresh_after_a_lost_gpu(
        stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    env = node_env(stub_lib, tmp_path, h200_dump)
    healthy = json.loads(subprocess.run([sys.executable, "-c", SESSION], env=env, capture_output=True, text=True,
                                        timeout=60, check=True).stdout)
    assert healthy == [[1, True, 8, True, True], [1, True, 8, False, True], [1, True, 8, False, True], [1, False]]
    write_stub_data(widen(h200_dump), tmp_path / "nvml.txt", lost_devices=[2], lost_at_handle=False)
    lost = json.loads(subprocess.run([sys.executable, "-c", SESSION], env=env, capture_output=True, text=True,
                                     timeout=60, check=True).stdout)
    assert [row[:2] for row in lost] == [[1, False], [2, False], [3, False], [3, False]]  # a lost GPU: init per read


# --- the monitor loop: no process per tick ------------------------------------------------


MONITOR = """
import json, os, sys
from gpu_preflight.engine import RunOptions
from gpu_preflight.server.monitor import Monitor
log = sys.argv[2]
m = Monitor(RunOptions(overrides=[f"diagnostics.infiniband_sysfs={sys.argv[1]}"], probe_timeout_s=20), 1.0)
after = []
for _ in range(4):
    snap = m.tick()
    after.append(open(log).read().split() if os.path.exists(log) else [])
facts = snap.report.facts
kernel_log = facts["kernel_log"]
session = m.options.state["nvml_session"]
inits, was_open = session.inits, session.is_open
m.stop()
slow = Monitor(RunOptions(), 60.0)
print(json.dumps({"after": after, "kernel_log": kernel_log["source"], "available": kernel_log["available"],
                  "nvml": [inits, was_open, session.is_open], "slow": sorted(slow.options.state)}))
"""


def test_monitor_starts_no_process_after_its_first_tick(stub_lib: Path, tmp_path: Path,
                                                        h200_dump: dict[str, Any]) -> None:
    bindir, log = spy_tools(tmp_path)
    env = node_env(stub_lib, tmp_path, h200_dump, bindir)
    proc = subprocess.run([sys.executable, "-c", MONITOR, str(efa_sysfs(tmp_path)), str(log)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    first, *later = out["after"]
    assert first.count("fi_info") == 1  # an EFA node: the tool runs, once
    assert all(ticks == first for ticks in later), out["after"]
    if os.access(backend.KMSG_PATH, os.R_OK):
        assert out["kernel_log"] == backend.KMSG_PATH and "dmesg" not in first
    assert out["available"] is True
    assert out["nvml"] == [1, True, False]  # one nvmlInit for four ticks, released when the monitor stops
    # at 60 s: NVML let go per tick
    assert out["slow"] == ["config_cache", "fabric_cache", "host_sampler", "kernel_log_follower",
                           "nvml_dump_on_demand", "process_scan", "tool_cache"]


# --- the kernel-log follower ---------------------------------------------------------------


def kmsg_record(text: str, ago: timedelta = timedelta(minutes=1)) -> str:
    boot = backend.read_boot_time()
    assert boot is not None
    usec = int((datetime.now(UTC) - ago - boot).total_seconds() * 1e6)
    return f"4,{usec % 100000},{usec},-;{text}\n"


def test_follower_reads_the_whole_log_once_then_only_what_is_new(tmp_path: Path) -> None:
    kmsg = tmp_path / "kmsg"
    kmsg.write_text(kmsg_record("Linux version 6.8") + kmsg_record(XID79) + kmsg_record("eth0: link up"))
    follower = backend.KmsgFollower(path=str(kmsg))
    first = follower.poll()
    assert first.source == str(kmsg) and follower.following
    assert [line.split(";", 1)[1] for line in first.text.splitlines()] == [XID79]
    assert follower.records_read == 3
    assert follower.poll().text == first.text and follower.records_read == 3  # nothing new, nothing re-read
    with kmsg.open("a") as f:
        f.write(kmsg_record("pcieport 0000:00:01.0: 63.008 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe "
                            "x8 link") + kmsg_record("usb 1-1: new device"))
    third = follower.poll()
    assert follower.records_read == 5 and len(third.text.splitlines()) == 2
    assert "limited by" in third.text.splitlines()[1]


def test_follower_feeds_the_xid_count_and_the_pcie_probe_from_one_poll(tmp_path: Path) -> None:
    kmsg = tmp_path / "kmsg"
    kmsg.write_text(kmsg_record("Linux version 6.8") + kmsg_record(XID79))
    follower = backend.KmsgFollower(path=str(kmsg))
    config, _ = build_config(overrides=["diagnostics.infiniband_sysfs=/nonexistent"])

    def tick() -> tuple[int, int]:
        state = ProbeState(kept={KERNEL_LOG_FOLLOWER: follower})  # one run: both probes share its state
        facts = kernel_log_probe(ProbeContext(config, RunInputs(), 30.0, state))
        pcie = pcie_probe(ProbeContext(config, RunInputs(), 30.0, state))
        assert facts.available and facts.tally is not None and pcie.kernel_log_source == str(kmsg)
        return facts.tally.events, follower.polls

    assert tick() == (1, 1)
    with kmsg.open("a") as f:
        f.write(kmsg_record(XID79.replace("03:00", "04:00"), ago=timedelta(seconds=5)))
    assert tick() == (2, 2)  # one poll per run, shared by both probes


@pytest.mark.skipif(not (os.access(backend.KMSG_PATH, os.R_OK) and os.access(backend.KMSG_PATH, os.W_OK)),
                    reason="/dev/kmsg not readable and writable here (root outside a container)")
def test_follower_on_the_real_kmsg_sees_a_new_record_without_rereading() -> None:
    marker = f"gpu-preflight follower test {uuid.uuid4()}"
    follower = backend.KmsgFollower(keep=lambda line: marker in line)
    try:
        assert follower.poll().text == "" and follower.following
        before = follower.records_read
        with open(backend.KMSG_PATH, "w") as kmsg:
            kmsg.write(f"{marker}\n")
        got = follower.poll()
        assert marker in got.text and got.source == backend.KMSG_PATH
        assert follower.records_read - before < 50  # what was new, not the whole buffer again
    finally:
        follower.close()


def test_follower_falls_back_to_a_periodic_read_and_says_so(tmp_path: Path) -> None:
    clock = [0.0]
    reads: list[float] = []

    def reader(timeout_s: float) -> backend.KernelLog:
        reads.append(clock[0])
        return backend.KernelLog("dmesg", f"[  1.0] boot\n[  2.0] {XID79}\n", None)

    follower = backend.KmsgFollower(60.0, path=str(tmp_path), reader=reader, clock=lambda: clock[0])
    log = follower.poll()
    assert not follower.following and log.text.endswith(XID79)
    assert log.source == f"dmesg, re-read every 60 s ({tmp_path}: Is a directory)"
    clock[0] = 59.0
    follower.poll()
    clock[0] = 60.0
    follower.poll()
    assert reads == [0.0, 60.0]


def test_follower_with_no_source_names_every_reason(tmp_path: Path) -> None:
    def reader(timeout_s: float) -> backend.KernelLog:
        raise backend.KernelLogUnavailable(["dmesg: not installed", "journalctl: not installed"])

    follower = backend.KmsgFollower(path=str(tmp_path / "missing"), reader=reader)
    with pytest.raises(backend.KernelLogUnavailable) as info:
        follower.poll()
    assert info.value.failures == (f"{tmp_path / 'missing'}: not present", "dmesg: not installed",
                                   "journalctl: not installed")


def test_once_shares_a_result_and_a_failure() -> None:
    options = ProbeState()
    calls: list[int] = []

    def answer(value: int) -> int:
        calls.append(value)
        return value

    assert once(options, "a", lambda: answer(7)) == 7
    assert once(options, "a", lambda: answer(8)) == 7 and calls == [7]

    def fail() -> int:
        calls.append(3)
        raise backend.KernelLogUnavailable("dmesg: no kernel messages")

    for _ in range(2):
        with pytest.raises(backend.KernelLogUnavailable, match="no kernel messages"):
            once(options, "b", fail)
    assert calls == [7, 3]


def test_tool_cache_reruns_a_tool_only_when_its_answer_is_old(tmp_path: Path) -> None:
    count = tmp_path / "count"
    tool = tmp_path / "tool"
    tool.write_text(f'#!/bin/sh\necho run >> "{count}"\necho "answer $1"\n')
    tool.chmod(0o755)
    clock = [0.0]
    cache = ToolCache(300.0, clock=lambda: clock[0])
    first = cache.run([str(tool), "x"], 5.0)
    clock[0] = 299.0
    again = cache.run([str(tool), "x"], 5.0)
    other = cache.run([str(tool), "y"], 5.0)
    clock[0] = 600.0
    fresh = cache.run([str(tool), "x"], 5.0)
    assert again is first and first.stdout == "answer x\n" and other.stdout == "answer y\n"
    assert fresh is not first and count.read_text().split() == ["run"] * 3
    assert (cache.runs, cache.hits) == (3, 1)
    missing = cache.run(["no-such-tool-here"], 5.0)
    assert missing.missing and cache.run(["no-such-tool-here"], 5.0) is missing
