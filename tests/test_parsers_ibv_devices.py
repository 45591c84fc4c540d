"""``ibv_devices`` and a node GUID of zeros (issue 27; the real texts are openembedded/meta-openembedded#86,
openshift/sriov-network-device-plugin#20 and k8snetworkplumbingwg/sriov-network-operator#267 in
tests/fixtures/field/fabric). Format as libibverbs/examples/device_list.c prints it: ``    %-16s\\t   node GUID``,
``    %-16s\\t----------------`` with ``------``, then ``    %-16s\\t%016llx`` per device."""

from __future__ import annotations

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text
from gpu_preflight.parsers.errors import ParseError

HEAD = "    device          \t   node GUID\n    ------          \t----------------\n"


def verdicts(text: str) -> list[tuple[Status, str, str]]:
    return [(f.status, f.code, f.subject) for f in judge_text(text, Config(), source="x") if f.check_id == "ib.ports"]


def test_a_listing_reads_each_device_and_its_guid() -> None:
    text = HEAD + "    mlx5_0          \t506b4b0300285028\n    mlx5_1          \t506b4b0300285034\n"
    assert detect_kind(text) == "ibv-devices"
    _kind, record = parse_text(text, "ibv-devices")
    assert [(d.name, d.node_guid) for d in record.devices] == [("mlx5_0", "506b4b0300285028"),
                                                               ("mlx5_1", "506b4b0300285034")]
    # devices without a word about their ports: nothing to pass, nothing to fail
    assert verdicts(text) == [(Status.SKIP, "no_port_state", "x")]


def test_the_header_alone_is_a_node_without_an_rdma_device() -> None:
    assert detect_kind("root@host:/# ibv_devices\n" + HEAD) == "ibv-devices"
    assert [(s, c) for s, c, _ in verdicts(HEAD)] == [(Status.FAIL, "device_error")]


def test_a_zero_guid_is_a_device_never_given_its_identity_on_either_node() -> None:
    text = ("server\n" + HEAD + "    mlx5_2          \t0000000000000000\n    mlx5_0          \t506b4b0300285028\n"
            "client\n" + HEAD + "    mlx5_1          \t0000000000000000\n")
    assert verdicts(text) == [(Status.FAIL, "guid_unset", "x/mlx5_2"), (Status.FAIL, "guid_unset", "x/mlx5_1")]


def test_ibstat_and_ibv_devinfo_name_a_zero_node_guid_too_but_efa_has_none_by_design() -> None:
    ibstat = ("CA 'mlx5_8'\n\tCA type: MT4126\n\tNumber of ports: 1\n\tNode GUID: 0x0000000000000000\n"
              "\tSystem image GUID: 0x0c42a10300c6cf52\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n"
              "\t\tRate: 25\n\t\tLink layer: Ethernet\n")
    assert ("guid_unset", Status.FAIL) in {(c, s) for s, c, _ in verdicts(ibstat)}
    devinfo = ("hca_id:\tmlx5_7\n\ttransport:\t\t\tInfiniBand (0)\n\tnode_guid:\t\t\t0000:0000:0000:0000\n"
               "\tphys_port_cnt:\t\t\t1\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
               "\t\t\tlink_layer:\t\tInfiniBand\n")
    assert ("guid_unset", Status.FAIL) in {(c, s) for s, c, _ in verdicts(devinfo)}
    efa = ibstat.replace("mlx5_8", "efa_0").replace("Ethernet", "Unknown")
    assert verdicts(efa) == [(Status.PASS, "ok", "x")]


def test_a_table_with_another_header_is_not_ibv_devices() -> None:
    assert detect_kind("device   node GUID\nmlx5_0   506b4b0300285028\n") != "ibv-devices"


def test_rows_cut_from_their_header_are_read_and_a_header_cut_from_its_rule_is_no_listing() -> None:
    """A paste cut above the rule keeps the rows it shows (a zero GUID still fails); one that keeps a header
    without its rule, or a rule without rows, says neither that the node has no device nor which ones it has."""
    cut = "    ------          \t----------------\n    mlx5_0          \t0000000000000000\n" + HEAD.splitlines()[0]
    assert detect_kind(cut) == "ibv-devices"
    assert [(s, c) for s, c, _ in verdicts(cut)] == [(Status.FAIL, "guid_unset")]
    with pytest.raises(ParseError):
        parse_text(HEAD.splitlines()[0] + "\nmlx5_0 is down\n", "ibv-devices")
    with pytest.raises(ParseError):
        parse_text(HEAD.splitlines()[1] + "\n", "ibv-devices")


def test_the_sniffer_answers_zero_for_any_other_text() -> None:
    """Scored directly (detect_kind hides a sniffer that raises): no listing, no score, whatever the length."""
    from gpu_preflight.parsers.ibv_devices import sniff
    assert [sniff(t) for t in ("", "x", "a\nb\nc\n", "------ ----------------\n")] == [0, 0, 0, 0]
