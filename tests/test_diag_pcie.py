"""PCIe evidence on the node: a fake ``lspci`` replays real listings; ``limited by`` lines from a kernel log."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpu_preflight.probes.pcie import pcie_probe

from .diag_tools import check, config, probe_ctx, replay, statuses

VVV = Path(__file__).parent / "fixtures" / "evidence" / "lspci-vvv-gpu-nic.txt"
NN = "lspci/gpud-lspci-nn-a100x8.txt"
LIMITED = "lspci/stas00-dmesg-pcie-limited-by.txt"


@pytest.fixture
def bindir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "bin"
    path.mkdir()
    monkeypatch.setenv("PATH", f"{path}:{os.environ['PATH']}")
    return path


@pytest.fixture
def quiet_log(tmp_path: Path) -> str:
    log = tmp_path / "kern.log"
    log.write_text("[    0.000000] Linux version 6.1.0 (gcc 12)\n[    1.000000] pci 0000:00:00.0: [8086:09a2]\n")
    return str(log)


def test_downtrained_gpu_fails_and_slow_nic_warns(bindir: Path, tmp_path: Path, quiet_log: str) -> None:
    log = tmp_path / "argv"
    replay(bindir, "lspci", VVV, argv_log=log)
    ctx = probe_ctx(kernel_log=quiet_log)
    facts = pcie_probe(ctx)
    assert log.read_text().strip() == "-vvv -nn"
    assert facts.devices_listed == 5 and facts.record is not None
    assert [d.address for d in facts.record.devices] == ["1b:00.0", "43:00.0", "52:00.0", "ca:00.0"]  # no bridge
    findings = check("pcie.lnksta", "pcie", facts)
    assert statuses(findings) == [("FAIL", "n1/43:00.0", "width_downgraded"),
                                  ("WARN", "n1/ca:00.0", "speed_downgraded")]
    assert ctx.artifacts["lspci"] == ("lspci-vvv-nn.txt", VVV.read_text())


def test_gpus_and_nics_kept_by_class_id(bindir: Path, corpus: Path, quiet_log: str) -> None:
    replay(bindir, "lspci", corpus / NN)
    facts = pcie_probe(probe_ctx(kernel_log=quiet_log))
    assert facts.devices_listed == 31 and facts.record is not None
    kept = [(d.class_id, d.vendor_id) for d in facts.record.devices]
    assert kept.count(("0302", "10de")) == 8 and kept.count(("0207", "15b3")) == 8 and len(kept) == 17
    findings = check("pcie.lnksta", "pcie", facts)
    assert statuses(findings) == [("SKIP", "n1", "no_link_status")]  # not -vvv as root: nothing to judge


def test_no_gpu_or_nic_and_empty_listing_are_skips(bindir: Path, tmp_path: Path, quiet_log: str) -> None:
    only_bridge = tmp_path / "bridge.txt"
    only_bridge.write_text("00:00.0 Host bridge [0600]: Intel Corporation 440FX - 82441FX PMC [Natoma] [8086:1237]\n")
    replay(bindir, "lspci", only_bridge)
    assert statuses(check("pcie.lnksta", "pcie", pcie_probe(probe_ctx(kernel_log=quiet_log)))) == [
        ("SKIP", "n1", "no_devices")]
    replay(bindir, "lspci", None)
    findings = check("pcie.lnksta", "pcie", pcie_probe(probe_ctx(kernel_log=quiet_log)))
    assert statuses(findings) == [("SKIP", "n1", "not_run")] and "lists no PCI device" in findings[0].summary


def test_absent_lspci_is_a_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quiet_log: str) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    findings = check("pcie.lnksta", "pcie", pcie_probe(probe_ctx(kernel_log=quiet_log)))
    assert statuses(findings) == [("SKIP", "n1", "not_installed")] and "lspci not found" in findings[0].summary


def test_failing_lspci_is_an_error(bindir: Path, quiet_log: str) -> None:
    replay(bindir, "lspci", None, rc=1, stderr="lspci: Cannot open /sys/bus/pci/devices: Permission denied")
    findings = check("pcie.lnksta", "pcie", pcie_probe(probe_ctx(kernel_log=quiet_log)))
    assert statuses(findings) == [("ERROR", "n1", "unreadable_output")] and "Permission denied" in findings[0].summary


def test_limited_by_lines_warn_per_device(bindir: Path, corpus: Path) -> None:
    replay(bindir, "lspci", VVV)
    facts = pcie_probe(probe_ctx(kernel_log=str(corpus / LIMITED)))
    assert len(facts.limited_lines) == 2 and [lim.device for lim in facts.limits] == ["0000:04:00.0", "0000:8b:00.0"]
    findings = check("pcie.limited_by", "pcie", facts)
    assert statuses(findings) == [("WARN", "n1/0000:04:00.0", "link_limited"), ("WARN", "n1/0000:8b:00.0",
                                                                                  "link_limited")]
    assert findings[0].observed == 252.048 and findings[0].expected == 504.112


def test_no_limited_by_line_passes_and_unreadable_log_skips(bindir: Path, tmp_path: Path, quiet_log: str) -> None:
    replay(bindir, "lspci", VVV)
    assert statuses(check("pcie.limited_by", "pcie", pcie_probe(probe_ctx(kernel_log=quiet_log)))) == [
        ("PASS", "n1", "ok")]
    missing = check("pcie.limited_by", "pcie", pcie_probe(probe_ctx(kernel_log=str(tmp_path / "nope.log"))))
    assert statuses(missing) == [("SKIP", "n1", "log_unreadable")] and "cannot read kernel log" in missing[0].summary


def test_replay_reads_only_a_given_kernel_log(bindir: Path, tmp_path: Path, corpus: Path) -> None:
    log = tmp_path / "argv"
    replay(bindir, "lspci", VVV, argv_log=log)
    facts = pcie_probe(probe_ctx(replay="snap.json", kernel_log=str(corpus / LIMITED)))
    assert not log.exists() and statuses(check("pcie.lnksta", "pcie", facts))[0][0] == "SKIP"
    assert [f.status.value for f in check("pcie.limited_by", "pcie", facts)] == ["WARN", "WARN"]
    bare = pcie_probe(probe_ctx(config(), replay="snap.json"))
    assert statuses(check("pcie.limited_by", "pcie", bare)) == [("SKIP", "n1", "log_unreadable")]


def test_capabilities_denied_on_the_node_is_a_skip_that_asks_for_root(bindir: Path, quiet_log: str) -> None:
    # A saved paste showing '<access denied>' is an ERROR (tests/test_repertoire_lspci.py); on the node it is
    # the run's setting (not root), a SKIP as for any capability lspci hides.
    denied = Path(__file__).parent / "fixtures" / "repertoire" / "lspci" / "capabilities-access-denied.txt"
    replay(bindir, "lspci", denied)
    findings = check("pcie.lnksta", "pcie", pcie_probe(probe_ctx(kernel_log=quiet_log)))
    assert statuses(findings) == [("SKIP", "n1", "capabilities_denied")] and "run as root" in findings[0].summary
