"""``rdma link show`` and ``ibdev2netdev``: one line per RDMA port, judged by the ``ib.ports`` rules on what each
prints (issue 27: real texts in tests/fixtures/field/fabric, deepseek-ai/3FS#263 and #283, ROCm/rccl#1423,
openshift/sriov-network-operator#635, imbue-ai/cluster-health#4).

Line formats as the tools print them: iproute2's rdma/link.c ("link %s/%u ", the InfiniBand-only "subnet_prefix
%s lid %u sm_lid %u lmc %u ", "state %s physical_state %s ", "netdev %s"); MLNX OFED's ibdev2netdev script
("$d port $port ==> $eth ($link_state)", the carrier of /sys/class/net/$eth; with -v "$pci $d ($devid - $partid)
$devdesc fw $fwver port $port ($ibstate) ==> $eth ($link_state)").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text

EVIDENCE = Path(__file__).parent / "fixtures" / "evidence"


def ports(text: str, kind: str) -> list[tuple[str, int, str | None, str | None, str | None, bool | None]]:
    _kind, record = parse_text(text, kind)
    return [(d.name, p.port, p.state, p.physical_state, p.link_layer, p.carrier) for d in record.devices
            for p in d.ports]


def verdicts(text: str) -> list[tuple[Status, str]]:
    return [(f.status, f.code) for f in judge_text(text, Config(), source="x") if f.check_id == "ib.ports"]


def test_rdma_link_reads_state_physical_state_and_the_link_layer_its_fields_show() -> None:
    text = (EVIDENCE / "rdma-link-show-ndr-port-down.txt").read_text()
    assert detect_kind(text) == "rdma-link"
    assert ports(text, "rdma-link") == [("mlx5_0", 1, "ACTIVE", "LINKUP", "InfiniBand", None),
                                        ("mlx5_1", 1, "DOWN", "POLLING", "InfiniBand", None),
                                        ("mlx5_2", 1, "ACTIVE", "LINKUP", "Ethernet", None)]
    assert verdicts(text) == [(Status.FAIL, "port_down")]


def test_rdma_link_ports_all_up_pass_among_other_commands_of_the_paste() -> None:
    text = ("[root@node75 ~]# lspci |grep net\n"
            "86:00.0 Ethernet controller: Mellanox Technologies MT2892 Family [ConnectX-6 Dx]\n"
            "[root@node75 ~]# rdma link show\n"
            "link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev p1p1 \n"
            "link mlx5_1/1 state ACTIVE physical_state LINK_UP netdev p1p2 \n"
            "[root@node75 ~]# ip addr\n"
            "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default qlen 1000\n")
    assert detect_kind(text) == "rdma-link"
    assert verdicts(text) == [(Status.PASS, "ok")]


def test_a_port_listed_again_keeps_the_snapshot_that_was_not_up() -> None:
    """Three runs while the link flapped: down, training, active. It was down during the capture."""
    line = "link mlx5_7/1 subnet_prefix fe80:0000:0000:0000 lid 3403 sm_lid 1 lmc 0 state {} physical_state {}\n"
    text = line.format("DOWN", "POLLING") + line.format("DOWN", "LINK_UP") + line.format("ACTIVE", "LINK_UP")
    assert ports(text, "rdma-link") == [("mlx5_7", 1, "DOWN", "POLLING", "InfiniBand", None)]
    assert verdicts(text) == [(Status.FAIL, "port_down")]


def test_ibdev2netdev_keeps_the_carrier_as_a_carrier_and_down_only_warns() -> None:
    """Plain ibdev2netdev shows the interface's carrier: an unconfigured IPoIB interface reads Down on an ACTIVE
    port, so a Down interface is a WARN to look at, never a FAIL."""
    text = "mlx5_0 port 1 ==> ibp26s0 (Down)  # CX-7 1/8 infiniband\nmlx5_1 port 1 ==> enp27s0f0np0 (Up)\n"
    assert detect_kind(text) == "ibdev2netdev"
    assert ports(text, "ibdev2netdev") == [("mlx5_0", 1, None, None, "InfiniBand", False),
                                           ("mlx5_1", 1, None, None, None, True)]
    assert verdicts(text) == [(Status.WARN, "netdev_down")]
    assert verdicts("mlx5_1 port 1 ==> enp27s0f0np0 (Up)\n") == [(Status.PASS, "ok")]


def test_ibdev2netdev_v_shows_the_port_state_which_is_judged_and_kept_over_the_carrier() -> None:
    text = (EVIDENCE / "ibdev2netdev-ndr.txt").read_text()
    assert detect_kind(text) == "ibdev2netdev"
    assert ports(text, "ibdev2netdev") == [("mlx5_0", 1, "ACTIVE", None, "InfiniBand", True),
                                           ("mlx5_1", 1, "DOWN", None, "InfiniBand", False),
                                           ("mlx5_2", 1, "ACTIVE", None, None, True)]
    assert verdicts(text) == [(Status.FAIL, "port_down")]


def test_a_paste_with_perftests_own_failure_is_read_as_perftest() -> None:
    """The carrier is weaker evidence than a tool that reports the port: perftest's 'Port number 1 state is Down'."""
    text = ("root@pod:/# ibdev2netdev\nmlx5_18 port 1 ==> net1 (Down)\nroot@pod:/# ib_write_bw -a -d mlx5_18 &\n"
            " Port number 1 state is Down\n Couldn't set the link layer\n Couldn't get context for the device\n")
    assert detect_kind(text) == "perftest"


@pytest.mark.parametrize("text", [
    "The link mlx5_0/1 state ACTIVE was fine yesterday.\n",  # no physical_state: prose, not rdma's line
    "mlx5_0 port 1 is mapped to ib0\n",  # no ==> and carrier
])
def test_prose_is_neither_listing(text: str) -> None:
    assert detect_kind(text) is None
