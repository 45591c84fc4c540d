"""Under load: the NVML sampler through the real pynvml (stub library playing series), its
summary, and the load.* checks on series — faults each caught and named, a healthy series and
the real H100 recording passing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gpu_preflight.backends.nvml_sampler import LoadRecord, summarize
from gpu_preflight.cluster.aggregate import cluster_facts
from gpu_preflight.config import Config, build_config, find_profile
from gpu_preflight.config.load import LoadConfig
from gpu_preflight.model import Finding, Status
from gpu_preflight.registry import CheckContext, get_check

from .nvml_stub.stub import stub_env, write_stub_data

SRC = Path(__file__).resolve().parents[1] / "src"
H100 = Path(__file__).parent / "fixtures" / "captured" / "h100-run-2026-11-26"
HW_SLOWDOWN, SW_POWER_CAP, SW_THERMAL = 0x8, 0x4, 0x20

SAMPLE = """
import json, sys, pynvml
from gpu_preflight.backends.nvml_sampler import LoadSampler, summarize
pynvml.nvmlInit()
s = LoadSampler(pynvml, pynvml.nvmlDeviceGetHandleByIndex(0), "gpu0", hz=10)
for phase, n in json.loads(sys.argv[1]):
    s.mark(phase)
    for _ in range(n):
        s.sample_once()
print(json.dumps(summarize(s.stop())))
"""


def sampled(stub_lib: Path, tmp_path: Path, dump: dict[str, Any], phases: list[tuple[str, int]],
            series: dict[str, list[Any]]) -> dict[str, Any]:
    """Play ``series`` (stub key → one answer per tick) through the real pynvml and the sampler."""
    data = tmp_path / "nvml.txt"
    write_stub_data(dump, data, series={(0, key): answers for key, answers in series.items()})
    proc = subprocess.run([sys.executable, "-c", SAMPLE, json.dumps(phases)], capture_output=True, text=True,
                          env=stub_env(stub_lib, data, PYTHONPATH=str(SRC)), timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    summary: dict[str, Any] = json.loads(proc.stdout)
    return summary


def healthy(n: int) -> dict[str, list[Any]]:
    """A power-capped GEMM as the H100 showed it: ~1400 MHz, ~690 W of 700, 60-70 C, SW power cap."""
    return {"nvmlDeviceGetClockInfo/1": [1400] * n, "nvmlDeviceGetPowerUsage": [690_000] * n,
            "nvmlDeviceGetTemperature/0": [60 + i % 10 for i in range(n)],
            "nvmlDeviceGetCurrentClocksEventReasons": [SW_POWER_CAP] * n,
            "nvmlDeviceGetUtilizationRates": [(100, 60)] * n}


def limits(dump: dict[str, Any]) -> dict[str, Any]:
    """The dump's power limit and slowdown threshold, as the sampler reads them."""
    dev = dump["devices"][0]
    dev["nvmlDeviceGetEnforcedPowerLimit"] = {"ok": 700_000}
    return dump


def load_facts(loads: dict[tuple[int, int], dict[str, Any]], nodes: int = 1, per_node: int = 1) -> Any:
    payloads = {}
    for (node, local), load in loads.items():
        rank = node * per_node + local
        payloads[rank] = {"rank": rank, "node_rank": node, "local_rank": local, "hostname": f"h{node}",
                          "device": f"cuda:{local}", "errors": [], "load": load}
    return cluster_facts({"payloads": payloads, "missing": {},
                          "topology": {"world_size": nodes * per_node, "num_nodes": nodes,
                                       "local_world_size": per_node, "hosts": [f"h{i}" for i in range(nodes)]}})


def judge(check_id: str, facts: Any, **settings: Any) -> list[Finding]:
    config = Config(load=LoadConfig(**settings))
    return list(get_check(check_id).fn(CheckContext(host="cluster", facts={"cluster": facts}, config=config)))


def outcome(findings: list[Finding]) -> list[tuple[Status, str, str]]:
    return [(f.status, f.subject, f.code) for f in findings]


def test_sampler_reads_each_tick_through_pynvml_and_files_it_under_its_phase(
        stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    series = healthy(30)
    series["nvmlDeviceGetClockInfo/1"] = [345] * 5 + [1980, 1500] + [1400] * 23
    summary = sampled(stub_lib, tmp_path, limits(h200_dump), [("idle", 5), ("gemm_bf16", 20), ("memory", 5)],
                      series)
    assert summary["samples"] == 30 and summary["phase_names"] == ["idle", "gemm_bf16", "memory"]
    gemm = summary["phases"]["gemm_bf16"]
    assert gemm["n"] == 20 and gemm["sm_mhz"] == {"min": 1400.0, "median": 1400.0, "max": 1980.0}
    assert summary["phases"]["idle"]["sm_mhz"]["max"] == 345.0
    assert gemm["reason_share"] == {"0x4": 1.0}
    assert gemm["power_w"]["max"] == 690.0 and gemm["power_max_fraction"] == pytest.approx(690 / 700, abs=1e-4)
    assert summary["static"]["power_limit_w"] == 700.0 and summary["static"]["temp_slowdown_c"] is not None
    assert len(summary["series"]["t"]) == 30 and summary["series"]["phase"][:6] == [0, 0, 0, 0, 0, 1]


def test_hw_slowdown_halfway_through_gemm_fails_and_names_the_gpu(
        stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    series = healthy(20)
    series["nvmlDeviceGetCurrentClocksEventReasons"] = [SW_POWER_CAP] * 10 + [SW_POWER_CAP | HW_SLOWDOWN] * 10
    series["nvmlDeviceGetClockInfo/1"] = [1400] * 10 + [600] * 10
    load = sampled(stub_lib, tmp_path, limits(h200_dump), [("gemm_bf16", 20)], series)
    [f] = judge("load.clocks", load_facts({(0, 0): load}))
    assert (f.status, f.subject, f.code) == (Status.FAIL, "h0/gpu0", "hw_slowdown")
    assert "50% of gemm_bf16" in f.summary and f.observed == 0.5 and f.recommendation


def test_power_that_never_passes_sixty_percent_of_the_limit_warns(
        stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    series = healthy(20)
    series["nvmlDeviceGetPowerUsage"] = [300_000 + 5_000 * i for i in range(20)]  # peaks at 395 W of 700
    load = sampled(stub_lib, tmp_path, limits(h200_dump), [("gemm_bf16", 20)], series)
    [f] = judge("load.power", load_facts({(0, 0): load}))
    assert (f.status, f.code) == (Status.WARN, "power_low") and f.observed == pytest.approx(395 / 700, abs=1e-3)
    assert "56% of its 700.0 W limit (gemm_bf16)" in f.summary


def test_temperature_climbing_into_the_margin_warns_and_past_the_limit_fails(
        stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    slowdown = h200_dump["devices"][0]["temp_thresholds"]["1"]["ok"]
    series = healthy(20)
    series["nvmlDeviceGetTemperature/0"] = [60 + (slowdown - 3 - 60) * i // 19 for i in range(20)]
    load = sampled(stub_lib, tmp_path, limits(h200_dump), [("gemm_bf16", 20)], series)
    [f] = judge("load.thermal", load_facts({(0, 0): load}))
    assert (f.status, f.code, f.observed) == (Status.WARN, "near_limit", slowdown - 3)
    assert "3 C below its limit" in f.summary
    [hot] = judge("load.thermal", load_facts({(0, 0): load}), temp_margin_c=2.0)
    assert hot.status is Status.PASS
    load["phases"]["gemm_bf16"]["temp_c"]["max"] = slowdown
    [at] = judge("load.thermal", load_facts({(0, 0): load}))
    assert (at.status, at.code) == (Status.FAIL, "at_limit")


def synthetic(sm: float, power: float = 690.0, reasons: dict[str, float] | None = None, n: int = 20,
              phase: str = "gemm_bf16", temp: float = 65.0) -> dict[str, Any]:
    """A summary as the sampler gives it, for rules at their boundaries."""
    return {"gpu": "gpu", "static": {"power_limit_w": 700.0, "temp_slowdown_c": 90, "temp_mem_max_c": 95},
            "phases": {phase: {"n": n, "seconds": n / 10, "sm_mhz": {"min": sm, "median": sm, "max": sm},
                               "power_w": {"min": power, "median": power, "max": power},
                               "temp_c": {"min": temp, "median": temp, "max": temp},
                               "reason_share": reasons or {"0x4": 1.0}, "power_max_fraction": power / 700.0}},
            "series": {}, "errors": {}, "lost": None, "ecc_delta": {"volatile_uncorrected": 0}}


def test_a_peer_with_fifteen_percent_lower_clocks_is_named() -> None:
    loads = {(0, i): synthetic(1400.0) for i in range(8)}
    loads[(0, 5)] = synthetic(1190.0)  # 15 % below
    findings = judge("load.peers", load_facts(loads, per_node=8))
    warns = [f for f in findings if f.status is Status.WARN]
    assert [(f.subject, f.code) for f in warns] == [("h0/gpu5", "sm_below_peers")]
    assert "15% below its 7 peer(s)" in warns[0].summary and "gemm_bf16" in warns[0].summary
    assert sum(f.status is Status.PASS for f in findings) == 7


@pytest.mark.parametrize("share, status", [(0.0, Status.PASS), (0.05, Status.WARN), (0.051, Status.FAIL)])
def test_hw_reason_share_boundary(share: float, status: Status) -> None:
    reasons = {"0x4": 1.0, "0x40": share} if share else None
    [f] = judge("load.clocks", load_facts({(0, 0): synthetic(1400.0, reasons=reasons)}))
    assert f.status is status


@pytest.mark.parametrize("sm, status", [(1400.0, Status.PASS), (1190.0, Status.PASS), (1189.0, Status.WARN),
                                        (910.0, Status.WARN), (909.0, Status.FAIL)])
def test_gemm_clock_against_the_profile_boundary(sm: float, status: Status) -> None:
    [f] = judge("load.clocks", load_facts({(0, 0): synthetic(sm)}), expected_gemm_sm_mhz=1400.0)
    assert f.status is status  # warn below 1190 (15 %), fail below 910 (35 %)


@pytest.mark.parametrize("watts, status", [(420.0, Status.PASS), (419.0, Status.WARN)])
def test_power_fraction_boundary(watts: float, status: Status) -> None:
    [f] = judge("load.power", load_facts({(0, 0): synthetic(1400.0, power=watts)}))
    assert f.status is status


def test_short_phases_idle_and_cpu_workers_are_not_judged() -> None:
    [short] = judge("load.clocks", load_facts({(0, 0): synthetic(500.0, reasons={"0x8": 1.0}, n=2)}))
    assert (short.status, short.code) == (Status.SKIP, "too_short")
    idle = synthetic(345.0, phase="idle", reasons={"0x1": 1.0})
    assert judge("load.power", load_facts({(0, 0): idle}))[0].code == "no_gemm_phase"
    cpu = cluster_facts({"payloads": {0: {"rank": 0, "node_rank": 0, "local_rank": 0, "device": "cpu"}},
                         "missing": {}, "topology": {"world_size": 1, "num_nodes": 1, "local_world_size": 1,
                                                     "hosts": ["h0"]}})
    for check_id in ("load.clocks", "load.thermal", "load.power", "load.peers", "load.ecc"):
        [f] = judge(check_id, cpu)
        assert (f.status, f.code) == (Status.SKIP, "no_series") and "CPU workers" in f.summary


def test_a_gpu_rank_whose_sampler_failed_is_an_error_not_a_pass() -> None:
    facts = cluster_facts({"payloads": {0: {"rank": 0, "node_rank": 0, "local_rank": 0, "device": "cuda:0",
                                            "load_error": "NVMLError_Uninitialized"}}, "missing": {},
                           "topology": {"world_size": 1, "num_nodes": 1, "local_world_size": 1, "hosts": ["h0"]}})
    [f] = judge("load.clocks", facts)
    assert (f.status, f.code) == (Status.ERROR, "not_sampled")


def test_lost_gpu_and_uncorrectable_ecc_under_load_fail() -> None:
    lost = synthetic(1400.0)
    lost["lost"] = "NVML: GPU is lost"
    assert outcome(judge("load.clocks", load_facts({(0, 0): lost})))[0] == (Status.FAIL, "h0/gpu0", "lost_under_load")
    ecc = synthetic(1400.0)
    ecc["ecc_delta"] = {"volatile_uncorrected": 2, "volatile_corrected": 5}
    assert outcome(judge("load.ecc", load_facts({(0, 0): ecc}))) == [(Status.FAIL, "h0/gpu0",
                                                                       "uncorrectable_under_load")]


def h100_record() -> LoadRecord:
    """The real H100 recording (10 Hz, marked phases) as the sampler's record."""
    raw = json.loads((H100 / "load_series.json").read_text())
    samples, static = raw["samples"][0], raw["gpus"][0]
    rec = LoadRecord(gpu="gpu0", static={"power_limit_w": static["power_limit_mw"] / 1000,
                                         "temp_slowdown_c": static["temp_slowdown_c"],
                                         "temp_mem_max_c": static["temp_mem_max_c"],
                                         "max_sm_mhz": static["max_sm_mhz"]})
    t0 = samples[0]["t"]
    for s in samples:
        if s["phase"] not in rec.phases:
            rec.phases.append(s["phase"])
        rec.t.append(round(s["t"] - t0, 3))
        rec.phase.append(rec.phases.index(s["phase"]))
        for key, src in (("sm_mhz", "sm_mhz"), ("mem_mhz", "mem_mhz"), ("temp_c", "temp_c"),
                         ("mem_temp_c", "mem_temp_c"), ("reasons", "event_reasons"), ("util_gpu", "util_gpu")):
            value = s.get(src)
            rec.columns[key].append(value if isinstance(value, (int, float)) else None)
        rec.columns["power_w"].append(s["power_mw"] / 1000 if isinstance(s.get("power_mw"), int) else None)
    rec.ecc_before = rec.ecc_after = {"volatile_uncorrected": 0}
    return rec


def test_the_real_h100_under_gemm_passes_every_load_check() -> None:
    """Power-capped at 700 W with the SM clock at ~1.4 GHz and SW power cap set: healthy, not throttled."""
    summary = summarize(h100_record())
    gemm = summary["phases"]["gemm_bf16"]
    assert gemm["reason_share"]["0x4"] > 0.9 and gemm["power_max_fraction"] > 1.0
    assert 1300 <= gemm["sm_mhz"]["median"] <= 1450
    facts = load_facts({(0, 0): summary})
    profile = build_config(profile=find_profile("h100-sxm"))[0].load
    assert profile.expected_gemm_sm_mhz  # the shipped profile judges the loaded clock
    for check_id in ("load.clocks", "load.thermal", "load.power", "load.ecc"):
        findings = judge(check_id, facts, **msgspec.structs.asdict(profile))
        assert [f.status for f in findings] == [Status.PASS], findings
    assert len(summary["series"]["t"]) <= 240


def test_a_long_run_keeps_its_whole_span_in_bounded_memory() -> None:
    from gpu_preflight.backends.nvml_sampler import LoadSampler

    class Nvml:  # pynvml's surface, answering instantly: only the bookkeeping is under test here
        def __getattr__(self, name: str) -> Any:
            return lambda *args: 1000

    ticks = iter(range(10**6))
    s = LoadSampler(Nvml(), object(), "gpu0", hz=10, max_samples=100, clock=lambda: next(ticks) / 10)
    for _ in range(1000):
        s.sample_once()
    rec = s.stop()
    assert len(rec.t) <= 100 and rec.t[-1] > 90 and rec.period_s > 0.1


def test_the_sampling_thread_runs_at_its_rate_and_stops(stub_lib: Path, tmp_path: Path,
                                                        h200_dump: dict[str, Any]) -> None:
    data = tmp_path / "nvml.txt"
    write_stub_data(limits(h200_dump), data)
    script = """
import json, time, pynvml
from gpu_preflight.backends.nvml_sampler import LoadSampler, summarize
pynvml.nvmlInit()
s = LoadSampler(pynvml, pynvml.nvmlDeviceGetHandleByIndex(0), "gpu0", hz=50).start()
s.mark("gemm_bf16"); time.sleep(0.5)
rec = s.stop()
print(json.dumps({"n": len(rec.t), "errors": rec.errors, "phases": rec.phases}))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False,
                          env=stub_env(stub_lib, data, PYTHONPATH=str(SRC)))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert 10 <= out["n"] <= 40 and out["phases"] == ["idle", "gemm_bf16"]
    assert "stop_timeout" not in out["errors"] and not any(k.startswith("crash") for k in out["errors"])


def test_the_cluster_report_keeps_each_gpus_series_and_the_html_plots_it() -> None:
    """Two GPUs of one node through the whole aggregation: load.* findings, nodes.<n>.load, the charts."""
    import xml.etree.ElementTree as ET

    from gpu_preflight.report import render
    from gpu_preflight.report.build import build_cluster_report

    from .test_cluster_checks import payload

    real = summarize(h100_record())
    slow = json.loads(json.dumps(real))
    slow["phases"]["gemm_bf16"]["sm_mhz"]["median"] *= 0.8
    slow["phases"]["gemm_bf16"]["reason_share"]["0x8"] = 0.63
    payloads = {0: {**payload(0, 0, 0), "load": real}, 1: {**payload(1, 0, 1, tflops=400.0), "load": slow}}
    gathered = {"payloads": payloads, "missing": {},
                "topology": {"world_size": 2, "num_nodes": 1, "local_world_size": 2, "hosts": ["h0"]}}
    typed, code = build_cluster_report(gathered, Config(), fail_on="fail", include=[], exclude=[], suite="quick",
                                       timeout_s=30)
    report = typed.to_dict()
    load = [f for f in report["findings"] if f["check_id"].startswith("load.")]
    bad = {(f["check_id"], f["subject"], f["status"]) for f in load if f["status"] != "PASS"}
    assert ("load.clocks", "h0/gpu1", "FAIL") in bad and ("load.peers", "h0/gpu1", "WARN") in bad
    assert not any(subject == "h0/gpu0" for _, subject, _ in bad)
    assert code == 2 and report["cluster_summary"]["test_results"]["gpu_health"] is False
    [gemm] = [f for f in report["findings"] if f["check_id"] == "compute.gemm" and f["subject"] == "h0/gpu1"]
    assert gemm["status"] in ("WARN", "FAIL") and "under load: hw slowdown active 63% of the phase" in gemm["summary"]
    assert gemm["details"]["load"]["phase"] == "gemm_bf16"
    assert set(report["nodes"]["node_0"]["load"]) == {"gpu0", "gpu1"}
    page = render(report, "html")
    charts = [c for c in page.split('<svg class="chart"')[1:] if "under load" in c.split("</title>")[0]]
    assert len(charts) == 3 and "gemm_bf16" in page and "limit" in charts[1]
    for chart in charts:
        ET.fromstring('<svg class="chart"' + chart.split("</svg>")[0] + "</svg>")


def test_a_large_clusters_ranks_send_statistics_without_series() -> None:
    rec = h100_record()
    full, lean = summarize(rec), summarize(rec, max_points=0)
    assert lean["series"] == {"t": [], "phase": [], "sm_mhz": [], "power_w": [], "temp_c": []}
    assert lean["phases"] == full["phases"] and len(json.dumps(lean)) < len(json.dumps(full)) / 2


def test_xid_lines_that_appear_during_the_run_are_caught(tmp_path: Path) -> None:
    """The watch reads the log before and after (a regular file stands in for /dev/kmsg)."""
    from gpu_preflight.backends.kernel_log import KmsgFollower, XidWatch

    kmsg = tmp_path / "kmsg"
    kmsg.write_text("6,100,1000,-;NVRM: Xid (PCI:0000:18:00): 13, pid=1, name=old, Graphics Exception\n")
    watch = XidWatch(KmsgFollower(path=str(kmsg)))
    with kmsg.open("a") as fh:  # written while the workloads run
        fh.write("6,101,2000,-;NVRM: Xid (PCI:0000:53:00): 79, pid=0, GPU has fallen off the bus.\n"
                 "6,102,2100,-;NVRM: Xid (PCI:0000:53:00): \n")
    payload: dict[str, Any] = {}
    watch.finish(payload)
    got = payload["load_xids"]
    assert [e["xid"] for e in got["events"]] == [79] and got["unparsed"] == 1  # the old Xid 13 is not new
    facts = cluster_facts({"payloads": {0: {"rank": 0, "node_rank": 0, "local_rank": 0, "device": "cuda:0",
                                            "load_xids": got}}, "missing": {},
                           "topology": {"world_size": 1, "num_nodes": 1, "local_world_size": 1, "hosts": ["h0"]}})
    findings = judge("load.xid", facts)
    assert {(f.status, f.code) for f in findings} == {(Status.FAIL, "xid_79"), (Status.ERROR, "xid_unparsed")}
    assert all(f.subject == "h0" for f in findings)


@pytest.mark.parametrize("watch, status, code", [
    ({"source": "/dev/kmsg", "count": 0, "unparsed": 0, "events": []}, Status.PASS, "ok"),
    ({"source": "/dev/kmsg", "count": 1, "unparsed": 0, "events": [{"xid": 13, "pci": None, "line": "x"}]},
     Status.WARN, "xid_13"),                                # one application Xid: the job on that GPU died
    ({"error": "kernel log not readable: /dev/kmsg: Operation not permitted"}, Status.SKIP, "log_unreadable"),
])
def test_load_xid_follows_the_xid_policy(watch: dict[str, Any], status: Status, code: str) -> None:
    facts = cluster_facts({"payloads": {0: {"rank": 0, "node_rank": 0, "local_rank": 0, "device": "cuda:0",
                                            "load_xids": watch}}, "missing": {},
                           "topology": {"world_size": 1, "num_nodes": 1, "local_world_size": 1, "hosts": ["h0"]}})
    [f] = judge("load.xid", facts)
    assert (f.status, f.code) == (status, code)


def test_the_report_reads_back_every_key_the_sampler_writes() -> None:
    """``LoadSummary`` is a closed block (a key it does not know is dropped on reading): the
    sampler's summary, with its work per watt, and the large-cluster form without series, must
    read back and write again unchanged."""
    from gpu_preflight.findings.model import LoadSummary
    from gpu_preflight.records.efficiency import work_per_watt

    rec = h100_record()
    full = summarize(rec)
    full["work_per_watt"] = work_per_watt([{"dtype": "bf16", "tflops": 700.0, "correct": True}], full)
    assert full["work_per_watt"]["bf16"]["samples"] > 0
    for summary in (full, summarize(rec, max_points=0)):
        written = json.loads(json.dumps(summary))
        assert json.dumps(LoadSummary.from_dict(written).to_dict()) == json.dumps(written)
