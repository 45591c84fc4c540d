"""The fabric tools' output forms beside fabric.md's, derived from their own source (issue 27;
docs/repertoire/fabric-diags.md): iproute2's ``rdma link``, MLNX OFED's ``ibdev2netdev`` and mlnx-tools'
``show_gids``.

Each fixture under ``tests/fixtures/repertoire/fabric-diags/`` renders one format string of the tool's source with
plausible values (PROVENANCE.md there names the repository, commit or tag and file:line of each). The test says what
``gpu-preflight judge`` must make of it: the kind it is read as and the ``ib.*`` finding it gives.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text

FORMS = Path(__file__).parent / "fixtures" / "repertoire" / "fabric-diags"


def form(name: str) -> str:
    return (FORMS / name).read_text()


def findings(text: str, check: str) -> list[tuple[Status, str]]:
    return [(f.status, f.code) for f in judge_text(text, Config(), source="n1") if f.check_id == check]


def ports(text: str) -> list[tuple[str, int, str | None, str | None, str | None]]:
    _, record = parse_text(text)
    return [(d.name, p.port, p.state, p.physical_state, p.link_layer) for d in record.devices for p in d.ports]


# rdma link (iproute2 rdma/link.c)

@pytest.mark.parametrize(("name", "expected", "verdict"), [
    # v4.13-v5.4: "%u/%u: %s: " (index/port: dev/port:) before the same fields
    ("rdma-link-v4-ib-down.txt", [("mlx5_0", 1, "ACTIVE", "LINKUP", "InfiniBand"),
                                  ("mlx5_1", 1, "DOWN", "POLLING", "InfiniBand")], [(Status.FAIL, "port_down")]),
    ("rdma-link-v5.0-ib-active.txt", [("mlx5_0", 1, "ACTIVE", "LINKUP", "InfiniBand"),
                                      ("mlx5_1", 1, "ACTIVE", "LINKUP", "InfiniBand")], [(Status.PASS, "ok")]),
    ("rdma-link-v5.0-roce-active.txt", [("mlx5_2", 1, "ACTIVE", "LINKUP", "Ethernet")], [(Status.PASS, "ok")]),
    # -j (v5.5-): one object per port; -jp before v5.5: "ifname": "dev/port", pretty-printed
    ("rdma-link-j.txt", [("mlx5_0", 1, "ACTIVE", "LINKUP", "InfiniBand"),
                         ("mlx5_1", 1, "DOWN", "POLLING", "InfiniBand")], [(Status.FAIL, "port_down")]),
    ("rdma-link-jp-v4.txt", [("mlx5_0", 1, "ACTIVE", "LINKUP", "InfiniBand"),
                             ("mlx5_1", 1, "ARMED", "LINKUP", "InfiniBand")], [(Status.FAIL, "port_down")]),
])
def test_rdma_link_forms_before_v5_5_and_its_json_are_read_as_the_link_lines(
        name: str, expected: list[tuple[str, int, str, str, str]], verdict: list[tuple[Status, str]]) -> None:
    text = form(name)
    assert detect_kind(text) == "rdma-link"
    assert ports(text) == expected
    assert findings(text, "ib.ports") == verdict


@pytest.mark.parametrize(("name", "verdict"), [
    ("rdma-link-d-caps-init.txt", [(Status.FAIL, "port_down")]),  # -d: netdev_index and a caps line; INIT is no pass
    ("rdma-link-roce-disabled.txt", [(Status.WARN, "port_down")]),  # an Ethernet port down WARNs, as ibstat's does
])
def test_rdma_link_forms_already_read(name: str, verdict: list[tuple[Status, str]]) -> None:
    text = form(name)
    assert detect_kind(text) == "rdma-link"
    assert findings(text, "ib.ports") == verdict


def test_a_cut_rdma_link_json_array_is_not_a_listing() -> None:
    """A JSON array cut before its end does not show every port: not read as a listing (unrecognised, exit 3)."""
    text = form("rdma-link-jp-v4.txt")
    assert detect_kind(text[:300]) is None


# ibdev2netdev (MLNX OFED ofed_scripts/ibdev2netdev)

@pytest.mark.parametrize(("name", "verdict"), [
    ("ibdev2netdev-plain.txt", [(Status.WARN, "netdev_down")]),  # the interface's carrier only
    ("ibdev2netdev-v-down-padded.txt", [(Status.FAIL, "port_down")]),  # printf "%-6s": "(DOWN  )"
    ("ibdev2netdev-v-no-pci-no-vpd-init.txt", [(Status.FAIL, "port_down")]),  # no PCI name, no VPD: "(MT4123 - NA)"
])
def test_ibdev2netdev_forms(name: str, verdict: list[tuple[Status, str]]) -> None:
    text = form(name)
    assert detect_kind(text) == "ibdev2netdev"
    assert findings(text, "ib.ports") == verdict


def test_ibdev2netdev_old_style_shows_no_state_and_is_not_read() -> None:
    """The pre-dev_id script's '<dev> port N <===> <if>' names the interface only: nothing to judge (exit 3)."""
    assert detect_kind(form("ibdev2netdev-oldstyle.txt")) is None


# show_gids (mlnx-tools sbin/show_gids)

def test_show_gids_rows_without_a_version_are_gids() -> None:
    """Where gid_attrs/types cannot be read the script prints the row with empty VER and DEV columns: the GIDs are
    listed all the same (they FAILed 'show_gids lists no GID' beside n_gids_found=2)."""
    text = form("show_gids-no-gid-attrs.txt")
    assert detect_kind(text) == "show-gids"
    _, record = parse_text(text)
    assert [(e.index, e.version, e.netdev) for e in record.entries] == [(0, None, None), (1, None, None)]
    assert findings(text, "ib.gids") == [(Status.PASS, "ok")]  # InfiniBand GIDs (no netdev): no v2 needed


def test_show_gids_roce_port_whose_versions_are_not_shown_is_no_pass() -> None:
    """A RoCE port whose GIDs carry no version has no RoCE v2 GID known: WARN as a port without one, saying why."""
    text = form("show_gids-roce-no-gid-types.txt")
    found = [f for f in judge_text(text, Config(), source="n1") if f.check_id == "ib.gids"]
    assert [(f.status, f.code) for f in found] == [(Status.WARN, "no_routable_v2_gid")]
    assert "no RoCE version" in found[0].summary


def test_show_gids_ib_and_roce_rows() -> None:
    text = form("show_gids-ib-and-roce.txt")
    _, record = parse_text(text)
    assert [(e.version, e.ipv4, e.netdev) for e in record.entries] == [("v1", None, None),
                                                                       ("v2", "10.0.0.2", "ens1f0np0")]
    assert findings(text, "ib.gids") == [(Status.PASS, "ok")]


# ibportstate / smpquery portinfo (rdma-core infiniband-diags, libibmad's PortInfo dump)

@pytest.mark.parametrize(("name", "port", "verdict"), [
    ("ibportstate-query-ca-active.txt", ("Lid 13399", 1, "ACTIVE", "LINKUP", "InfiniBand"), [(Status.PASS, "ok")]),
    ("ibportstate-query-ca-down.txt", ("Lid 13400", 1, "DOWN", "POLLING", "InfiniBand"),
     [(Status.FAIL, "port_down")]),
    # 'Initial CA/RT PortInfo:' Down, then 'After PortInfo set:' Active: the port as it is now
    ("ibportstate-enable-initial-then-after.txt", ("Lid 13400", 1, "ACTIVE", "LINKUP", "InfiniBand"),
     [(Status.PASS, "ok")]),
])
def test_a_portinfo_dump_is_judged_as_ibstat_port(name: str, port: tuple[str, int, str, str, str],
                                                  verdict: list[tuple[Status, str]]) -> None:
    """ibportstate's query (and smpquery portinfo) print LinkState/PhysLinkState with libibmad's names: the
    ib.ports rules judge them as ibstat's (they were unrecognised, a port Down/Polling included)."""
    text = form(name)
    assert detect_kind(text) == "ibportstate"
    assert ports(text) == [port]
    assert findings(text, "ib.ports") == verdict


def test_a_portinfo_dump_rate_is_width_times_the_lanes_data_rate() -> None:
    """4X at LinkSpeedExtActive 53.125 Gbps (HDR signalling) is ibstat's Rate 200, not 212.5."""
    _, record = parse_text(form("ibportstate-query-ca-active.txt"))
    assert record.devices[0].ports[0].rate_gbps == 200.0


def test_a_failed_portinfo_query_is_read_but_not_judged() -> None:
    """IBEXIT's 'ibportstate: iberror: failed: smp query portinfo failed' alone: the port was not read (ERROR, never
    a pass, and not a port down: the LID may be one no SMP reaches)."""
    text = form("ibportstate-iberror-portinfo.txt")
    assert detect_kind(text) == "ibportstate"
    assert [(f.check_id, f.status) for f in judge_text(text, Config(), source="n1")] == [
        ("evidence.parse", Status.ERROR)]


# mlxlink (Mellanox/mstflint mlxlink/, NVIDIA MFT): the PHY's view of one port

@pytest.mark.parametrize(("name", "port", "verdict"), [
    # State is the PHY manager's: Active is a link up; for Ethernet (RoCE) that is the port up
    ("mlxlink-eth-400g-active.txt", ("mlxlink", 1, "ACTIVE", "LINKUP", "Ethernet"), [(Status.PASS, "ok")]),
    ("mlxlink-eth-disable.txt", ("mlxlink", 1, "DOWN", "DISABLE", "Ethernet"), [(Status.WARN, "port_down")]),
    # Polling with Speed N/A: InfiniBand by Supported Info's IB speed names; a port down
    ("mlxlink-ib-polling-unplugged.txt", ("mlxlink", 1, "DOWN", "POLLING", "InfiniBand"),
     [(Status.FAIL, "port_down")]),
    # an InfiniBand link up: the port's logical state (Init until the SM brings it Active) is not shown
    ("mlxlink-ib-hdr-active.txt", ("mlxlink", 1, None, "LINKUP", "InfiniBand"), [(Status.SKIP, "no_port_state")]),
])
def test_mlxlink_operational_info_is_judged_by_ib_ports(name: str, port: tuple[str, int, str | None, str, str],
                                                        verdict: list[tuple[Status, str]]) -> None:
    """mlxlink was unrecognised (exit 3), a port whose cable is unplugged included."""
    text = form(name)
    assert detect_kind(text) == "mlxlink"
    assert ports(text) == [port]
    assert findings(text, "ib.ports") == verdict


def test_an_infiniband_link_up_in_mlxlink_alone_is_no_pass() -> None:
    """The physical link up is not the port up (no subnet manager leaves it Init): nothing PASSes, the run is ERROR."""
    found = judge_text(form("mlxlink-ib-hdr-active.txt"), Config(), source="n1")
    assert Status.PASS not in {f.status for f in found}
