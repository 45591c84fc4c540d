"""The launch and rendezvous forms of torch.distributed, torchrun and gloo, derived from their source (issue 27;
docs/repertoire/torch-distributed.md).

Each fixture under ``tests/fixtures/repertoire/nccl-log/torch-distributed/`` renders one format string (its
PROVENANCE.md names the repository, version and file:line or function). A job that could not rendezvous or lost a
peer is no success: each must be read as a job log and FAIL ``nccl_log.triage`` with the signature its words stand
for, naming the rank, host or peer the text names. Before, the c10d listen failure judged nothing (ERROR
run.coverage), gloo's transport errors, monitoredBarrier and ProcessGroupWrapper's mismatch were not recognised
(exit 3).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Finding, Status
from gpu_preflight.parsers.detect import detect_kind

from .nccl_log_judging import kinds, triage

FORMS = Path(__file__).parent / "fixtures" / "repertoire" / "nccl-log" / "torch-distributed"

# (fixture, the signature kinds read in order, what the finding names: ranks, peers)
CASES: tuple[tuple[str, list[str], list[int], list[str]], ...] = (
    ("c10d-2.4-libuv-server-listen-eaddrinuse.txt", ["store_listen_failed"], [0], []),
    ("c10d-2.0-socket-server-bind-errno98.txt", ["store_listen_failed", "store_listen_failed"], [], []),
    ("c10d-client-socket-timed-out.txt", ["rendezvous_timeout"] * 3, [], ["10.0.4.17:29500"]),
    ("c10d-client-failed-to-connect-refused.txt", ["connection_refused"], [], ["gpu-node-01:29500"]),
    ("tcpstore-wait-for-clients-timeout.txt", ["rendezvous_timeout"], [0], []),
    ("tcpstore-recv-connection-closed.txt", ["remote_error", "remote_error"], [5], []),
    ("elastic-rendezvous-timeout.txt", ["rendezvous_timeout"], [], []),
    ("elastic-rendezvous-closed.txt", ["remote_error"], [], []),
    ("elastic-rendezvous-connection-error.txt", ["rendezvous_timeout", "rendezvous_timeout"], [],
     ["gpu-node-01:29400"]),
    ("elastic-child-failed-sigkill.txt", ["rank_exited"], [11], []),
    ("elastic-child-failed-exitcode-1.txt", ["rank_exited"], [8], []),
    ("gloo-monitored-barrier-rank.txt", ["watchdog_timeout", "watchdog_timeout"], [0, 6], []),
    ("gloo-monitored-barrier-wait-all-ranks.txt", ["watchdog_timeout"] * 3, [2, 5], []),
    ("gloo-pair-connection-closed-by-peer.txt", ["remote_error"], [], ["[10.1.1.1]:29321"]),
    ("gloo-read-error-reset.txt", ["remote_error"], [], ["[10.1.1.2]:47920"]),
    ("gloo-connect-timeout.txt", ["connection_refused"], [], ["[10.1.1.2]:29321"]),
    ("gloo-recv-timeout.txt", ["watchdog_timeout"], [], []),
    ("gloo-application-timeout-pair-closure.txt", ["watchdog_timeout"], [], []),
    ("wrapper-collective-mismatch.txt", ["invalid_usage"], [1], []),
)


def _findings(text: str) -> list[Finding]:
    return [f for f in judge_text(text, Config(), source="job.log") if f.check_id == "nccl_log.triage"]


@pytest.mark.parametrize(("name", "expected", "ranks", "peers"), CASES)
def test_a_launch_form_is_the_failure_it_names(name: str, expected: list[str], ranks: list[int],
                                               peers: list[str]) -> None:
    text = (FORMS / name).read_text()
    assert detect_kind(text) == "nccl-log"
    assert kinds(text) == expected
    assert triage(text) == [(Status.FAIL, expected[0])]
    finding = _findings(text)[0]
    assert finding.details["ranks"] == ranks
    assert finding.details["peers"] == peers


def test_the_monitored_barrier_on_another_rank_points_at_rank_0() -> None:
    """A rank that passed the barrier but lost rank 0 is a victim (collective_failed), and gloo's closed pair under
    it is the peer that went away."""
    text = (FORMS / "gloo-monitored-barrier-other-rank.txt").read_text()
    assert detect_kind(text) == "nccl-log"
    assert triage(text) == [(Status.FAIL, "collective_failed"), (Status.FAIL, "remote_error")]
    assert "from rank 0" in _findings(text)[0].summary


def test_a_sigkilled_rank_names_the_likely_sender_without_claiming_it() -> None:
    """torchrun's -9: a restart_job failure on the rank that died first, the OOM killer named as the usual sender;
    a -6 names its signal; a plain exit code adds nothing."""
    summary = _findings((FORMS / "elastic-child-failed-sigkill.txt").read_text())[0].summary
    assert "exitcode -9" in summary and "SIGKILL" in summary and "OOM killer" in summary
    assert "does not say by whom" in summary
    agent = "failed (exitcode: -6) local_rank: 0 (pid: 970611) of binary: /usr/bin/python3\n"
    assert kinds(agent) == ["rank_exited"]
    assert "signal 6 (SIGABRT)" in _findings(agent)[0].summary
    assert "signal" not in _findings((FORMS / "elastic-child-failed-exitcode-1.txt").read_text())[0].summary


def test_c10d_retries_and_bind_warnings_are_no_failure() -> None:
    """socket.cpp warns once per address it could not reach or bind and then retries or listens on the next one:
    a healthy launch prints these. The final error is the failure (above); NCCL's 'Connection refused' still is."""
    retry = ("[W socket.cpp:663] [c10d] The client socket has failed to connect to [gpu-node-01]:29500 (errno: 111 - "
             "Connection refused).\n")
    assert kinds(retry) == []
    waiting = ("[W1207 12:00:01.000000 811 socket.cpp:752] [c10d] The server socket on [gpu-node-01]:29500 is not yet "
               "listening (errno: 111 - Connection refused), will retry.\n")
    assert kinds(waiting) == []
    bind = ("[W socket.cpp:436] [c10d] The server socket has failed to bind to [::]:29500 (errno: 97 - Address family "
            "not supported by protocol).\n")
    assert kinds(bind) == []
    assert kinds("node1:1:2 [0] NCCL WARN Net : Connect to 10.0.0.2<43211> failed : Connection refused\n") == [
        "connection_refused"]


def test_every_fixture_is_covered() -> None:
    """A fixture added to the folder without a row here would test nothing."""
    assert {p.name for p in FORMS.glob("*.txt")} == {c[0] for c in CASES} | {"gloo-monitored-barrier-other-rank.txt"}
