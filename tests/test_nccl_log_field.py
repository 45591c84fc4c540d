"""NCCL log wordings of the field (issue 27): today's IB queue-pair failure, NCCL's ``Cuda failure``
WARN, and torch's pre-2.0 watchdog lines. Each line below is quoted from a public thread (the
field corpus keeps the threads' provenance); before, each was unrecognised (exit 3) or missed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind

from .nccl_log_judging import kinds

FIELD = Path(__file__).parent / "fixtures" / "field" / "nccl-log"
# NVIDIA/nccl issue 2013 (the wording issue 27 names), nccl-tests issue 188, OFA-Sys/OFA issue 271.
QP_TIMEOUT = ("[2026-03-13 22:26:02] host-01.example.com:12345 [5] ibvwrap.c:262 NCCL WARN Call to ibv_modify_qp "
              "failed with 110 Connection timed out, on dev mlx_x:1, curr state INIT, next state RTR, local GID "
              "index 3, local GID ::ffff:xxx.xx.xx.xx, remote GID ::ffff:xxx.xx.xxx.xx\n")
QP_UNREACHABLE = "dgxh100-3:2152176:2152299 [0] misc/ibvwrap.cc:187 NCCL WARN Call to ibv_modify_qp failed with " \
                 "error Network is unreachable\n"
CUDA_FAILURE = "user:16901:16967 [909195890] include/alloc.h:39 NCCL WARN Cuda failure 'driver shutting down'\n"
OLD_WATCHDOG = (FIELD / "watchdog-old-format-ofa-271.txt").read_text()


@pytest.mark.parametrize("text", [QP_TIMEOUT, QP_UNREACHABLE])
def test_ibv_modify_qp_failure_is_its_own_signature(text: str) -> None:
    assert detect_kind(text) == "nccl-log"
    assert kinds(text) == ["ib_qp_error"]
    findings = judge_text(text, Config(), source="job.log")
    assert [(f.status, f.code) for f in findings if f.check_id == "nccl_log.triage"] == [(Status.FAIL, "ib_qp_error")]


def test_qp_timeout_names_the_state_transition() -> None:
    findings = judge_text(QP_TIMEOUT, Config(), source="job.log")
    triage = next(f for f in findings if f.code == "ib_qp_error")
    assert "INIT, next state RTR" in str(triage.observed) + triage.summary + str(triage.details)
    assert "NCCL_CROSS_NIC" in (triage.recommendation or "")


def test_nccl_cuda_failure_warn_is_a_cuda_error() -> None:
    assert detect_kind(CUDA_FAILURE) == "nccl-log" and kinds(CUDA_FAILURE) == ["cuda_error"]


def test_pre_2_0_watchdog_lines_are_detected() -> None:
    """torch < 2.0 printed ``[E ProcessGroupNCCL.cpp:737]`` without a date: still a job log."""
    assert detect_kind(OLD_WATCHDOG) == "nccl-log"
    assert set(kinds(OLD_WATCHDOG)) == {"watchdog_timeout"}
