"""Hostile inputs, bounded: no traceback, no hang, bounded memory, and a cut or damaged failure never passes.

A bounded slice of :mod:`tests.fuzz_engine` (seeded, so a failure reproduces); the
long run is ``bench/bench_fuzz.py``. Formats whose output carries a completeness marker
(dcgmi's closing border and JSON document, nccl-tests' summary, the ports ``ibstat`` and
``ibv_devinfo`` announce, nvidia-smi's GPU sections) must never turn a failing fixture
into a PASS when cut or when a value is garbled. Listings without one (dmesg, the fabric manager's log, lspci,
``nvlink -s``, ``ibstatus``, ``ibdev2netdev`` and ``rdma link show`` (a line per port, no count),
and ``ibstat``/``ibv_devinfo`` cut exactly between two devices) cannot tell a cut from a clean
end; for them the test still demands no crash, hang or blow-up, and the bench counts their
false passes. The slice is seeded per fixture, so it is the same on every run.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .fuzz_engine import (
    Case,
    baselines,
    config_cases,
    evidence_cases,
    evidence_fixtures,
    replay_cases,
    run_case,
    run_config,
    run_replay,
)
from .path_cases import COMMANDS, KINDS, hostile_path, run_command

TIME_S, MEMORY_MIB = 10.0, 256.0
NO_END_MARKER = ("dmesg-", "lspci-", "nvlink", "ibstatus-", "ibdev2netdev-", "rdma-link-show-", "fabricmanager-log-")


DEVICE_LISTINGS = {"ibstat-": "CA '", "ibv_devinfo-": "hca_id:"}  # listing -> the line that opens a device


def _guarded(case: Case) -> bool:
    """Whether a false PASS on this case is a failure: not for a format without an end marker, nor
    for a device listing cut exactly between two devices (what is left is a whole listing of fewer
    devices; on a live node ib.ports' NIC count against the profile is what catches a missing one), nor
    for one whose elided lines hold a device's opening line (the paste then shows fewer devices, and an
    elided paste is judged on what it shows: docs/diagnostics.md, the field corpus's elided ibstat cases)."""
    if any(marker in case.source for marker in NO_END_MARKER):
        return False
    opener = next((line for prefix, line in DEVICE_LISTINGS.items() if case.source.startswith(prefix)), None)
    if opener is not None and (m := re.fullmatch(r"lines (\d+)-(\d+) elided", case.mutation)):
        lines = dict(evidence_fixtures())[case.source].splitlines()[int(m.group(1)):int(m.group(2))]
        return not any(line.startswith(opener) for line in lines)
    if opener is None or not case.mutation.startswith("cut after line "):
        return True
    rest = dict(evidence_fixtures())[case.source].splitlines()[int(case.mutation.rsplit(" ", 1)[1]):]
    following = next((line for line in rest if line.strip()), None)
    return following is None or not following.startswith(opener)


def test_fixtures_include_failing_evidence_of_every_marked_format() -> None:
    failing = {name for name, status in baselines().items() if status != "PASS"}
    for name in ("spec-dcgmi-diag-r3-targeted-power-fail.txt", "dcgmi-diag-4.x-fail.json",
                 "nccl-tests-all_reduce-8xh100-wrong.txt", "ibstat-ndr-port-down.txt", "ibv_devinfo-ndr.txt"):
        assert name in failing


@pytest.mark.parametrize("name", [n for n, _ in evidence_fixtures()])
def test_cut_and_damaged_evidence(name: str) -> None:
    rng = random.Random(name)
    problems = []
    for case in evidence_cases(rng, lines_per_cut=12):
        if case.source != name:
            continue
        outcome, detail = run_case(case, time_s=TIME_S, memory_mib=MEMORY_MIB)
        if outcome in ("crash", "hang", "memory") or (outcome == "false_pass" and _guarded(case)):
            problems.append((outcome, case.mutation, detail))
    assert not problems, problems


def test_a_failing_dcgmi_table_cut_after_15_lines_is_not_a_pass() -> None:
    text = dict(evidence_fixtures())["spec-dcgmi-diag-r3-targeted-power-fail.txt"]
    cut = "".join(text.splitlines(keepends=True)[:15])
    assert run_case(Case("spec", "cut", cut, True), time_s=TIME_S, memory_mib=MEMORY_MIB) == ("ok", "ERROR")


def test_a_failing_nccl_tests_log_cut_before_its_summary_is_not_a_pass() -> None:
    text = dict(evidence_fixtures())["nccl-tests-all_reduce-8xh100-wrong.txt"]
    cut = text[:text.index("  2147483648")]
    assert run_case(Case("nccl", "cut", cut, True), time_s=TIME_S, memory_mib=MEMORY_MIB) == ("ok", "ERROR")


def test_replayed_snapshots_load_or_refuse_in_one_line(tmp_path: Path) -> None:
    outcomes = [(what, run_replay(text, tmp_path, time_s=TIME_S, memory_mib=MEMORY_MIB))
                for what, text in replay_cases(random.Random(7), 4)]
    assert not [(what, outcome) for what, outcome in outcomes if outcome[0] != "ok"]
    assert {detail for _, (_, detail) in outcomes} == {"loaded", "refused"}


def test_config_files_load_or_refuse_in_one_line(tmp_path: Path) -> None:
    outcomes = [(what, run_config(data, tmp_path, time_s=TIME_S, memory_mib=MEMORY_MIB))
                for what, data in config_cases(random.Random(7), 12)]
    assert not [(what, outcome) for what, outcome in outcomes if outcome[0] != "ok"]
    assert {detail for _, (_, detail) in outcomes} == {"loaded", "refused"}


# --------------------------------------------------------------------------- launcher variables
# Issue 28 item 10: malformed launcher variables crashed with a traceback (exit 1). Every
# malformed environment must be refused in one line naming the variable (exit 3), or read.

LAUNCHER_ENVS: dict[str, dict[str, str]] = {  # one valid two-process job per launcher
    "slurm": {"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_NUM_NODES": "1", "SLURM_NODEID": "0",
              "SLURM_LOCALID": "0", "SLURM_TASKS_PER_NODE": "2", "SLURM_JOB_ID": "77",
              "SLURM_JOB_NODELIST": "gpu-[1-2]"},
    "torchrun": {"TORCHELASTIC_RUN_ID": "j", "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "GROUP_RANK": "0",
                 "LOCAL_WORLD_SIZE": "2", "GROUP_WORLD_SIZE": "1", "MASTER_PORT": "29500"},
    "openmpi": {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
                "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_NODE_RANK": "0"},
    "pmix": {"PMIX_RANK": "0", "PMIX_SIZE": "2", "PMIX_LOCAL_SIZE": "2", "PMIX_LOCAL_RANK": "0"},
    "kubeflow": {"RANK": "0", "WORLD_SIZE": "2", "PET_NNODES": "2", "NODE_RANK": "0"},
    "sagemaker": {"SM_HOSTS": '["algo-1", "algo-2"]', "SM_CURRENT_HOST": "algo-1"},
}
HOSTILE_VALUES = ("", " ", "abc", "-1", "0", "1e3", "nan", "null", "123", "[]", "{}", "[1]", '["a"', '[""]',
                  "4(x1000000000)", "9" * 5000, "\x01", "\U0001f4a5", "[" * 5000, "gpu-[1-100000000]", "2147483648")
LAUNCHER_VARS = ("MASTER_PORT", "SLURM_TASKS_PER_NODE", "SLURM_NODELIST", "SM_HOSTS", "SM_CURRENT_HOST")
PLACE = "gpu-preflight: Cannot tell this process's place in the job: "
ISSUE_CASES = [{"SM_HOSTS": "123", "SM_CURRENT_HOST": "algo-1"}, {"SM_HOSTS": "null", "SM_CURRENT_HOST": "algo-1"},
               {"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_JOB_NUM_NODES": "0"},
               {"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_JOB_ID": "abc"},
               {"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_TASKS_PER_NODE": "4(x1000000000)"}]


def launcher_cases(rng: random.Random, count: int) -> list[tuple[str, dict[str, str]]]:
    """Seeded: a launcher's valid environment with one variable set to a hostile value."""
    cases = []
    for _ in range(count):
        launcher = rng.choice(sorted(LAUNCHER_ENVS))
        env = dict(LAUNCHER_ENVS[launcher])
        var = rng.choice(sorted({*env, *LAUNCHER_VARS}))
        env[var] = rng.choice(HOSTILE_VALUES)
        cases.append((f"{launcher}:{var}={env[var][:20]!r}", env))
    return cases


def test_malformed_launcher_variables_are_refused_or_read() -> None:
    from gpu_preflight.backends.launcher.topology import TopologyError, detect

    crashes, refused = [], 0
    for what, env in launcher_cases(random.Random(28), 600):
        try:
            detect(env, hostname="h", resource_config=Path("/nonexistent/resourceconfig.json"))
        except TopologyError as exc:
            refused += 1
            if "\n" in str(exc):
                crashes.append((what, f"two lines: {exc}"))
        except Exception as exc:  # anything else is the crash this test looks for
            crashes.append((what, f"{type(exc).__name__}: {exc}"[:200]))
    assert not crashes, crashes
    assert refused > 200  # most hostile values are refused, not silently read


def launcher_free_environ() -> dict[str, str]:
    """This process's environment without any launcher's variables (the tests may run under one)."""
    launcher = {k for env in LAUNCHER_ENVS.values() for k in env} | set(LAUNCHER_VARS) | {"SLURM_NNODES"}
    return {k: v for k, v in os.environ.items()
            if k not in launcher and not k.startswith(("SLURM_", "SM_", "OMPI_", "PMIX_", "PET_", "GPU_PREFLIGHT_"))}


def test_malformed_launcher_environments_exit_3_in_one_line() -> None:
    """The issue's five and a seeded sample that ``detect`` refuses, through the real command line."""
    from gpu_preflight.backends.launcher.topology import TopologyError, detect

    sample = []
    for _, env in launcher_cases(random.Random(2028), 200):
        try:
            detect(env, hostname="h", resource_config=Path("/nonexistent/resourceconfig.json"))
        except TopologyError:
            sample.append(env)
    problems = []
    for env in [*ISSUE_CASES, *sample[:6]]:
        out = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--no-history"],
                             env={**launcher_free_environ(), **env}, capture_output=True, text=True, timeout=120)
        if out.returncode != 3 or not out.stderr.startswith(PLACE) or out.stderr.count("\n") != 1:
            problems.append((env, out.returncode, out.stderr[-300:]))
    assert not problems, problems


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_that_takes_a_path_refuses_what_is_not_a_file(command: str, tmp_path: Path) -> None:
    """A FIFO, /dev/zero, a directory and a 1 GiB sparse file: exit 3 and one line naming the path, at once."""
    problems = []
    for kind in KINDS:
        tmp = tmp_path / kind.replace("/", "_").replace(" ", "_")
        tmp.mkdir()
        with hostile_path(kind, tmp) as path:
            outcome, detail = run_command(command, path, tmp)
        if outcome != "ok":
            problems.append((kind, outcome, detail))
    assert not problems, problems


def test_signals_at_seeded_moments_of_a_live_run(stub_lib: Path, tmp_path: Path) -> None:
    """SIGINT/SIGTERM at 8 seeded moments of a live run on the NVML stub (``tests/signal_cases.py``;
    tests/test_signals.py sends 30, ``bench/bench_fuzz.py --signals`` as many as asked): stopped
    with one line and exit 128 + the signal, or finished; nothing staged left, no report pointing
    at files that are not its own."""
    import json

    from .conftest import H200_DUMP
    from .nvml_stub.gpus import widen
    from .nvml_stub.stub import stub_env, write_stub_data
    from .signal_cases import cases, finished_lines, kill_during_run

    write_stub_data(widen(json.loads(H200_DUMP.read_text())), tmp_path / "nvml.txt")
    env = {k: v for k, v in stub_env(stub_lib, tmp_path / "nvml.txt").items() if not k.startswith("GPU_PREFLIGHT_")}
    normal, run_s = finished_lines(env, tmp_path / "reports")
    outcomes = [kill_during_run(env, tmp_path / "reports", signum, delay, normal)
                for signum, delay in cases(random.Random(2811), 8, run_s)]
    assert [o for o in outcomes if o[0] not in ("stopped", "finished")] == []
