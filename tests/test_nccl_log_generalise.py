"""NCCL job logs as the field pastes them (issue 27): detection by the strongest evidence in any line,
tolerant of the prefixes and quoting a paste adds, and a healthy log judged on what it states.

Each text is a line quoted from a public thread of the field corpus (tests/fixtures/field/nccl-log,
whose SOURCES.toml keeps the provenance), or built from NCCL's own message formats. Before these
rules each was unrecognised (exit 3), missed its signature, or a healthy log was never a PASS.
"""

from __future__ import annotations

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text

from .nccl_log_judging import kinds, triage

# --- detection: NCCL's own texts wherever a line holds them -----------------------------------------------------

# NVIDIA/nccl#302: the error lines as the reporter quoted them, in GitHub inline code.
BACKTICKS = ("Some ranks crash with:\n\n"
             "`NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:410, unhandled system error, "
             "NCCL version 2.5.6`\n\n`NCCL WARN Call to ibv_modify_qp failed with error No such device`\n")
# horovod#1651: TensorFlow's exception around Horovod's "ncclCommInitRank failed: <ncclGetErrorString>".
FRAMEWORK = ("    inputs, attrs, num_outputs)\ntensorflow.python.framework.errors_impl.UnknownError:  "
             "ncclCommInitRank failed: unhandled system error\n"
             "srun: error: jwc09n018: task 1: Exited with exit code 1\n")
# DeepEP#106: a terminal copy whose lines ran together, starting mid-word.
PADDED = ("ith exception: NCCL error: remote process exited or there was a network error, NCCL version 2.20.5  "
          "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely."
          "          Last error:          NET/IB : Got completion from peer 172.21.17.89<38536> with error 5, "
          "opcode 48, len 32710, vendor err 249          Exception raised from checkForNCCLErrorsInternal\n")


@pytest.mark.parametrize(("text", "kind"), [
    (BACKTICKS, "system_error"),
    (FRAMEWORK, "system_error"),
    (PADDED, "ib_completion_error"),
])
def test_nccl_error_texts_anywhere_in_a_line_are_a_job_log(text: str, kind: str) -> None:
    assert detect_kind(text) == "nccl-log"
    assert kinds(text)[0] == kind
    assert triage(text)[0] == (Status.FAIL, kind)


def test_a_quoted_bare_nccl_warn_line_keeps_its_signature() -> None:
    """A paste that dropped NCCL's host:pid:tid prefix, inside a "> " quote or inline code."""
    for text in ("> NCCL WARN Call to ibv_modify_qp failed with error No such device\n",
                 "`NCCL WARN Call to ibv_modify_qp failed with error No such device`\n"):
        assert detect_kind(text) == "nccl-log" and kinds(text) == ["ib_qp_error"]


def test_prose_that_names_nccl_is_not_a_log() -> None:
    """The rules read NCCL's message formats, not the word: a sentence about NCCL errors stays unrecognised."""
    assert detect_kind("We saw an NCCL error in our run and the ncclCommInitRank call failed twice.\n") is None


# --- prefixes: vLLM's logger, a plain date and time ---------------------------------------------------------------

# NVIDIA/nccl#1591: vLLM on Ray, every line after Ray's actor prefix and vLLM's "LEVEL MM-DD HH:MM:SS file:line] ".
VLLM = ("(RayWorkerWrapper pid=335, ip=10.1.0.67) ERROR 01-29 07:44:33 worker_base.py:467]     raise "
        "RuntimeError(f\"NCCL error: {error_str}\")\n(RayWorkerWrapper pid=335, ip=10.1.0.67) ERROR 01-29 07:44:33 "
        "worker_base.py:467] RuntimeError: NCCL error: internal error - please report this issue to the NCCL "
        "developers\n")
VLLM_NEW = "INFO 08-26 09:12:24 [pynccl.py:70] RuntimeError: NCCL error: unhandled cuda error\n"
# NVIDIA/nccl#1283: Ray's prefix, then a space-separated timestamp before NCCL's own prefix.
DATED = ("(train_rft pid=2657296) 2024-05-11 14:10:52.227 n176-080-198:2657296:2658232 [0] include/alloc.h:102 "
         "NCCL WARN Cuda failure 1 'invalid argument'\n")


def test_vllm_logger_prefix_is_read_past() -> None:
    assert detect_kind(VLLM) == "nccl-log" and kinds(VLLM) == ["internal_error"]
    assert detect_kind(VLLM_NEW) == "nccl-log" and kinds(VLLM_NEW) == ["cuda_error"]


def test_a_date_and_time_before_nccls_prefix_keeps_the_host() -> None:
    _kind, record = parse_text(DATED, "nccl-log")
    sig = record.signatures[0]
    assert (sig.kind, sig.host, sig.pid, sig.device) == ("cuda_error", "n176-080-198", 2657296, 0)


# --- torch's watchdog, as fragments ------------------------------------------------------------------------------

# jpata/particleflow#390: only the frames of the watchdog's exception were pasted.
FRAMES = ("frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, "
          "std::ratio<1l, 1000l> > >) + 0x1d2 (0x1554e9e0f8f2 in /x/torch/lib/libtorch_cuda.so)\n"
          "frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x1554e9e16333 in /x/libtorch_cuda.so)\n"
          "Exception raised from ncclCommWatchdog at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1521 "
          "(most recent call first):\n")


def test_watchdog_frames_alone_are_a_timeout() -> None:
    assert detect_kind(FRAMES) == "nccl-log"
    assert kinds(FRAMES) == ["watchdog_timeout"]


def test_watchdog_frames_without_check_timeout_are_read_but_not_called_a_timeout() -> None:
    """The watchdog thread also raises on an NCCL error: only checkTimeout's frame says it was a timeout."""
    text = FRAMES.split("\n", 1)[1]
    assert detect_kind(text) == "nccl-log" and kinds(text) == []


def test_watchdog_line_after_a_tag_is_detected() -> None:
    """Megatron-LM#1207's title: the watchdog record after a "[BUG] " tag."""
    text = ("[BUG] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, "
            "NumelOut=1, Timeout(ms)=600000) ran for 600013 milliseconds before timing out.\n")
    assert detect_kind(text) == "nccl-log" and kinds(text) == ["watchdog_timeout"]


def test_pre_2_12_completion_error_without_peer() -> None:
    """NVIDIA/nccl#707 (NCCL 2.7.6): the completion error before NCCL named the peer."""
    text = ("10-90-43-152:120890:121585 [0] transport/net_ib.cc:818 NCCL WARN NET/IB : Got completion with error 4, "
            "opcode 21394, len 0, vendor err 81\n")
    assert kinds(text) == ["ib_completion_error"]
    assert detect_kind(text.split("NCCL WARN ", 1)[1]) == "nccl-log"


# --- a healthy log: PASS on what it states ------------------------------------------------------------------------

HEALTHY = (
    "node1:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
    "node1:1234:1234 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation\n"
    "node1:1234:1234 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>\n"
    "node1:1234:1234 [0] NCCL INFO Using network IB\n"
    "NCCL version 2.18.3+cuda12.2\n"
    "node1:1234:1300 [0] NCCL INFO ncclCommInitRank comm 0x5581a0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 "
    "commId 0x49bbd7 - Init START\n"
    "node1:1234:1300 [0] NCCL INFO Channel 00/02 :    0   1\n"
    "node1:1234:1300 [0] NCCL INFO ncclCommInitRank comm 0x5581a0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 "
    "commId 0x49bbd7 - Init COMPLETE\n"
    "node2:999:1010 [0] NCCL INFO comm 0x7f10 rank 1 nranks 2 cudaDev 0 busId 2000 - Init COMPLETE\n")


def test_initialised_communicators_without_a_failure_pass() -> None:
    findings = [f for f in judge_text(HEALTHY, Config(), source="job.log") if f.check_id == "nccl_log.triage"]
    assert [(f.status, f.code) for f in findings] == [(Status.PASS, "ok")]
    assert findings[0].observed == 2 and "2.18.3" in findings[0].summary


def test_an_init_that_never_completed_is_not_a_pass() -> None:
    """Init START without its COMPLETE (a hang in init, or a paste cut there): no failure shown, no success either."""
    text = HEALTHY + ("node2:999:1011 [0] NCCL INFO ncclCommSplit comm 0x9a rank 1 nranks 2 cudaDev 0 nvmlDev 0 "
                      "busId 2000 commId 0x11 - Init START\n")
    findings = [f for f in judge_text(text, Config(), source="job.log") if f.check_id == "nccl_log.triage"]
    assert [(f.status, f.code) for f in findings] == [(Status.SKIP, "no_signature")]
    assert "1 communicator rank(s) started init without completing it" in findings[0].summary


def test_no_plugin_then_nccls_own_ib_transport_is_no_fallback_warning() -> None:
    """'No plugin found, using internal implementation' then NET/IB in use: NCCL's fast path, not sockets."""
    assert "net_plugin_fallback" not in kinds(HEALTHY)
    socket_only = HEALTHY.replace("NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB", "NET/Socket : Using [0]") \
        .replace("Using network IB", "Using network Socket")
    assert triage(socket_only) == [(Status.WARN, "net_plugin_fallback")]
