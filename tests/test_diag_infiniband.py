"""RDMA ports from a fake /sys/class/infiniband built from real ibstat facts; counter deltas across the run."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.backends.infiniband import read_counters, read_tree
from gpu_preflight.config import Config
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


# --- missing rails and operator actions (issue 27) ------------------------------------------
# The 12-adapter H100 layout (eight 400G MT4129 rails, four 100G MT4125 front-end ports), as an
# ibstat text (test_field_rules_links_pages) and as the sysfs tree a live node shows for it.

H100_PROFILE = "h100-sxm"  # perf.network_nics_per_node = 8


def _layout(drop: frozenset[str] = frozenset(), down: frozenset[str] = frozenset()) -> IbDevicesRecord:
    from .test_field_rules_links_pages import IBSTAT_UP

    record = parse_text(IBSTAT_UP, "ibstat")[1]
    assert isinstance(record, IbDevicesRecord) and len(record.devices) == 12
    record.devices = [d for d in record.devices if d.name not in drop]
    for device in record.devices:
        if device.name in down:
            for port in device.ports:
                port.state, port.physical_state = "DOWN", "DISABLED"
    return record


def _profiled(profile: str | None, **diagnostics: Any) -> Config:
    from gpu_preflight.config import build_config
    from gpu_preflight.config.diagnostics import DiagnosticsConfig
    from gpu_preflight.config.profiles import find_profile

    cfg, _ = build_config(profile=find_profile(profile) if profile else None, environ={})
    cfg.diagnostics = DiagnosticsConfig(**diagnostics)
    return cfg


def _live(tmp_path: Path, record: IbDevicesRecord, profile: str | None = H100_PROFILE,
          portless: tuple[str, ...] = (), evidence: dict[str, Any] | None = None) -> list[tuple[str, str, str | None]]:
    """ib.ports on a fake sysfs tree of ``record`` (``portless``: adapters whose ports/ is gone)."""
    import shutil

    from gpu_preflight.actions import DETAIL_KEY
    from gpu_preflight.config.evidence import EvidenceConfig

    root = fake_sysfs.build(tmp_path / "sys" / "class" / "infiniband", record)
    for name in portless:
        shutil.rmtree(root / name / "ports")
    cfg = _profiled(profile, infiniband_sysfs=str(root), ib_tools=[], ib_counter_min_window_s=0.0)
    if evidence:
        cfg.evidence = EvidenceConfig(**evidence)
    found = check("ib.ports", "infiniband", infiniband_probe(probe_ctx(cfg)), cfg)
    return [(f.status.value, f.code, f.details.get(DETAIL_KEY)) for f in found]


RAILS = ("mlx5_0", "mlx5_10", "mlx5_11", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9")  # the MT4129s


@pytest.mark.parametrize(("profile", "drop", "want"), [
    (H100_PROFILE, 0, [("PASS", "ok", None)]),  # all eight rails: the count is met
    (H100_PROFILE, 1, [("FAIL", "hca_missing", "isolate_node")]),  # 7 of 8
    (H100_PROFILE, 3, [("FAIL", "hca_missing", "isolate_node")]),  # 5 of 8: still more than half
    (H100_PROFILE, 4, [("PASS", "ok", None)]),  # 4 of 8: no rail set to be short of (a front-end-only node)
    (None, 1, [("PASS", "ok", None)]),  # no profile: no count to hold the node to
])
def test_a_missing_rail_adapter_isolates_the_node(tmp_path: Path, profile: str | None, drop: int,
                                                  want: list[tuple[str, str, str | None]]) -> None:
    assert _live(tmp_path, _layout(drop=frozenset(RAILS[:drop])), profile) == want


def test_an_adapter_listed_without_ports_is_a_missing_rail_even_without_a_profile(tmp_path: Path) -> None:
    assert _live(tmp_path, _layout(), None, portless=("mlx5_3",)) == [("FAIL", "hca_missing", "isolate_node")]
    # one port-less adapter of a model with no sibling that has a port is no rail set
    assert _live(tmp_path / "b", _layout(drop=frozenset(RAILS[1:])), None, portless=("mlx5_0",)) == \
        [("PASS", "ok", None)]


@pytest.mark.parametrize(("layout", "evidence", "want"), [
    # a rail's port down: FAIL (a rail is missing), the fix is at the cable or switch port
    (_layout(down=frozenset({"mlx5_3"})), {}, [("FAIL", "port_down", "check_mechanicals")]),
    # a front-end port down (2 of the 4 MT4125 stay up: no rail set): the unused-NIC WARN
    (_layout(down=frozenset({"mlx5_2", "mlx5_8"})), {},
     [("WARN", "port_down", "check_mechanicals"), ("WARN", "port_down", "check_mechanicals")]),
    # an active port below the rate floor, and fewer active ports than configured
    (_layout(), {"ib_min_rate_gbps": 400.0},
     [("WARN", "rate_low", "check_mechanicals")] * 4),
    (_layout(), {"ib_expected_ports": 13}, [("FAIL", "ports_missing", "check_mechanicals")]),
    (_layout(), {"ib_expected_ports": 12}, [("PASS", "ok", None)]),
])
def test_port_failures_name_their_action(tmp_path: Path, layout: IbDevicesRecord, evidence: dict[str, Any],
                                         want: list[tuple[str, str, str | None]]) -> None:
    assert _live(tmp_path, layout, evidence=evidence) == want


def test_saved_ibstat_and_the_live_node_share_the_rail_rule(tmp_path: Path) -> None:
    """One rule: the same 7-of-8 layout as ibstat text, judged with the profile, FAILs as the live node does."""
    from .test_field_rules_links_pages import IBSTAT_UP

    text = "CA '" + "CA '".join(b for b in IBSTAT_UP.split("CA '")[1:] if not b.startswith("mlx5_9'"))
    saved = [(f.status.value, f.code, f.details.get("operator_action"))
             for f in judge_text(text, _profiled(H100_PROFILE), source="n1") if f.check_id == "ib.ports"]
    assert saved == _live(tmp_path, _layout(drop=frozenset({"mlx5_9"}))) == [("FAIL", "hca_missing", "isolate_node")]
    assert [f.code for f in judge_text(text, _profiled(None), source="n1") if f.check_id == "ib.ports"] == ["ok"]


def test_device_error_reboots(tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    replay(bindir, "ibstat", corpus / IBPANIC, rc=255)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    cfg = config(infiniband_sysfs=str(tree(tmp_path, corpus, IBPANIC)), ib_tools=["ibstat"],
                 ib_counter_min_window_s=0.0)
    findings = check("ib.ports", "infiniband", infiniband_probe(probe_ctx(cfg)), cfg)
    assert [(f.code, f.details.get("operator_action")) for f in findings] == [("device_error", "reboot_node")]
