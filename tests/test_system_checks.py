"""Every host check at, just below and just above its thresholds, on hand-built SystemFacts.

Each test starts from :data:`HEALTHY` (a node every system check passes) and changes the one
reading under test; :func:`judge` calls the registered check function alone. The last tests
read this real machine through ``backends.system.read_system``.
"""

from __future__ import annotations

import json
import os
import platform
import resource
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil
import pytest
from msgspec.structs import replace

import gpu_preflight
from gpu_preflight.backends.system import attempt, numa_nodes, read_system
from gpu_preflight.config import Config
from gpu_preflight.model import NA, Finding, Status
from gpu_preflight.records import DiskUsage, GpuFacts, GpuRecord, SystemFacts
from gpu_preflight.registry import CheckContext, all_checks, get_check

GIB = 1024**3
MIB = 1024**2
PASS, SKIP, WARN, ERROR, FAIL = Status.PASS, Status.SKIP, Status.WARN, Status.ERROR, Status.FAIL


HEALTHY = SystemFacts(
    hostname="n1",
    kernel="5.15.0-1052-aws",
    memory_total_bytes=100 * GIB,
    memory_available_bytes=80 * GIB,
    cpu_count=64,
    cpu_percent=3.0,
    load_1m=2.0,
    disks=[DiskUsage("/", 500 * GIB, 400 * GIB, "/"), DiskUsage("/tmp", 500 * GIB, 400 * GIB, "/")],
    shm_total_bytes=64 * GIB,
    memlock_soft=-1,
    memlock_hard=-1,
    nofile_soft=1_048_576,
    nofile_hard=1_048_576,
    numa_nodes=2,
    processes=["nvidia-persistenced", "sshd", "systemd"],
)
ONE_GPU = GpuFacts(source="test", available=True, driver_version="580.159.04",
                   gpus=[GpuRecord(index=0, name="NVIDIA H200", nvswitch_links=0)])


def sys_config(**changes: Any) -> Config:
    """Typed defaults with some system thresholds changed."""
    return Config(system=replace(Config().system, **changes))


def healthy(**changes: Any) -> SystemFacts:
    return replace(HEALTHY, **changes)


def judge(check_id: str, system: SystemFacts, config: Config | None = None, gpu: GpuFacts = ONE_GPU) -> list[Finding]:
    """Call the registered check function directly."""
    ctx = CheckContext(host="n1", facts={"system": system, "gpu": gpu}, config=config or Config())
    findings = list(get_check(check_id).fn(ctx))
    assert findings and all(f.check_id == check_id for f in findings)
    for f in findings:
        if f.status in (WARN, ERROR, FAIL):
            assert f.recommendation, f
    return findings


def outcome(findings: Sequence[Finding]) -> list[tuple[Status, str]]:
    return [(f.status, f.code) for f in findings]


def host_checks() -> list[str]:
    """The system checks judged on the host facts (``system.io`` measures storage: tests/test_system_io.py)."""
    return sorted(s.id for s in all_checks() if s.id.startswith("system.") and "system" in s.needs)


SYSTEM_CHECKS = tuple(host_checks())  # from the registry: a new host check is held to the rules below unlisted


def test_the_derived_list_holds_the_known_checks() -> None:
    """The list comes from the registry; these ids anchor it, and every system check is named by some test."""
    assert {"system.cpu", "system.disk", "system.memory", "system.services", "system.shm"} <= set(SYSTEM_CHECKS)
    named = "".join(p.read_text(encoding="utf-8") for p in Path(__file__).parent.glob("test_*.py"))
    ids = [s.id for s in all_checks() if s.id.startswith("system.")]
    assert "system.io" in ids and [c for c in ids if f'"{c}"' not in named] == []


@pytest.mark.parametrize("check_id", SYSTEM_CHECKS)
def test_healthy_node_passes(check_id: str) -> None:
    assert {f.status for f in judge(check_id, HEALTHY)} == {PASS}


# --------------------------------------------------------------------------- system.memory


@pytest.mark.parametrize(("available_gib", "total_gib", "config", "status", "code"), [
    (4.0, 16.0, {}, PASS, "ok"),                        # at the FAIL floor (4 GiB), 25 %
    (3.99, 16.0, {}, FAIL, "memory_low"),
    (4.01, 16.0, {}, PASS, "ok"),
    (10.0, 100.0, {}, PASS, "ok"),                      # at 10 %
    (9.99, 100.0, {}, WARN, "memory_pressure"),
    (10.01, 100.0, {}, PASS, "ok"),
    (3.0, 100.0, {}, FAIL, "memory_low"),               # FAIL outranks the percentage WARN
    (8.0, 16.0, {"memory_available_min_gib": 8.0}, PASS, "ok"),
    (7.99, 16.0, {"memory_available_min_gib": 8.0}, FAIL, "memory_low"),
    (25.0, 100.0, {"memory_available_warn_percent": 25.0}, PASS, "ok"),
    (24.9, 100.0, {"memory_available_warn_percent": 25.0}, WARN, "memory_pressure"),
])
def test_memory_boundary(available_gib: float, total_gib: float, config: dict[str, float], status: Status,
                         code: str) -> None:
    facts = healthy(memory_available_bytes=int(available_gib * GIB), memory_total_bytes=int(total_gib * GIB))
    assert outcome(judge("system.memory", facts, sys_config(**config))) == [(status, code)]


@pytest.mark.parametrize("changes", [
    {"memory_available_bytes": NA("psutil failed")},
    {"memory_total_bytes": NA("psutil failed")},
    {"memory_total_bytes": 0},
])
def test_memory_unreadable_skips(changes: dict[str, Any]) -> None:
    assert outcome(judge("system.memory", healthy(**changes))) == [(SKIP, "not_available")]


# --------------------------------------------------------------------------- system.disk


@pytest.mark.parametrize(("free_gib", "config", "status", "code"), [
    (1.0, {}, WARN, "disk_low"),            # at the FAIL floor: not below it
    (0.99, {}, FAIL, "disk_full"),
    (1.01, {}, WARN, "disk_low"),
    (10.0, {}, PASS, "ok"),                 # at the WARN floor
    (9.99, {}, WARN, "disk_low"),
    (10.01, {}, PASS, "ok"),
    (0.0, {}, FAIL, "disk_full"),
    (5.0, {"disk_free_min_gib": 5.0, "disk_free_warn_gib": 50.0}, WARN, "disk_low"),
    (4.99, {"disk_free_min_gib": 5.0, "disk_free_warn_gib": 50.0}, FAIL, "disk_full"),
    (50.0, {"disk_free_min_gib": 5.0, "disk_free_warn_gib": 50.0}, PASS, "ok"),
    (49.99, {"disk_free_min_gib": 5.0, "disk_free_warn_gib": 50.0}, WARN, "disk_low"),
])
def test_disk_boundary(free_gib: float, config: dict[str, float], status: Status, code: str) -> None:
    facts = healthy(disks=[DiskUsage("/scratch", 100 * GIB, int(free_gib * GIB), "/scratch")])
    findings = judge("system.disk", facts, sys_config(**config))
    assert outcome(findings) == [(status, code)]
    assert findings[0].subject == "n1:/scratch"


def test_disk_each_path_judged() -> None:
    facts = healthy(disks=[DiskUsage("/", 100 * GIB, 50 * GIB, "/"), DiskUsage("/ckpt", 100 * GIB, 0, "/ckpt")])
    findings = judge("system.disk", facts)
    assert [(f.subject, f.status) for f in findings] == [("n1:/", PASS), ("n1:/ckpt", FAIL)]


def test_disk_unreadable_is_error() -> None:
    reason = NA("/ckpt: Permission denied")
    findings = judge("system.disk", healthy(disks=[DiskUsage("/ckpt", reason, reason)]))
    assert outcome(findings) == [(ERROR, "unreadable")]
    assert "Permission denied" in findings[0].summary


def test_disk_no_paths_skips() -> None:
    assert outcome(judge("system.disk", healthy(disks=[]))) == [(SKIP, "no_paths")]


# --------------------------------------------------------------------------- system.cpu


@pytest.mark.parametrize(("count", "load", "config", "status", "code"), [
    (1, 0.0, {}, PASS, "ok"),                      # at the default minimum (1)
    (8, 0.0, {"cpu_count_min": 8}, PASS, "ok"),
    (7, 0.0, {"cpu_count_min": 8}, FAIL, "too_few_cpus"),
    (9, 0.0, {"cpu_count_min": 8}, PASS, "ok"),
    (64, 96.0, {}, PASS, "ok"),                    # load/CPU = 1.5: at the limit
    (64, 95.9, {}, PASS, "ok"),
    (64, 96.1, {}, WARN, "load_high"),
    (10, 5.0, {"load_per_cpu_warn": 0.5}, PASS, "ok"),
    (10, 5.1, {"load_per_cpu_warn": 0.5}, WARN, "load_high"),
    (64, NA("no getloadavg"), {}, PASS, "ok"),     # load unknown: only the count is judged
    (4, 100.0, {"cpu_count_min": 8}, FAIL, "too_few_cpus"),
])
def test_cpu_boundary(count: int, load: float | NA, config: dict[str, float], status: Status, code: str) -> None:
    findings = judge("system.cpu", healthy(cpu_count=count, load_1m=load), sys_config(**config))
    assert outcome(findings) == [(status, code)]


@pytest.mark.parametrize("count", [NA("psutil failed"), 0])
def test_cpu_unreadable_skips(count: int | NA) -> None:
    assert outcome(judge("system.cpu", healthy(cpu_count=count))) == [(SKIP, "not_available")]


# --------------------------------------------------------------------------- system.shm


@pytest.mark.parametrize(("mib", "config", "status", "code"), [
    (64, {}, FAIL, "shm_too_small"),      # Docker's default
    (255, {}, FAIL, "shm_too_small"),
    (256, {}, WARN, "shm_small"),         # at the FAIL floor
    (257, {}, WARN, "shm_small"),
    (1023, {}, WARN, "shm_small"),
    (1024, {}, PASS, "ok"),               # at the WARN floor
    (1025, {}, PASS, "ok"),
    (63, {"shm_fail_mib": 64, "shm_warn_mib": 128}, FAIL, "shm_too_small"),
    (64, {"shm_fail_mib": 64, "shm_warn_mib": 128}, WARN, "shm_small"),
    (128, {"shm_fail_mib": 64, "shm_warn_mib": 128}, PASS, "ok"),
])
def test_shm_boundary(mib: int, config: dict[str, float], status: Status, code: str) -> None:
    findings = judge("system.shm", healthy(shm_total_bytes=mib * MIB), sys_config(**config))
    assert outcome(findings) == [(status, code)]
    assert findings[0].observed == mib


def test_shm_unusable_fails() -> None:
    """The docstring says nothing about an unreadable /dev/shm; the check FAILs it (NCCL needs it)."""
    findings = judge("system.shm", healthy(shm_total_bytes=NA("FileNotFoundError: /dev/shm")))
    assert outcome(findings) == [(FAIL, "no_shm")]
    assert "/dev/shm" in findings[0].summary


# --------------------------------------------------------------------------- system.limits


@pytest.mark.parametrize(("memlock", "require", "status", "code"), [
    (-1, True, PASS, "memlock_ok"),
    (65536, True, WARN, "memlock_limited"),
    (2**63 - 2, True, WARN, "memlock_limited"),   # huge but not unlimited
    (65536, False, PASS, "memlock_ok"),
    (NA("getrlimit failed"), True, SKIP, "not_available"),
])
def test_limits_memlock(memlock: int | NA, require: bool, status: Status, code: str) -> None:
    findings = judge("system.limits", healthy(memlock_soft=memlock), sys_config(memlock_require_unlimited=require))
    assert outcome(findings) == [(status, code), (PASS, "nofile_ok")]


@pytest.mark.parametrize(("nofile", "minimum", "status", "code"), [
    (32768, 32768, PASS, "nofile_ok"),
    (32767, 32768, WARN, "nofile_low"),
    (32769, 32768, PASS, "nofile_ok"),
    (1024, 32768, WARN, "nofile_low"),
    (-1, 32768, PASS, "nofile_ok"),               # unlimited
    (4096, 4096, PASS, "nofile_ok"),
    (4095, 4096, WARN, "nofile_low"),
    (NA("getrlimit failed"), 32768, SKIP, "not_available"),
])
def test_limits_nofile(nofile: int | NA, minimum: int, status: Status, code: str) -> None:
    findings = judge("system.limits", healthy(nofile_soft=nofile), sys_config(nofile_min=minimum))
    assert outcome(findings) == [(PASS, "memlock_ok"), (status, code)]


# --------------------------------------------------------------------------- system.kernel


@pytest.mark.parametrize(("release", "minimum", "status", "code"), [
    ("4.15", "4.15", PASS, "ok"),
    ("4.15.0-213-generic", "4.15", PASS, "ok"),
    ("4.14.336-257.562.amzn2.x86_64", "4.15", FAIL, "kernel_too_old"),
    ("4.9.0", "4.15", FAIL, "kernel_too_old"),           # numeric, not lexical (9 < 15)
    ("4.16.0", "4.15", PASS, "ok"),
    ("6.8.0-1015-aws", "4.15", PASS, "ok"),
    ("5.14.0-427.el9.x86_64", "5.15", FAIL, "kernel_too_old"),
    ("5.15.0", "5.15", PASS, "ok"),
    ("5.15.1", "5.15", PASS, "ok"),
])
def test_kernel_boundary(release: str, minimum: str, status: Status, code: str) -> None:
    findings = judge("system.kernel", healthy(kernel=release), sys_config(kernel_min_version=minimum))
    assert outcome(findings) == [(status, code)]


def test_kernel_unreadable_skips() -> None:
    assert outcome(judge("system.kernel", healthy(kernel=NA("uname failed")))) == [(SKIP, "not_available")]


# --------------------------------------------------------------------------- system.numa


@pytest.mark.parametrize(("nodes", "expected", "status", "code"), [
    (1, None, PASS, "ok"),
    (2, 2, PASS, "ok"),
    (1, 2, WARN, "numa_nodes"),
    (3, 2, PASS, "ok"),
    (8, 8, PASS, "ok"),
    (4, 8, WARN, "numa_nodes"),
    (NA("no /sys/devices/system/node"), 2, SKIP, "not_available"),
])
def test_numa(nodes: int | NA, expected: int | None, status: Status, code: str) -> None:
    findings = judge("system.numa", healthy(numa_nodes=nodes), sys_config(numa_expected_nodes=expected))
    assert outcome(findings) == [(status, code)]


def test_numa_missing_sysfs_is_not_a_pass(tmp_path: Path) -> None:
    reading = attempt(lambda: numa_nodes(str(tmp_path / "no-such-dir")))
    assert [f.status for f in judge("system.numa", healthy(numa_nodes=reading))] == [SKIP]


def test_numa_nodes_counts_node_dirs(tmp_path: Path) -> None:
    for name in ("node0", "node1", "node12"):
        (tmp_path / name).mkdir()
    (tmp_path / "nodeX").mkdir()
    (tmp_path / "possible").write_text("0-1\n")
    assert numa_nodes(str(tmp_path)) == 3


# --------------------------------------------------------------------------- system.services


def nvswitch_gpu(links: int | NA) -> GpuFacts:
    return replace(ONE_GPU, gpus=[replace(ONE_GPU.gpus[0], nvswitch_links=links)])


@pytest.mark.parametrize(("processes", "gpu", "config", "expected"), [
    (["nvidia-persistenced"], ONE_GPU, {}, [("nvidia-persistenced", PASS, "ok")]),
    (["sshd"], ONE_GPU, {}, [("nvidia-persistenced", WARN, "service_missing")]),
    (["a"], ONE_GPU, {"required_services": ["a", "b"]}, [("a", PASS, "ok"), ("b", WARN, "service_missing")]),
    (["nvidia-persistenced"], nvswitch_gpu(12), {},
     [("nvidia-persistenced", PASS, "ok"), ("nv-fabricmanager", FAIL, "service_missing")]),
    (["nvidia-persistenced", "nv-fabricmanager"], nvswitch_gpu(12), {},
     [("nvidia-persistenced", PASS, "ok"), ("nv-fabricmanager", PASS, "ok")]),
    (["nvidia-persistenced"], nvswitch_gpu(12), {"fabricmanager_on_nvswitch": False},
     [("nvidia-persistenced", PASS, "ok")]),
    (["nvidia-persistenced"], nvswitch_gpu(0), {}, [("nvidia-persistenced", PASS, "ok")]),
    (["nvidia-persistenced"], nvswitch_gpu(NA("not supported")), {}, [("nvidia-persistenced", PASS, "ok")]),
])
def test_services(processes: list[str], gpu: GpuFacts, config: dict[str, Any],
                  expected: list[tuple[str, Status, str]]) -> None:
    findings = judge("system.services", healthy(processes=processes), sys_config(**config), gpu)
    assert [(f.subject, f.status, f.code) for f in findings] == [(f"n1:{n}", s, c) for n, s, c in expected]


def test_services_nothing_required_is_not_an_error() -> None:
    ctx = CheckContext(host="n1", facts={"system": healthy(processes=["sshd"]), "gpu": ONE_GPU},
                       config=sys_config(required_services=[]))
    findings = list(get_check("system.services").fn(ctx))
    assert [f.status for f in findings] in ([PASS], [SKIP])


def test_services_nothing_required_e2e(tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    path = tmp_path / "nvml_dump.json"
    path.write_text(json.dumps(h200_dump))
    report = gpu_preflight.run_checks(replay=str(path), include=["system.services"],
                                      overrides=["system.required_services=[]"])
    [result] = report.results
    assert result.status in (PASS, SKIP), [(f.status.value, f.code) for f in result.findings]


@pytest.mark.parametrize("gpu", [
    GpuFacts(source="live", available=False, reason="NVML library not found"),
    GpuFacts(source="live", available=True),
], ids=["no-nvml", "zero-gpus"])
def test_services_without_gpus_skips(gpu: GpuFacts) -> None:
    findings = judge("system.services", healthy(processes=[]), gpu=gpu)
    assert outcome(findings) == [(SKIP, "no_gpus")]
    if not gpu.available:
        assert "NVML library not found" in findings[0].summary


def test_services_unreadable_process_list_skips() -> None:
    findings = judge("system.services", healthy(processes=NA("AccessDenied")))
    assert outcome(findings) == [(SKIP, "not_available")]
    assert "AccessDenied" in findings[0].summary


# --------------------------------------------------------------------------- this real machine


def test_read_system_on_this_machine(tmp_path: Path) -> None:
    not_yet = tmp_path / "reports" / "run-1"
    facts = read_system(["/", "/tmp", "/nonexistent/dir", str(not_yet), "/"])

    assert facts.kernel == platform.release()
    assert isinstance(facts.memory_total_bytes, int) and facts.memory_total_bytes > 0
    assert isinstance(facts.memory_available_bytes, int)
    assert 0 < facts.memory_available_bytes <= facts.memory_total_bytes
    assert facts.cpu_count == psutil.cpu_count(logical=True) and facts.cpu_count >= 1
    assert isinstance(facts.load_1m, float) and facts.load_1m == pytest.approx(os.getloadavg()[0], abs=5.0)
    assert isinstance(facts.cpu_percent, float) and 0.0 <= facts.cpu_percent <= 100.0
    assert isinstance(facts.shm_total_bytes, int) and facts.shm_total_bytes > 0
    for soft, which in ((facts.memlock_soft, resource.RLIMIT_MEMLOCK), (facts.nofile_soft, resource.RLIMIT_NOFILE)):
        raw = resource.getrlimit(which)[0]
        assert soft == (-1 if raw == resource.RLIM_INFINITY else raw)
    if Path("/sys/devices/system/node/node0").is_dir():
        assert isinstance(facts.numa_nodes, int) and facts.numa_nodes >= 1
    assert isinstance(facts.processes, list) and psutil.Process().name() in facts.processes

    # paths are measured once each, in order, under the name they were given
    assert [d.path for d in facts.disks] == ["/", "/tmp", "/nonexistent/dir", str(not_yet)]
    root, _, missing, report_dir = facts.disks
    for d in facts.disks:
        assert isinstance(d.total_bytes, int) and d.total_bytes > 0
        assert isinstance(d.free_bytes, int) and 0 <= d.free_bytes <= d.total_bytes
    # a directory that does not exist yet is measured on its nearest existing parent
    assert missing.total_bytes == root.total_bytes and missing.mountpoint == root.mountpoint == "/"
    assert not not_yet.exists()
    assert report_dir.total_bytes == psutil.disk_usage(str(tmp_path)).total
    parent_mount = tmp_path.resolve()
    while not os.path.ismount(parent_mount):
        parent_mount = parent_mount.parent
    assert report_dir.mountpoint == str(parent_mount)


def test_real_machine_facts_are_judged_without_errors(tmp_path: Path) -> None:
    facts = read_system(["/", str(tmp_path / "not-yet")])
    for check_id in SYSTEM_CHECKS:
        for f in judge(check_id, facts):
            assert f.status is not ERROR, f
            assert f.code != "not_available" or check_id == "system.numa", f


def test_services_on_a_replay_are_the_recorded_hosts() -> None:
    replayed = GpuFacts(source="replay:node.json", available=True, gpus=ONE_GPU.gpus)
    recorded = SystemFacts(hostname="n1", processes=["nvidia-persistenced"])
    ctx = CheckContext(host="n1", facts={"system": recorded, "gpu": replayed}, config=Config())
    assert [f.status for f in get_check("system.services").fn(ctx)] == [Status.PASS]
    missing = CheckContext(host="n1", facts={"system": SystemFacts(hostname="n1", processes=[]), "gpu": replayed},
                           config=Config())
    assert [f.code for f in get_check("system.services").fn(missing)] == ["service_missing"]


@pytest.mark.parametrize("check_id", host_checks())
def test_every_host_check_skips_when_the_snapshot_has_no_host_facts(check_id: str) -> None:
    absent = SystemFacts(hostname="replay:node.json", not_recorded="not in the snapshot")
    replayed = GpuFacts(source="replay:node.json", available=True, gpus=ONE_GPU.gpus)
    ctx = CheckContext(host="replay:node.json", facts={"system": absent, "gpu": replayed}, config=Config())
    (finding,) = get_check(check_id).fn(ctx)
    assert (finding.status, finding.code) == (Status.SKIP, "not_recorded")
    assert "not in the snapshot" in finding.summary
