"""libfabric and EFA on the node: the real fi_info (tcp, and efa's -61), fakes replaying EFA listings, the plugin."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from gpu_preflight.config import Config
from gpu_preflight.findings.diagnostic_sections import network_section
from gpu_preflight.model import Status, jsonable
from gpu_preflight.parsers.infiniband import IbDevice, IbDevicesRecord, IbPort
from gpu_preflight.probes.fabric import fabric_probe
from gpu_preflight.records.fabric import OfiPlugin
from gpu_preflight.records.tools import FabricFacts

from . import fake_sysfs
from .diag_tools import check, config, hang, probe_ctx, replay, statuses

EFA_LISTING = "libfabric/hpctut-fi_info-p-efa-113.20.txt"  # 2 efa entries on rdmap0s6
FABRIC_ENV = ("NCCL_NET_PLUGIN", "NCCL_NET", "FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "LD_LIBRARY_PATH")


@pytest.fixture
def libfabric() -> str:
    """The real fi_info; CI installs libfabric-bin, so its absence is a failure, not a skip."""
    path = shutil.which("fi_info")
    if path is None:
        pytest.fail("fi_info not found: install libfabric-bin (scripts/test.sh does)")
    return path


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in FABRIC_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def bindir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "bin"
    path.mkdir()
    monkeypatch.setenv("PATH", f"{path}:{os.environ['PATH']}")
    return path


def efa_tree(tmp_path: Path, devices: int = 1) -> Path:
    record = IbDevicesRecord("sysfs", [IbDevice(f"rdmap{i}s6", "efa", "0.0.0", [
        IbPort(1, "ACTIVE", "LINKUP", 100.0, "Unspecified")]) for i in range(devices)])
    return fake_sysfs.build(tmp_path / "sys" / "infiniband", record, driver="efa")


def plugin_dir(tmp_path: Path, name: str = "libnccl-net.so") -> Path:
    lib = tmp_path / "ofi-nccl" / "lib"
    lib.mkdir(parents=True)
    (lib / name).write_bytes(b"\x7fELF")
    return lib


def both(facts: FabricFacts, cfg: Config) -> list[tuple[str, str, str]]:
    return statuses(check("fabric.fi_info", "fabric", facts, cfg)) + statuses(check("fabric.efa", "fabric", facts, cfg))


def test_real_fi_info_tcp_lists_providers(libfabric: str, tmp_path: Path) -> None:
    cfg = config(fabric_provider="tcp", infiniband_sysfs=str(tmp_path / "none"))
    facts = fabric_probe(probe_ctx(cfg))
    assert facts.fi_info is not None and facts.fi_info.rc == 0 and facts.fi_info_record is not None
    findings = check("fabric.fi_info", "fabric", facts, cfg)
    assert [(f.status, f.code) for f in findings] == [(Status.PASS, "ok")]
    assert findings[0].observed >= 1 and "tcp" in findings[0].summary
    assert facts.fi_info.artifact_file == "fi_info-p-tcp.txt"


def test_efa_without_efa_device_is_a_skip_without_running_fi_info(libfabric: str, tmp_path: Path) -> None:
    """libfabric's start-up is half a node check; without an EFA device it could only say -61."""
    cfg = config(infiniband_sysfs=str(tmp_path / "none"))
    ctx = probe_ctx(cfg)
    facts = fabric_probe(ctx)
    assert facts.fi_info is None and facts.fi_info_record is None and facts.reason is None
    assert not any(name.startswith("fi_info") for name in ctx.artifacts)
    assert both(facts, cfg) == [("SKIP", "n1", "not_expected"), ("SKIP", "n1", "not_expected")]
    (skip,) = check("fabric.fi_info", "fabric", facts, cfg)
    assert "`fi_info -p efa` not run: no EFA device" in skip.summary and "efa_expected = true" in skip.summary
    section = network_section(jsonable({"fabric": facts})).to_dict()
    assert (section["efa_available"], section["efa_providers"], section["efa_provider_count"]) == (False, [], 0)
    assert section["fi_info"] is None
    assert section["aws_ofi_nccl_plugin"] == {"installed": False, "path": None}


def test_real_fi_info_efa_when_efa_is_expected_fails(libfabric: str, tmp_path: Path) -> None:
    cfg = config(efa_expected=True, infiniband_sysfs=str(tmp_path / "none"))
    ctx = probe_ctx(cfg)
    facts = fabric_probe(ctx)
    assert facts.fi_info is not None and facts.fi_info.rc == 61
    assert facts.fi_info_record is not None and facts.fi_info_record.error_code == -61
    assert facts.fi_info_record.providers == []
    assert ctx.artifacts["fi_info_stderr"][1].strip() == "fi_getinfo: -61"
    assert ("FAIL", "n1", "no_provider") in both(facts, cfg)
    assert ("FAIL", "n1", "no_efa_device") in both(facts, cfg)


def test_efa_node_with_providers_and_plugin_passes(bindir: Path, tmp_path: Path, corpus: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    replay(bindir, "fi_info", corpus / EFA_LISTING)
    lib = plugin_dir(tmp_path)
    monkeypatch.setenv("FI_EFA_USE_DEVICE_RDMA", "1")
    cfg = config(infiniband_sysfs=str(efa_tree(tmp_path)), ofi_nccl_plugin_dirs=[str(lib)])
    facts = fabric_probe(probe_ctx(cfg))
    assert facts.efa_devices == ["rdmap0s6"] and facts.plugin is not None and facts.plugin.installed
    assert both(facts, cfg) == [("PASS", "n1", "ok"), ("PASS", "n1", "ok")]
    efa = check("fabric.efa", "fabric", facts, cfg)[0]
    assert efa.details["env"] == {"FI_EFA_USE_DEVICE_RDMA": "1"}
    section = network_section(jsonable({"fabric": facts})).to_dict()
    assert section["efa_available"] is True and section["efa_provider_count"] == 2
    assert section["efa_providers"] == ["provider: efa", "provider: efa"]
    assert section["aws_ofi_nccl_plugin"] == {"installed": True, "path": str(lib / "libnccl-net.so")}


def test_efa_device_without_provider_fails(bindir: Path, tmp_path: Path) -> None:
    none = Path(__file__).parent / "fixtures" / "evidence" / "fi_info-p-efa-none-libfabric-1.17.txt"
    replay(bindir, "fi_info", None, rc=61, stderr=none.read_text().strip())
    cfg = config(infiniband_sysfs=str(efa_tree(tmp_path)), ofi_nccl_plugin_dirs=[str(plugin_dir(tmp_path))])
    findings = check("fabric.fi_info", "fabric", fabric_probe(probe_ctx(cfg)), cfg)
    assert statuses(findings) == [("FAIL", "n1", "no_provider")] and "fi_getinfo -61" in findings[0].summary
    assert "operator_action" not in findings[0].details  # the software stack: install it, nothing to route on


def test_efa_without_the_nccl_plugin_fails(bindir: Path, tmp_path: Path, corpus: Path) -> None:
    replay(bindir, "fi_info", corpus / EFA_LISTING)
    cfg = config(infiniband_sysfs=str(efa_tree(tmp_path)), ofi_nccl_plugin_dirs=[str(tmp_path / "empty")])
    findings = check("fabric.efa", "fabric", fabric_probe(probe_ctx(cfg)), cfg)
    assert statuses(findings) == [("FAIL", "n1", "net_plugin_missing")]
    assert "aws-ofi-nccl" in (findings[0].recommendation or "")


@pytest.mark.parametrize(("env", "expected"), [
    ({"NCCL_NET_PLUGIN": "ofi"}, ("PASS", "n1", "ok")),
    ({"NCCL_NET_PLUGIN": "aws"}, ("FAIL", "n1", "net_plugin_missing")),
    ({"NCCL_NET_PLUGIN": "none"}, ("WARN", "n1", "net_plugin_disabled")),
    ({"FI_PROVIDER": "tcp"}, ("WARN", "n1", "fi_provider_override")),
    ({"FI_PROVIDER": "efa"}, ("PASS", "n1", "ok")),
])
def test_plugin_choice_and_provider_override(bindir: Path, tmp_path: Path, corpus: Path,
                                             monkeypatch: pytest.MonkeyPatch, env: dict[str, str],
                                             expected: tuple[str, str, str]) -> None:
    replay(bindir, "fi_info", corpus / EFA_LISTING)
    lib = plugin_dir(tmp_path, "libnccl-net-ofi.so")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(lib))
    cfg = config(infiniband_sysfs=str(efa_tree(tmp_path)), ofi_nccl_plugin_dirs=[])
    assert statuses(check("fabric.efa", "fabric", fabric_probe(probe_ctx(cfg)), cfg)) == [expected]


def test_hung_fi_info_is_an_error(bindir: Path, tmp_path: Path) -> None:
    hang(bindir, "fi_info")
    cfg = config(tool_timeout_s=1.0, infiniband_sysfs=str(efa_tree(tmp_path)))
    findings = check("fabric.fi_info", "fabric", fabric_probe(probe_ctx(cfg)), cfg)
    assert statuses(findings) == [("ERROR", "n1", "tool_timeout")] and "fi_info -p efa" in findings[0].summary


def test_absent_fi_info_is_a_skip(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    cfg = config(infiniband_sysfs=str(efa_tree(tmp_path)))
    findings = check("fabric.fi_info", "fabric", fabric_probe(probe_ctx(cfg)), cfg)
    assert statuses(findings) == [("SKIP", "n1", "not_installed")] and "fi_info not found" in findings[0].summary


def test_replayed_snapshot_runs_nothing(bindir: Path, tmp_path: Path) -> None:
    log = tmp_path / "argv"
    replay(bindir, "fi_info", None, argv_log=log)
    facts = fabric_probe(probe_ctx(replay="snap.json"))
    assert both(facts, config()) == [("SKIP", "n1", "not_run"), ("SKIP", "n1", "not_run")]
    assert not log.exists()


# --- operator actions (issue 27) -----------------------------------------------------------------------

PLUGIN = OfiPlugin(installed=True, path="/opt/amazon/ofi-nccl/lib/libnccl-net.so")


@pytest.mark.parametrize(("devices", "plugin", "env", "efa_expected", "want"), [
    (["rdmap0s6"], PLUGIN, {}, None, [("PASS", "ok", None)]),
    ([], PLUGIN, {}, True, [("FAIL", "no_efa_device", "isolate_node")]),  # the node lost its fabric NIC
    ([], PLUGIN, {}, None, [("SKIP", "not_expected", None)]),  # no EFA here and none expected
    (["rdmap0s6"], OfiPlugin(installed=False), {}, None, [("FAIL", "net_plugin_missing", None)]),  # software
    (["rdmap0s6"], OfiPlugin(installed=False, requested="none"), {}, None,
     [("WARN", "net_plugin_disabled", None)]),  # a setting
    (["rdmap0s6"], PLUGIN, {"FI_PROVIDER": "tcp"}, None, [("WARN", "fi_provider_override", None)]),  # a setting
])
def test_efa_findings_name_their_action(devices: list[str], plugin: OfiPlugin, env: dict[str, str],
                                        efa_expected: bool | None, want: list[tuple[str, str, str | None]]) -> None:
    facts = FabricFacts("efa", efa_devices=devices, plugin=plugin, env=env)
    found = check("fabric.efa", "fabric", facts, config(efa_expected=efa_expected))
    assert [(f.status.value, f.code, f.details.get("operator_action")) for f in found] == want

