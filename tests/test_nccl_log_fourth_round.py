"""NCCL job logs of the fourth field round (issue 27): WARN lines as plugins and hand copies print them, torchrun's
own record of the worker that died, and topology detection that cannot see the GPU's PCI path.

The texts follow the tools' format strings: NCCL's logger prints "<caller>:<line> NCCL WARN", the caller being the
file for NCCL itself and the function for a net plugin (aws-ofi-nccl's NCCL_OFI_WARN passes __func__:
awslabs/awsome-distributed-ai#203); a hand copy may drop the line number ("ibvwrap.cc: NCCL WARN", NVIDIA/nccl#769);
torch/distributed/elastic/multiprocessing/api.py logs "failed (exitcode: %s) local_rank: %s (pid: %s) of binary: %s"
(pytorch/pytorch#126544); graph/xml.cc's getPciPath warns "Could not find real path of %s" and returns
ncclSystemError, while net_ib.cc's "Could not find real path of <dev> (<path>)" carries on (NVIDIA/nccl#442).
"""

from __future__ import annotations

import pytest

from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind

from .nccl_log_judging import kinds, triage


@pytest.mark.parametrize(("text", "kind"), [
    # a net plugin's WARN: its function, not a file, before the line number; no host:pid:tid prefix pasted
    ("register_rail_mr_buffer:617 NCCL WARN NET/OFI Unable to register memory (type = 2) for device 4. RC: -22, "
     "Error: Invalid argument\n", "net_plugin_error"),
    # NCCL's file without its line number, inside Markdown italics
    ("_ibvwrap.cc: NCCL WARN Call to ibv_modify_qp failed with error Connection timed out_\n", "ib_qp_error"),
])
def test_a_warn_line_without_nccls_usual_file_and_line_is_still_read(text: str, kind: str) -> None:
    assert detect_kind(text) == "nccl-log"
    assert kinds(text) == [kind]
    assert triage(text) == [(Status.FAIL, kind)]


def test_prose_that_names_nccl_warn_is_no_log() -> None:
    assert detect_kind("Set NCCL_DEBUG=WARN and look for NCCL WARN lines in the output of rank 0.\n") is None


@pytest.mark.parametrize("tail", ["binary: /tmp/venv/bin/python3", "fn: train (start_method: spawn)"])
def test_torchruns_record_of_the_worker_that_died_is_the_rank_that_exited(tail: str) -> None:
    """Frames of the watchdog's abort and torchrun's line: no other signature, yet the job lost a rank."""
    text = ("Exception raised from ncclCommWatchdog at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1418 "
            "(most recent call first):\n"
            "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7fefa74cf897 in libc10.so)\n\n"
            "E0517 08:24:03.805000 140617718325696 torch/distributed/elastic/multiprocessing/api.py:826] failed "
            f"(exitcode: -6) local_rank: 0 (pid: 970611) of {tail}\n")
    assert kinds(text) == ["rank_exited"]
    assert triage(text) == [(Status.FAIL, "rank_exited")]


def test_torchruns_line_alone_is_a_job_log() -> None:
    """A paste that kept torchrun's line but neither the watchdog's frames nor a torch traceback path (the
    clean-clone run's middle cut of pytorch#126544) is still the log of a job that lost a rank."""
    text = ("frame #4: <unknown function> + 0x126850 (0x7fefa8631850 in /lib/x86_64-linux-gnu/libc.so.6)\n\n"
            "E0517 08:24:03.805000 140617718325696 torch/distributed/elastic/multiprocessing/api.py:826] failed "
            "(exitcode: -6) local_rank: 0 (pid: 970611) of binary: /tmp/venv/bin/python3\n"
            "Traceback (most recent call last):\n")
    assert detect_kind(text) == "nccl-log"
    assert triage(text) == [(Status.FAIL, "rank_exited")]


def test_a_gpu_pci_path_topology_cannot_resolve_is_a_system_error() -> None:
    text = ("DESKTOP:36629:36635 [0] graph/xml.cc:332 NCCL WARN Could not find real path of "
            "/sys/class/pci_bus/0000:21/../../0000:21:00.0\n"
            "DESKTOP:36629:36635 [0] NCCL INFO graph/xml.cc:469 -> 2\n")
    assert kinds(text) == ["system_error"]
    assert triage(text) == [(Status.FAIL, "system_error")]


def test_net_ibs_device_path_warning_is_not_fatal() -> None:
    """net_ib.cc warns about an IB device's path and goes on without it: a warning, as NCCL treats it."""
    text = ("node-1:10:20 [0] transport/net_ib.cc:104 NCCL WARN Could not find real path of mlx5_0 "
            "(/sys/class/infiniband/mlx5_0/device)\n")
    assert triage(text) == [(Status.WARN, "nccl_warn")]
