"""How ranks leave (who carries the verdict, torch elastic's error file) and torchrun's
rendezvous view of the job's hosts — read back with torch's own classes, not a copy of them."""

from __future__ import annotations

import base64
import os
import pickle
import subprocess
import sys
import time
from collections import OrderedDict
from datetime import datetime
from pathlib import Path

import pytest

from gpu_preflight.backends.launcher.rendezvous_view import agent_settings, parse_endpoint, participants
from gpu_preflight.backends.launcher.topology import Launcher
from gpu_preflight.distributed.leave import carries_verdict, process_gone, verdict_text, write_error_file
from gpu_preflight.findings.model import ClusterReport

from .torch_extra import torch_or_skip

errors = torch_or_skip("torch.distributed.elastic.multiprocessing.errors")
rdzv = torch_or_skip("torch.distributed.elastic.rendezvous.dynamic_rendezvous")


@pytest.mark.parametrize(("launcher", "reporting", "node_carrier", "carries"), [
    (Launcher.TORCHRUN, True, False, True),   # the rank that took over from a silent rank 0
    (Launcher.TORCHRUN, False, True, True),   # every agent must see one of its workers fail
    (Launcher.TORCHRUN, False, False, False),
    (Launcher.SLURM, True, True, True),
    (Launcher.SLURM, False, True, False),     # srun passes the highest task code: one carrier is enough
    (Launcher.OPENMPI, False, True, False),   # mpirun aborts the job at the first non-zero exit
    (Launcher.SELF, False, True, False),
])
def test_who_carries_the_verdict(launcher: Launcher, reporting: bool, node_carrier: bool, carries: bool) -> None:
    assert carries_verdict(launcher, reporting=reporting, node_carrier=node_carrier) is carries


def test_torchrun_summary_shows_the_verdict_line(tmp_path: Path) -> None:
    path = tmp_path / "attempt_0" / "0" / "error.json"
    line = "gpu-preflight FAIL (exit 2): [RESULT] FAILURE: [nccl.correctness]"
    assert write_error_file(line, 2, {"TORCHELASTIC_ERROR_FILE": str(path)}) == path
    failure = errors.ProcessFailure(local_rank=0, pid=123, exitcode=2, error_file=str(path))
    text = errors.ChildFailedError("gpu_preflight", {0: failure}).format_msg()
    assert f"traceback : {line}" in text and "exitcode  : 2" in text
    assert abs(failure.timestamp - time.time()) < 60  # torchrun picks the first failure by it


def test_no_error_file_at_exit_zero_or_without_the_variable(tmp_path: Path) -> None:
    assert write_error_file("x", 0, {"TORCHELASTIC_ERROR_FILE": str(tmp_path / "e.json")}) is None
    assert not (tmp_path / "e.json").exists()
    assert write_error_file("x", 2, {}) is None


def test_verdict_text_is_one_bounded_line() -> None:
    finding = {"node": "cluster", "check_id": "nccl.correctness", "status": "FAIL", "subject": "cluster", "code": "x",
               "summary": "wrong sums"}
    report = {"cluster_summary": {"overall_status": "FAIL", "exit_code": 2, "issues": ["a\nb"] + ["x" * 200] * 9,
                                  "counts": {"FAIL": 1}},
              "findings": [finding], "run": {"fail_on": "fail"}}
    text = verdict_text(ClusterReport.of(report))
    assert text.startswith("gpu-preflight FAIL (exit 2): ") and "nccl.correctness" in text
    assert "\n" not in text and len(text) <= 500


def test_process_gone_sees_exits_and_zombies() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    while not process_gone(child.pid):  # a zombie until reaped: gone all the same
        time.sleep(0.05)
    child.wait()
    assert process_gone(child.pid) and not process_gone(os.getpid())


def test_agent_settings_from_env_or_torchrun_argv() -> None:
    argv = ["python", "torchrun", "--nnodes=3", "--rdzv-backend", "c10d", "--rdzv_endpoint=10.250.0.1:29811",
            "--rdzv_id=gpns", "-m", "gpu_preflight", "run"]
    assert agent_settings({}, argv) == {"backend": "c10d", "endpoint": "10.250.0.1:29811", "id": "gpns"}
    assert agent_settings({"PET_RDZV_ENDPOINT": "head:1"}, argv)["endpoint"] == "head:1"
    assert parse_endpoint("10.250.0.1:29811") == ("10.250.0.1", 29811)
    assert parse_endpoint("head") == ("head", 29400) and parse_endpoint("[::1]:5") == ("::1", 5)


def test_rendezvous_participants_name_each_node_rank() -> None:
    state = rdzv._RendezvousState()
    for rank, addr in enumerate(["10.250.0.1", "10.250.0.2", "10.250.0.3"]):
        state.participants[rdzv._NodeDesc(addr, 1000 + rank, 0)] = rank
        state.last_heartbeats[rdzv._NodeDesc(addr, 1000 + rank, 0)] = datetime.now()
    assert participants(base64.b64encode(pickle.dumps(state))) == {0: "10.250.0.1", 1: "10.250.0.2",
                                                                    2: "10.250.0.3"}


def test_rendezvous_state_with_other_classes_is_refused() -> None:
    with pytest.raises(pickle.UnpicklingError):
        participants(base64.b64encode(pickle.dumps(OrderedDict(participants={}))))  # not a rendezvous class
