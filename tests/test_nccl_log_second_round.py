"""NCCL job logs of the second field round (issue 27): failure kinds the corpus had few of.

Each text is quoted from a public thread of the field corpus (tests/fixtures/field/nccl-log, whose
SOURCES.toml keeps the provenance), or built from NCCL's own message formats (src/misc/shmutils.cc,
src/proxy.cc, include/socket.h of NCCL < 2.3). Before these rules each was read without a signature
(SKIP, which the run's coverage turned into ERROR) or not recognised as a job log at all.
"""

from __future__ import annotations

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text
from gpu_preflight.parsers.nccl_log import NCCL_RESULT_KINDS, classify

from .nccl_log_judging import kinds, triage

# pytorch/ci-infra#490 and ai-dynamo/dynamo#1408: /dev/shm too small in a container (NCCL 2.2x's timestamped prefix).
SHM_FULL = ("[2026-04-22 21:34:20] runner:202016:202235 [0] misc/shmutils.cc:88 NCCL WARN Error: failed to extend "
            "/dev/shm/nccl-WU88OE to 9637892 bytes, error: No space left on device (28)\n")
SHM_CREATE = ("node:15016:15201 [1] misc/shmutils.cc:129 NCCL WARN Error while creating shared memory segment "
              "/dev/shm/nccl-YrFC5V (size 33030528), error: No space left on device (28)\n")
SHM_ATTACH = ("g148:14937:69361 [0] misc/shmutils.cc:129 NCCL WARN Error while attaching to shared memory segment "
              "/dev/shm/nccl-glnlGK (size 14156128), error: No such file or directory (2)\n")
SHM_FALLOCATE = ("gpu2:2143:2561 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on "
                 "device\n")


@pytest.mark.parametrize("text", [SHM_FULL, SHM_CREATE, SHM_ATTACH, SHM_FALLOCATE])
def test_a_shared_memory_segment_nccl_could_not_make_is_a_system_error(text: str) -> None:
    assert kinds(text) == ["system_error"]
    assert triage(text) == [(Status.FAIL, "system_error")]


# PKU-YuanGroup/Open-Sora-Plan#386, NVIDIA/TensorRT-LLM#1670, NVIDIA/nccl#1235: NCCL's own allocation failed.
@pytest.mark.parametrize("text", [
    "ins-7df6:3018451:3018451 [0] enqueue.cc:1085 NCCL WARN Cuda failure 'out of memory'\n",
    "ng30903:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 2 'out of memory'\n",
    "ng30903:3063028:3066152 [3] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 6291456 bytes\n",
])
def test_cuda_out_of_memory_inside_nccl_is_out_of_memory_not_a_cuda_fault(text: str) -> None:
    assert kinds(text) == ["out_of_memory"]


# NVIDIA/nccl-tests#111: the proxy's failed operation names its ncclResult_t.
@pytest.mark.parametrize(("code", "kind"), [(2, "system_error"), (6, "remote_error"), (1, "cuda_error"),
                                            (5, "invalid_usage"), (3, "internal_error"), (42, "internal_error")])
def test_a_failed_proxy_operation_is_read_by_its_result_code(code: int, kind: str) -> None:
    text = (f"host-67:406794:406838 [0] proxy.cc:1040 NCCL WARN [Proxy Service 8] Failed to execute operation "
            f"Connect from rank 8, retcode {code}\n")
    assert kinds(text) == [kind]
    assert NCCL_RESULT_KINDS.get(code, "internal_error") == kind


def test_the_proxy_return_path_lines_are_no_signature() -> None:
    """NCCL's "proxy.cc:914 -> 2" INFO lines trace the return path; only the WARN names the failure."""
    assert classify("host:406794:406838 [0] NCCL INFO proxy.cc:914 -> 2") is None


# NVIDIA/nccl#1176 (bootstrap), #268 and sail-sg/zero-bubble-pipeline-parallelism#60 (socket transport).
@pytest.mark.parametrize("text", [
    "0: node-1:34639:36718 [5] bootstrap.cc:77 NCCL WARN Message truncated : received 256 bytes instead of 4\n",
    "hvd1:2918:3333 [0] transport/net_socket.cc:200 NCCL WARN NET/Socket : message truncated : receiving 696320 "
    "bytes instead of 32768\n",
    "h200-10:74737:75914 [1] transport/net_socket.cc:488 NCCL WARN NET/Socket : peer 10.0.5.194<41988> message "
    "truncated : receiving 4 bytes instead of 2. If you believe your socket network is in healthy state\n",
])
def test_a_truncated_message_is_invalid_usage_between_ranks(text: str) -> None:
    assert kinds(text) == ["invalid_usage"]
    finding = next(f for f in judge_text(text, Config(), source="job.log") if f.check_id == "nccl_log.triage")
    assert "disagree" in (finding.recommendation or "")


# NVIDIA/nccl-tests#15 (NCCL 2.2.13) and NVIDIA/nccl#210 (2019): WARN/INFO without "NCCL".
OLD_PREFIXED = ("NCCL version 2.2.13+cuda9.0\n"
                "gpu-bql-144-103:18553:18612 [0] INFO comm 0x7fa42c00a3b0 rank 0 nranks 2\n"
                "gpu-bql-144-103:18553:18611 [0] include/socket.h:360 WARN Call to connect failed : Connection timed "
                "out\n"
                "gpu-bql-144-103:18553:18611 [0] INFO bootstrap.cu:28 -> 2 [Net]\n")
OLD_BARE = "include/socket.h:344 WARN Socket creation failed : Address family not supported by protocol\n"


def test_pre_2_3_lines_are_a_job_log_with_their_signatures() -> None:
    assert detect_kind(OLD_PREFIXED) == "nccl-log"
    assert kinds(OLD_PREFIXED) == ["connection_refused"]
    _kind, record = parse_text(OLD_PREFIXED, "nccl-log")
    assert record.signatures[0].host == "gpu-bql-144-103"
    assert record.signatures[0].detail.startswith("Call to connect failed")  # "WARN" is no part of the message
    assert detect_kind(OLD_BARE) == "nccl-log"
    assert kinds(OLD_BARE) == ["system_error"]


@pytest.mark.parametrize("text", [
    "src/main.c:12 WARN disk almost full\n",  # a path outside NCCL's tree
    "server:12:34 WARNING: low memory\n",  # no [dev] field, and WARNING is not NCCL's WARN
])
def test_other_programs_warn_lines_are_not_an_nccl_log(text: str) -> None:
    assert detect_kind(text) != "nccl-log"
