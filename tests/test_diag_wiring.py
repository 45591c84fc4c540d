"""The diagnostics' settings and the engine wiring they rely on.

Two pieces live in shared files the lead edits: the ``[diagnostics]`` section in
``Config`` and the run's suite and per-probe time budget in the engine. The tests marked
``xfail(strict=True)`` state what must hold once those edits land; strict means they turn
into failures (XPASS) the moment they pass, so the marker cannot be forgotten.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_preflight.config import Config, build_config
from gpu_preflight.config.diagnostics import DiagnosticsConfig, diagnostics_config
from gpu_preflight.config.fields import setting_fields
from gpu_preflight.engine import run_checks

from . import fake_sysfs
from .conftest import REPO
from .diag_tools import replay

REGISTERED = any(f.name == "diagnostics" for f in setting_fields(Config))
pending_section = pytest.mark.xfail(not REGISTERED, strict=True,
                                    reason="waits for the [diagnostics] section in config/schema.py Config")
SPEC = REPO / "tests" / "fixtures" / "evidence" / "spec-dcgmi-diag-r3-targeted-power-fail.txt"


def test_every_setting_is_documented() -> None:
    for f in setting_fields(DiagnosticsConfig):
        assert len(f.metadata.get("doc", "")) > 20, f.name


def test_defaults_apply_while_the_section_is_not_registered() -> None:
    cfg = diagnostics_config(Config())
    assert (cfg.dcgm_level_full, cfg.fabric_provider, cfg.infiniband_sysfs) == (2, "efa", "/sys/class/infiniband")
    assert cfg.ib_counters_fail_above == {"link_downed": 0}
    assert cfg.ib_counters_fail_above is not DiagnosticsConfig().ib_counters_fail_above  # no shared mutable default


@pending_section
def test_settings_from_the_command_line_are_validated() -> None:
    cfg, _ = build_config(overrides=["diagnostics.dcgm_level_full=3", "diagnostics.pingpong_provider=tcp"])
    assert diagnostics_config(cfg).dcgm_level_full == 3 and diagnostics_config(cfg).pingpong_provider == "tcp"
    from gpu_preflight.config import ConfigError

    with pytest.raises(ConfigError, match="dcgm_level_full"):
        build_config(overrides=["diagnostics.dcgm_level_full=4"])


@pending_section
def test_gpu_preflight_run_reads_a_fake_sysfs_tree(tmp_path: Path, corpus: Path) -> None:
    from gpu_preflight.parsers.detect import parse_text

    record = parse_text((corpus / "infiniband/gpud-ibstat-h100-3-eth-ports-down.txt").read_text())[1]
    root = fake_sysfs.build(tmp_path / "infiniband", record)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_")}
    proc = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--node-only", "--check", "ib.*",
                           "--format", "json", "--set", f"diagnostics.infiniband_sysfs={json.dumps(str(root))}",
                           "--set", "diagnostics.ib_counter_min_window_s=0"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    report = json.loads(proc.stdout)
    warned = sorted(f["subject"].split("/", 1)[1] for f in report["findings"] if f["status"] == "WARN")
    assert warned == ["mlx5_2/port1", "mlx5_7/port1", "mlx5_8/port1"] and proc.returncode == 1


def test_full_suite_runs_dcgm_level_1_then_level_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "argv"
    replay(tmp_path / "bin", "dcgmi", SPEC, argv_log=log)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    run_checks(suite="full", include=["dcgm.diag"], timeout_s=10)
    assert [line.split()[:3] for line in log.read_text().splitlines()] == [["diag", "-r", "1"], ["diag", "-r", "2"]]


def test_a_slow_dcgm_gets_its_own_budget_beyond_the_run_timeout(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    replay(tmp_path / "bin", "dcgmi", SPEC, before="sleep 3")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    node = run_checks(include=["dcgm.diag"], timeout_s=2)
    assert {f.code for f in node.findings} >= {"targeted_power"}


def test_distributed_run_pairs_two_namespace_hosts_with_fi_pingpong() -> None:
    """Two torchrun agents in two network namespaces: the report judges their fi_pingpong (tcp)."""
    import shutil

    from . import netns

    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("fi_pingpong"):
        pytest.fail("needs root, iproute2 and libfabric-bin (scripts/test.sh installs them)")
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_")}
    with netns.hosts(2, prefix="gpw") as names:
        procs = []
        for i, ns in enumerate(names, 1):
            cmd = ["ip", "netns", "exec", ns, "env", "GLOO_SOCKET_IFNAME=eth0", f"GPU_PREFLIGHT_NODE_NAME=host{i}",
                   "timeout", "200", torchrun, "--nnodes=2", "--nproc_per_node=1", "--rdzv_backend=c10d",
                   "--rdzv_endpoint=10.250.0.1:29831", "--rdzv_id=gpwire", f"--rdzv_conf=is_host={str(i == 1).lower()}",
                   f"--local_addr=10.250.0.{i}", "-m", "gpu_preflight", "run", "--format", "json", "--timeout-s", "60",
                   "--check", "fabric.pingpong", "--set", "diagnostics.pingpong_provider=tcp",
                   "--set", "diagnostics.pingpong_endpoint=msg"]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                          cwd=REPO))
        outs = [p.communicate(timeout=220) for p in procs]
    stdout = next((out for out, _ in outs if out.strip()), "")
    assert stdout, "\n".join(err[-3000:] for _, err in outs)
    report = json.loads(stdout)
    found = [(f["status"], f["subject"], f["code"]) for f in report["findings"] if f["check_id"] == "fabric.pingpong"]
    assert found == [("PASS", "host1<->host2", "ok")], found
    test = report["nodes"]["node_0"]["network"]["efa_communication_test"]
    assert test["success"] is True and test["test_role"] == "server" and "MB/sec" in test["raw_output"]
    assert report["nodes"]["node_1"]["network"]["efa_communication_test"]["test_role"] == "client"
