"""libfabric (fi_info, fi_pingpong), InfiniBand port listings and perftest against the corpus facts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.parsers.errors import ParseError
from gpu_preflight.parsers.infiniband import canonical_state, parse_devinfo, parse_ibstat, parse_ibstatus
from gpu_preflight.parsers.libfabric import parse_info, parse_pingpong
from gpu_preflight.parsers.perftest import parse as parse_perftest

from .evidence_facts import parsed

FIXTURES = Path(__file__).parent / "fixtures" / "evidence"


def providers(data: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(p["provider"], p["fabric"], p["domain"], p["version"], p["type"], p["protocol"])
            for p in data["providers"]]


FI_INFO: dict[str, list[tuple[Any, ...]]] = {
    "awscdi-fi_info-p-efa-t-rdm-single.txt": [
        ("efa", "EFA-fe80::4dd:7eff:fe99:4620", "rdmap0s6-rdm", "2.0", "FI_EP_RDM", "FI_PROTO_EFA")],
    "cscs-fi_info-p-cxi-working.txt": [("cxi", "cxi", "cxi0", "0.1", "FI_EP_RDM", "FI_PROTO_CXI")],
    "hpctut-fi_info-p-efa-113.20.txt": [
        ("efa", "EFA-fe80::4b4:caff:fe96:3ba0", "rdmap0s6-rdm", "113.20", "FI_EP_RDM", "FI_PROTO_EFA"),
        ("efa", "EFA-fe80::4b4:caff:fe96:3ba0", "rdmap0s6-dgrm", "113.20", "FI_EP_DGRAM", "FI_PROTO_EFA")],
    "libfabric-efa-building-fi_info-p-efa.txt": [
        ("efa", "EFA-fe80::df:57ff:fe1a:beb3", "efa_0-rdm", "112.0", "FI_EP_RDM", "FI_PROTO_EFA"),
        ("efa", "EFA-fe80::df:57ff:fe1a:beb3", "efa_0-dgrm", "112.0", "FI_EP_DGRAM", "FI_PROTO_EFA")],
    "libfabric-man-fi_info-v-verbs-rxd-mlx5.txt": [
        ("verbs;ofi_rxd", "IB-0xfe80000000000000", "mlx5_0-dgram", "116.0", "FI_EP_RDM", "FI_PROTO_RXD")],
    "libfabric-man-fi_info-verbs-dgram-and-tcp.txt": [
        ("verbs", "IB-0xfe80000000000000", "mlx5_0-dgram", "116.0", "FI_EP_DGRAM", "FI_PROTO_IB_UD"),
        ("tcp", "192.168.7.0/24", "eth0", "116.0", "FI_EP_MSG", "FI_PROTO_SOCK_TCP")],
}


@pytest.mark.parametrize("name", sorted(FI_INFO))
def test_fi_info_providers(corpus: Path, name: str) -> None:
    data = parsed(corpus, f"libfabric/{name}")
    assert providers(data) == FI_INFO[name] and data["error_code"] is None


def test_fi_info_no_provider_is_an_answer(corpus: Path) -> None:
    data = parsed(corpus, "libfabric/cscs-fi_info-p-cxi-not-working-61.txt")
    assert (data["providers"], data["error_code"], data["error"]) == ([], -61, "No data available")
    old = parse_info((FIXTURES / "fi_info-p-efa-none-libfabric-1.17.txt").read_text())  # older: no strerror text
    assert (old.providers, old.error_code, old.error) == ([], -61, None)


def test_fi_info_real_tcp_provider_of_libfabric_1_17() -> None:
    record = parse_info((FIXTURES / "fi_info-p-tcp-libfabric-1.17.txt").read_text())
    assert record.providers and {p.provider for p in record.providers} <= {"tcp;ofi_rxm", "tcp"}
    assert {p.version for p in record.providers} == {"117.0"}
    assert any(p.type == "FI_EP_MSG" for p in record.providers)


def test_fi_pingpong_tables(corpus: Path) -> None:
    data = parsed(corpus, "libfabric/awscdi-efa_test-fi_pingpong-efa.txt")
    rows = data["rows"]
    assert [r["size_bytes"] for r in rows] == [64, 256, 1024, 4096, 65536, 1048576]
    assert (rows[0]["mb_per_s"], rows[0]["usec_per_xfer"], rows[0]["iterations"]) == (0.05, 1362.35, 10)
    assert (rows[-1]["total_bytes"], rows[-1]["time_s"], rows[-1]["mb_per_s"], rows[-1]["usec_per_xfer"],
            rows[-1]["mxfers_per_s"]) == (20 * 1024**2, 0.01, 2359.0, 444.5, 0.0)
    real = parse_pingpong((FIXTURES / "fi_pingpong-tcp-msg-client-libfabric-1.17.txt").read_text())
    assert len(real.rows) == 6 and real.rows[-1].size_bytes == 1024**2 and real.rows[-1].iterations == 5


def ports(data: dict[str, Any]) -> dict[str, list[tuple[Any, ...]]]:
    return {d["name"]: [(p["port"], p["state"], p["physical_state"], p["rate_gbps"], p["link_layer"])
                        for p in d["ports"]] for d in data["devices"]}


def test_ibstat_corpus(corpus: Path) -> None:
    nine = parsed(corpus, "infiniband/gpud-ibstat-a100-9ca-all-active.txt")
    assert [d["name"] for d in nine["devices"]] == [f"mlx5_{i}" for i in range(9)]
    assert ports(nine)["mlx5_0"] == [(1, "ACTIVE", "LINKUP", 200.0, "Ethernet")]
    assert ports(nine)["mlx5_8"] == [(1, "ACTIVE", "LINKUP", 200.0, "InfiniBand")]
    assert (nine["devices"][0]["ca_type"], nine["devices"][0]["firmware"]) == ("MT4126", "22.35.2302")
    assert {d["firmware"] for d in nine["devices"][1:]} == {"28.37.1014"}

    panic = parsed(corpus, "infiniband/gpud-ibstat-a100-ibpanic-mlx5_8-missing.txt")
    assert [d["name"] for d in panic["devices"]] == [f"mlx5_{i}" for i in range(8)]
    assert {d["ca_type"] for d in panic["devices"]} == {"MT4124"}
    assert panic["errors"] == ["ibpanic: [1400444] main: stat of IB device 'mlx5_8' failed: No such file or directory"]

    roce = parsed(corpus, "infiniband/gpud-ibstat-h100-12ca-roce-all-active.txt")
    names = [d["name"] for d in roce["devices"]]
    assert names[:4] == ["mlx5_0", "mlx5_1", "mlx5_10", "mlx5_11"] and len(names) == 12
    assert {p[4] for pl in ports(roce).values() for p in pl} == {"Ethernet"}
    assert sorted(n for n, pl in ports(roce).items() if pl[0][3] == 100.0) == ["mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"]

    down = ports(parsed(corpus, "infiniband/gpud-ibstat-h100-3-eth-ports-down.txt"))
    assert sorted(n for n, pl in down.items() if pl[0][1] == "DOWN") == ["mlx5_2", "mlx5_7", "mlx5_8"]
    assert down["mlx5_2"] == [(1, "DOWN", "DISABLED", 40.0, "Ethernet")]
    assert down["mlx5_1"] == [(1, "ACTIVE", "LINKUP", 100.0, "Ethernet")]

    bond = parsed(corpus, "infiniband/gpud-ibstat-h100-8x400g-ib-plus-bond.txt")
    assert "mlx5_2" not in ports(bond) and ports(bond)["mlx5_bond_0"] == [(1, "ACTIVE", "LINKUP", 200.0, "Ethernet")]
    assert next(d for d in bond["devices"] if d["name"] == "mlx5_bond_0")["ca_type"] == "MT41692"

    fdr = parsed(corpus, "infiniband/heioy-ibstat-2x-mlx4-fdr-4ports.txt")
    assert ports(fdr) == {n: [(1, "ACTIVE", "LINKUP", 56.0, "InfiniBand"), (2, "ACTIVE", "LINKUP", 56.0, "InfiniBand")]
                          for n in ("mlx4_0", "mlx4_1")}
    assert [[p["lid"] for p in d["ports"]] for d in fdr["devices"]] == [[10, 12], [1, 4]]
    assert [d["ports"][0]["sm_lid"] for d in fdr["devices"]] == [9, 7]


def test_ibstatus_corpus(corpus: Path) -> None:
    azure = ports(parsed(corpus, "infiniband/gpud-ibstatus-a100-azure-9dev.txt"))
    assert len(azure) == 9
    assert sorted(pl[0][3] for pl in azure.values()) == [40.0] + [200.0] * 8
    assert {pl[0][1:3] for pl in azure.values()} == {("ACTIVE", "LINKUP")}
    fdr = parsed(corpus, "infiniband/heioy-ibstatus-mlx4-fdr.txt")
    assert ports(fdr) == {"mlx4_0": [(1, "ACTIVE", "LINKUP", 56.0, "InfiniBand"),
                                     (2, "ACTIVE", "LINKUP", 56.0, "InfiniBand")]}
    assert [(p["lid"], p["sm_lid"]) for p in fdr["devices"][0]["ports"]] == [(3, 3), (2, 2)]


def test_ibv_devinfo_port_down(corpus: Path) -> None:
    data = parsed(corpus, "infiniband/heioy-ibv_devinfo-v-mlx4_1-port2.txt")
    assert ports(data) == {"mlx4_1": [(2, "DOWN", "POLLING", 10.0, "InfiniBand")]}  # 4X x 2.5 Gbps
    assert data["devices"][0]["firmware"] == "2.42.5000"
    assert (data["devices"][0]["ports"][0]["lid"], data["devices"][0]["ports"][0]["sm_lid"]) == (0, 0)


@pytest.mark.parametrize(("printed", "state"), [
    ("Active", "ACTIVE"), ("4: ACTIVE", "ACTIVE"), ("PORT_ACTIVE (4)", "ACTIVE"), ("1: DOWN", "DOWN"),
    ("PORT_INIT (2)", "INIT"), ("LinkUp", "LINKUP"), ("5: LinkUp", "LINKUP"), ("POLLING (2)", "POLLING"),
    ("Disabled", "DISABLED"), ("", None),
])
def test_port_states_are_canonical(printed: str, state: str | None) -> None:
    assert canonical_state(printed) == state


def test_perftest_corpus(corpus: Path) -> None:
    roce = parsed(corpus, "infiniband/deepops-ib_write_bw-roce-cx5-100g.txt")
    assert (roce["test"], roce["device"], roce["transport"], roce["connection_type"], roce["link_layer"],
            roce["bw_unit"]) == ("RDMA_Write BW Test", "mlx5_0", "IB", "RC", "Ethernet", "Gb/sec")
    assert roce["rows"] == [{"size_bytes": 65536, "iterations": 5000, "bw_peak_gbps": 92.42, "bw_avg_gbps": 92.4,
                             "msg_rate_mpps": 0.17623, "latency_usec": None}]  # a bandwidth run: no latency
    assert roce["warnings"][0].startswith("Conflicting CPU frequency values detected")

    mib = 1024 * 1024 * 8 / 1e9
    send = parsed(corpus, "infiniband/efalab-ib_send_bw-efa-srd-m6i.txt")
    assert (send["transport"], send["connection_type"], send["bw_unit"]) == ("Unknown", "SRD", "MiB/sec")
    assert len(send["rows"]) == 13 and send["rows"][-1]["size_bytes"] == 8192
    assert send["rows"][-1]["bw_peak_gbps"] == round(10987.64 * mib, 4)
    assert send["rows"][-1]["msg_rate_mpps"] == 1.140448

    write = parsed(corpus, "infiniband/efalab-ib_write_bw-efa-srd-m6i.txt")
    assert len(write["rows"]) == 23 and write["rows"][0]["size_bytes"] == 2
    assert write["bw_avg_max_gbps"] == round(8258.26 * mib, 4) and write["bw_peak_max_gbps"] == round(11041.07 * mib, 4)
    assert (write["rows"][-1]["bw_peak_gbps"], write["rows"][-1]["bw_avg_gbps"]) == (
        round(8574.49 * mib, 4), round(5979.70 * mib, 4))

    failed = parsed(corpus, "infiniband/efalab-ib_send_bw-addr-error.txt")
    assert failed["rows"] == [] and failed["errors"] == [
        "Received 10 times ADDR_ERROR", "Unable to perform rdma_client function",
        "Unable to init the socket connection"]


@pytest.mark.parametrize(("parse", "text", "message"), [
    (parse_info, "hello\n", "no 'provider:' entry"),
    (parse_pingpong, "bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec\n64 10 =10\n", "3 values for 8"),
    (parse_ibstat, "Port 1:\n", "no \"CA"),
    (parse_ibstat, "CA 'mlx5_0'\n\tgarbage line without colon\n", "unexpected line"),
    (parse_ibstatus, "state: 4: ACTIVE\n", "no \"Infiniband device"),
    (parse_devinfo, "port: 1\n", "no 'hca_id:'"),
    (parse_perftest, " #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n 65536 5000\n",
     "2 values for 5"),
    (parse_perftest, "nothing\n", "no perftest result row"),
])
def test_malformed_fabric_outputs(parse: Any, text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse(text)


# --- issue 27, fourth field round: ibv_devinfo -v's physical state and quoted port lines -------------------------

def test_devinfo_v_link_up_is_the_linkup_physical_state() -> None:
    """ibv_devinfo -v prints 'phys_state: LINK_UP (5)'; read as ibstat's LinkUp, an ACTIVE port with it is up."""
    from gpu_preflight.config import Config
    from gpu_preflight.evidence import judge_text
    from gpu_preflight.model import Status
    text = ("hca_id:\tmlx5_bond_0\n\ttransport:\t\t\tInfiniBand (0)\n\tphys_port_cnt:\t\t\t1\n\t\tport:\t1\n"
            "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tphys_state:\t\tLINK_UP (5)\n\t\t\tlink_layer:\t\tEthernet\n")
    findings = [(f.status, f.code) for f in judge_text(text, Config(), source="x") if f.check_id == "ib.ports"]
    assert findings == [(Status.PASS, "ok")]


def test_quoted_devinfo_port_lines_are_a_fragment_whose_state_is_not_shown() -> None:
    """The lines people quote about a RoCE GID index (nccl#769): physical state and GIDs, no port state. Read as a
    fragment of ibv_devinfo; the port is neither passed nor judged down, and the verdict is ERROR (incomplete)."""
    from gpu_preflight.config import Config
    from gpu_preflight.evidence import judge_text
    from gpu_preflight.model import Status
    from gpu_preflight.parsers.detect import detect_kind
    text = ("\t\t\tphys_state:\t\tLINK_UP (5)\n"
            "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:0ac0:ebff:feda:1cfb, RoCE v1\n"
            "\t\t\tGID[  3]:\t\t::ffff:200.0.209.6, RoCE v2\n")
    assert detect_kind(text) == "ibv-devinfo"
    findings = judge_text(text, Config(), source="x")
    assert not any(f.check_id == "ib.ports" and f.code == "port_down" for f in findings)
    assert Status.worst(f.status for f in findings) is Status.ERROR
