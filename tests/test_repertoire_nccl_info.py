"""The transport NCCL states in its NCCL_DEBUG=INFO lines, derived from its source (issue 27;
docs/repertoire/nccl-info.md).

Each fixture under ``tests/fixtures/repertoire/nccl-log/info/`` renders NCCL's INFO format strings (the PROVENANCE.md
there names the repository, tag and file:line of each) into a healthy init that reached ``Init COMPLETE``. A job
whose channels go via NET/Socket, or whose communicator spans nodes (``nNodes 2``) on ``Using network Socket``, runs
several times slower than on IB/RoCE or EFA: a WARN naming the causes the log states; GPUs of one node through SHM
where the log says P2P is off: a WARN. What the log does not state (no node count, no network channel, no P2P
statement) is not guessed: those logs PASS on their init, and a plugin fall-back on one stated node is no warning.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind

from .nccl_log_judging import kinds, triage

FORMS = Path(__file__).parent / "fixtures" / "repertoire" / "nccl-log" / "info"

# (fixture, the finding, words of its summary: what the log states as the cause)
WARNED = (
    ("nccl-2.4-ring-via-net-socket.txt", "net_socket_transport", "NET/IB found no device"),
    ("nccl-2.12-socket-channel-no-ib-device.txt", "net_socket_transport", "no external net plugin was loaded"),
    ("nccl-2.23-socket-no-ib-no-plugin-2-nodes.txt", "net_socket_transport", "(2 nodes)"),
    ("nccl-2.21-socket-ib-disabled-nnodes-only.txt", "net_socket_transport", "NCCL_IB_DISABLE is set"),
    ("nccl-2.19-shm-p2p-disable-env.txt", "p2p_unavailable", "NCCL_P2P_DISABLE set by environment"),
    ("nccl-2.30-shm-could-not-enable-p2p.txt", "p2p_unavailable", "Could not enable P2P between dev 0"),
)

# Healthy: the fabric in use (NET/IB with GDRDMA, aws-ofi-nccl on EFA, old and new wording), one stated node whose
# plugin fall-back carries no traffic (was WARN net_plugin_fallback), SHM with no statement that P2P is off.
HEALTHY = (
    "nccl-2.30-ib-gdrdma-2-nodes.txt",
    "aws-ofi-nccl-1.21-efa-2-nodes.txt",
    "aws-ofi-nccl-1.1-efa-nnodes-only.txt",
    "nccl-2.23-one-node-no-plugin-p2p.txt",
    "nccl-2.23-shm-without-p2p-statement.txt",
)


@pytest.mark.parametrize(("name", "kind", "words"), WARNED)
def test_a_stated_slow_transport_warns(name: str, kind: str, words: str) -> None:
    text = (FORMS / name).read_text()
    assert detect_kind(text) == "nccl-log"
    assert kinds(text) == [kind]
    assert triage(text) == [(Status.WARN, kind)]
    (finding,) = [f for f in judge_text(text, Config(), source="job.log") if f.check_id == "nccl_log.triage"]
    assert words in finding.summary


@pytest.mark.parametrize("name", HEALTHY)
def test_a_healthy_init_on_the_fabric_or_one_node_passes(name: str) -> None:
    text = (FORMS / name).read_text()
    assert kinds(text) == []
    assert triage(text) == [(Status.PASS, "ok")]


def test_socket_instead_of_the_plugin_is_one_warning_not_two() -> None:
    """The fall-back line is the finding's stated cause, not a second warning beside it."""
    text = (FORMS / "nccl-2.23-socket-no-ib-no-plugin-2-nodes.txt").read_text()
    assert "net_plugin_fallback" not in kinds(text)


def test_a_node_count_nor_a_channel_stated_is_not_guessed() -> None:
    """'Using network Socket' without nNodes or a network channel: the transport finding is not inferred from host
    names (the plugin fall-back stays as it was)."""
    text = (FORMS / "nccl-2.21-socket-ib-disabled-nnodes-only.txt").read_text()
    cut = "\n".join(line for line in text.splitlines() if "nNodes" not in line) + "\n"
    assert "net_socket_transport" not in kinds(cut)


def test_a_failure_beside_the_socket_transport_still_fails() -> None:
    text = (FORMS / "nccl-2.12-socket-channel-no-ib-device.txt").read_text() + (
        "gpu-07:14200:14290 [0] misc/socket.cc:540 NCCL WARN Net : Connection closed by remote peer "
        "172.16.4.8<45122>\n")
    assert set(triage(text)) == {(Status.WARN, "net_socket_transport"), (Status.FAIL, "remote_error")}


def test_every_fixture_is_covered() -> None:
    assert {p.name for p in FORMS.glob("*.txt")} == {name for name, _, _ in WARNED} | set(HEALTHY)
