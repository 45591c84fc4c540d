"""RDMA ports from a fake /sys/class/infiniband built from real ibstat facts; counter deltas across the run."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from gpu_preflight.backends.infiniband import read_counters, read_tree
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import parse_text
from gpu_preflight.parsers.infiniband import IbDevicesRecord
from gpu_preflight.probes.dcgm import dcgm_probe
from gpu_preflight.probes.infiniband import infiniband_probe
from gpu_preflight.records.tools import InfinibandFacts

from . import fake_sysfs
from .conftest import REPO
from .diag_tools import check, config, probe_ctx, replay, statuses

DOWN3 = "infiniband/gpud-ibstat-h100-3-eth-ports-down.txt"  # 8x IB 400 active, 1 Eth 100 active, 3 Eth down
IBPANIC = "infiniband/gpud-ibstat-a100-ibpanic-mlx5_8-missing.txt"


def ibstat(corpus: Path, name: str) -> IbDevicesRecord:
    record = parse_text((corpus / name).read_text(), "ibstat")[1]
    assert isinstance(record, IbDevicesRecord)
    return record


def tree(tmp_path: Path, corpus: Path, name: str = DOWN3) -> Path:
    return fake_sysfs.build(tmp_path / "sys" / "class" / "infiniband", ibstat(corpus, name))


def test_sysfs_reads_what_ibstat_printed(tmp_path: Path, corpus: Path) -> None:
    root = tree(tmp_path, corpus)
    read = read_tree(root)
    assert read.readable and [d.name for d in read.devices][:3] == ["mlx5_0", "mlx5_1", "mlx5_10"]
    assert {d.driver for d in read.devices} == {"mlx5_core"} and read.efa_devices == []
    expected = ibstat(corpus, DOWN3)
    for got, want in zip(read.ports.devices, expected.devices, strict=True):
        assert (got.name, got.ca_type, got.firmware) == (want.name, want.ca_type, want.firmware)
        assert [(p.port, p.state, p.physical_state, p.rate_gbps, p.link_layer) for p in got.ports] == \
               [(p.port, p.state, p.physical_state, p.rate_gbps, p.link_layer) for p in want.ports]


def test_ports_judged_as_ibstat_would_be(tmp_path: Path, corpus: Path) -> None:
    cfg = config(infiniband_sysfs=str(tree(tmp_path, corpus)), ib_tools=[], ib_counter_min_window_s=0.0)
    from_sysfs = check("ib.ports", "infiniband", infiniband_probe(probe_ctx(cfg)), cfg)
    from_text = judge_text((corpus / DOWN3).read_text(), cfg, source="n1")
    assert statuses(from_sysfs) == statuses(from_text)
    assert {(s, subj) for s, subj, _ in statuses(from_sysfs)} == {
        ("WARN", "n1/mlx5_2/port1"), ("WARN", "n1/mlx5_7/port1"), ("WARN", "n1/mlx5_8/port1")}


@pytest.mark.parametrize(("expected_ports", "min_rate", "want"), [
    (9, None, {"WARN"}),                  # 9 active: the expected count is met
    (10, None, {"WARN", "FAIL"}),         # one short
    (None, 100.0, {"WARN"}),              # the 100G Ethernet port is at the floor
    (None, 100.1, {"WARN"}),              # ... and just below it: one more WARN
])
def test_expected_port_count_and_rate_from_config(tmp_path: Path, corpus: Path, expected_ports: int | None,
                                                  min_rate: float | None, want: set[str]) -> None:
    cfg = config(evidence={"ib_expected_ports": expected_ports, "ib_min_rate_gbps": min_rate},
                 infiniband_sysfs=str(tree(tmp_path, corpus)), ib_tools=[], ib_counter_min_window_s=0.0)
    findings = check("ib.ports", "infiniband", infiniband_probe(probe_ctx(cfg)), cfg)
    assert {f.status.value for f in findings} == want
    rate_low = [f.subject for f in findings if f.code == "rate_low"]
    assert rate_low == (["n1/mlx5_1/port1"] if min_rate == 100.1 else [])


def test_infiniband_port_down_fails(tmp_path: Path, corpus: Path) -> None:
    record = parse_text((corpus / "infiniband/heioy-ibv_devinfo-v-mlx4_1-port2.txt").read_text())[1]
    root = fake_sysfs.build(tmp_path / "ib", record)
    cfg = config(infiniband_sysfs=str(root), ib_tools=[], ib_counter_min_window_s=0.0)
    findings = check("ib.ports", "infiniband", infiniband_probe(probe_ctx(cfg)), cfg)
    assert statuses(findings) == [("FAIL", "n1/mlx4_1/port2", "port_down")]


def test_ibstat_device_error_is_judged_beside_sysfs(tmp_path: Path, corpus: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    replay(bindir, "ibstat", corpus / IBPANIC, rc=255)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    cfg = config(infiniband_sysfs=str(tree(tmp_path, corpus, IBPANIC)), ib_tools=["ibstat", "ibv_devinfo"],
                 ib_counter_min_window_s=0.0)
    facts = infiniband_probe(probe_ctx(cfg))
    assert [t.name for t in facts.tools] == ["ibstat"]  # ibv_devinfo is not installed here: not run
    findings = check("ib.ports", "infiniband", facts, cfg)
    assert [(f.status, f.code) for f in findings] == [(Status.FAIL, "device_error")]
    assert "mlx5_8" in findings[0].summary


def test_no_rdma_device_is_a_skip(tmp_path: Path) -> None:
    cfg = config(infiniband_sysfs=str(tmp_path / "absent"))
    facts = infiniband_probe(probe_ctx(cfg))
    for check_id in ("ib.ports", "ib.counters"):
        findings = check(check_id, "infiniband", facts, cfg)
        assert [f.status for f in findings] == [Status.SKIP] and "does not exist" in findings[0].summary


def test_no_device_but_ports_expected_fails(tmp_path: Path) -> None:
    cfg = config(evidence={"ib_expected_ports": 8}, infiniband_sysfs=str(tmp_path / "absent"))
    findings = check("ib.ports", "infiniband", infiniband_probe(probe_ctx(cfg)), cfg)
    assert statuses(findings) == [("FAIL", "n1", "ports_missing")]


# --- counters -----------------------------------------------------------------------------


def facts(start: dict[str, int], end: dict[str, int]) -> InfinibandFacts:
    from gpu_preflight.backends.infiniband import RdmaDevice

    return InfinibandFacts("/sys/class/infiniband", True, devices=[RdmaDevice("mlx5_0")],
                           counters_start={"mlx5_0/1": start}, counters_end={"mlx5_0/1": end}, window_s=5.0)


@pytest.mark.parametrize(("counter", "delta", "status"), [
    ("link_downed", 0, "PASS"), ("link_downed", 1, "FAIL"),
    ("symbol_error", 10, "PASS"), ("symbol_error", 11, "WARN"),
    ("port_rcv_errors", 0, "PASS"), ("port_rcv_errors", 1, "WARN"),
    ("port_xmit_discards", 100, "PASS"), ("port_xmit_discards", 101, "WARN"),
    ("port_xmit_data", 10**9, "PASS"),  # traffic is not an error
])
def test_counter_deltas_at_and_above_the_thresholds(counter: str, delta: int, status: str) -> None:
    start = {"link_downed": 3, "symbol_error": 1000, "port_rcv_errors": 7, "port_xmit_discards": 0,
             "port_xmit_data": 5}
    end = dict(start, **{counter: start[counter] + delta})
    findings = check("ib.counters", "infiniband", facts(start, end))
    assert [f.status.value for f in findings] == [status]
    if status != "PASS":
        assert (findings[0].subject, findings[0].code, findings[0].observed) == ("n1/mlx5_0/port1", counter, delta)


def test_lifetime_totals_alone_are_not_judged() -> None:
    counts = {"link_downed": 40, "symbol_error": 65535}
    assert [f.status for f in check("ib.counters", "infiniband", facts(counts, dict(counts)))] == [Status.PASS]


def test_counter_limits_are_configurable_and_fail_wins_over_warn() -> None:
    cfg = config(ib_counters_fail_above={"symbol_error": 100}, ib_counters_warn_above={"symbol_error": 0})
    start = {"symbol_error": 0}
    assert [f.status for f in check("ib.counters", "infiniband", facts(start, {"symbol_error": 50}), cfg)] == \
        [Status.WARN]
    assert [f.status for f in check("ib.counters", "infiniband", facts(start, {"symbol_error": 101}), cfg)] == \
        [Status.FAIL]


def test_a_counter_that_went_down_is_reported_not_judged() -> None:
    findings = check("ib.counters", "infiniband", facts({"link_downed": 5}, {"link_downed": 0}))
    assert statuses(findings) == [("WARN", "n1/mlx5_0/port1", "counter_reset")]


def test_counters_bracket_the_runs_heavy_tools(tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake dcgmi flaps a link while it "runs": the counter reads before and after must catch it."""
    root = tree(tmp_path, corpus)
    bindir = tmp_path / "bin"
    counter = root / "mlx5_3" / "ports" / "1" / "counters" / "link_downed"
    spec = REPO / "tests" / "fixtures" / "evidence" / "spec-dcgmi-diag-r3-targeted-power-fail.txt"
    replay(bindir, "dcgmi", spec, before=f"sleep 1; echo 1 > {counter}")
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    cfg = config(infiniband_sysfs=str(root), ib_tools=[], ib_counter_min_window_s=0.2)
    ctx = probe_ctx(cfg)
    box: dict[str, object] = {}
    threads = [threading.Thread(target=lambda: box.update(ib=infiniband_probe(ctx))),
               threading.Thread(target=lambda: box.update(dcgm=dcgm_probe(ctx)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    ib = box["ib"]
    assert isinstance(ib, InfinibandFacts) and ib.window_s >= 1.0
    findings = check("ib.counters", "infiniband", ib, cfg)
    assert statuses(findings) == [("FAIL", "n1/mlx5_3/port1", "link_downed")]
    assert findings[0].observed == 1


def test_without_heavy_tools_the_window_is_the_minimum(tmp_path: Path, corpus: Path) -> None:
    root = tree(tmp_path, corpus)
    cfg = config(infiniband_sysfs=str(root), ib_tools=[], ib_counter_min_window_s=0.3)
    facts = infiniband_probe(probe_ctx(cfg))
    assert 0.3 <= facts.window_s < 2.0
    assert set(read_counters(root)) == set(facts.counters_end) and len(facts.counters_end) == 12


def test_an_empty_class_directory_says_so(tmp_path: Path) -> None:
    """Seen on an H200 VM: /sys/class/infiniband exists (the RDMA core is loaded) but lists nothing."""
    (tmp_path / "infiniband").mkdir()
    cfg = config(infiniband_sysfs=str(tmp_path / "infiniband"))
    facts = infiniband_probe(probe_ctx(cfg))
    for check_id in ("ib.ports", "ib.counters"):
        findings = check(check_id, "infiniband", facts, cfg)
        assert [f.status for f in findings] == [Status.SKIP] and "lists no device" in findings[0].summary
