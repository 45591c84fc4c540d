"""Issue 27 (field corpus F): one test per rule learned from the nccl-tests and fabric field cases of that batch.

Each rule is a pattern seen in a public paste (the field case named in the docstring); the texts
here are short lines of the same shape, so that the repository alone holds the rule in place, and
each test also shows the text the rule must *not* take.
"""

from __future__ import annotations

import pytest

from gpu_preflight.checks.evidence import judge_record
from gpu_preflight.checks.ib_rails import rail_sets
from gpu_preflight.config import Config
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind
from gpu_preflight.parsers.errors import ParseError
from gpu_preflight.parsers.infiniband import parse_devinfo, parse_ibstat
from gpu_preflight.parsers.libfabric import parse_pingpong
from gpu_preflight.parsers.nccl_tests import parse as parse_nccl_tests
from gpu_preflight.parsers.perftest import parse as parse_perftest

_STARTED = ("# nThread 1 nGpus 4 minBytes 8 maxBytes 268435456 step: 2(factor) warmup iters: 5 iters: 20 "
            "validation: 1\n"
            "#\n# Using devices\n"
            "#   Rank  0 Pid  15833 on gpu-host device  0 [0x02] GeForce GTX 1080 Ti\n"
            "#   Rank  1 Pid  15833 on gpu-host device  1 [0x03] GeForce GTX 1080 Ti\n")
_INFO = ("gpu-host:15833:15833 [0] NCCL INFO Bootstrap : Using [0]eth0:10.2.3.32<0>\n"
         "gpu-host:15833:15833 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so).\n"
         "gpu-host:15833:15833 [0] NCCL INFO Setting affinity for GPU 0 to ff00ff\n")


def test_nccl_tests_run_that_stopped_before_its_table_is_an_unfinished_run() -> None:
    """nccl#257, nccl#606, nccl-tests#244: the parameter line and device lines, then NCCL INFO setup lines and
    nothing else (a hang): nccl-tests cut before its first result, not a job log with a plugin fallback."""
    text = _STARTED + _INFO
    assert detect_kind(text) == "nccl-tests"
    record = parse_nccl_tests(text)
    assert not record.rows and record.nranks == 2
    assert record.incomplete[0].startswith("the run printed its parameters/devices but no column header")
    # the device lines alone (a paste that lost the parameter line) are nccl-tests' too
    assert detect_kind(_STARTED.split("\n", 1)[1] + _INFO) == "nccl-tests"
    # what it must not take: the same setup lines without nccl-tests' own lines stay a job log
    assert detect_kind(_INFO) == "nccl-log"
    with pytest.raises(ParseError):
        parse_nccl_tests(_INFO)


def test_nccl_tests_run_that_stopped_on_a_named_nccl_failure_is_judged_on_that_warning() -> None:
    """The run stopped, and an NCCL WARN says why: nccl-tests reads it as the run's cause (``warn_causes``, since
    a09eb6b), so the text stays nccl-tests whether or not a paste kept the WARN line (nccl-tests#217, cut above
    it, flipped to nccl-log and back) and FAILs on the named failure; a plugin fallback alone is no such reason."""
    failing = _STARTED + _INFO + ("gpu-host:15833:15840 [0] misc/socket.cc:484 NCCL WARN Net : Connect to "
                                  "10.2.3.33<43677> failed : Connection refused\n")
    assert detect_kind(failing) == "nccl-tests"
    assert detect_kind(_STARTED + _INFO) == "nccl-tests"
    record = parse_nccl_tests(failing)
    assert [group.signature for group in record.warn_causes] != []
    findings = list(judge_record("nccl-tests", record, Config(), source="t"))
    assert Status.FAIL in {f.status for f in findings}
    assert not parse_nccl_tests(_STARTED + _INFO).warn_causes  # the plugin fallback names no cause


def test_fi_pingpong_log_lines_are_a_pingpong_that_did_not_complete() -> None:
    """libfabric#11256: fi_pingpong -v that could not reach its peer prints only its log lines; the [error]
    line is the failure, [debug] lines are not (even one that says 'failed')."""
    text = ("[debug] util/pingpong.c:283 :   - provider            : efa\n"
            "[debug] util/pingpong.c:459 : Initializing control messages\n"
            "[debug] util/pingpong.c:460 : nothing failed yet\n"
            "[error] util/pingpong.c:373 : failed to connect: Connection refused\n"
            "[debug] util/pingpong.c:1858: Resources of test suite freed\n")
    assert detect_kind("$ fi_pingpong -e rdm -p efa 10.0.0.1 -v\n" + text) == "fi-pingpong"
    record = parse_pingpong(text)
    assert record.rows == [] and record.errors == ["[error] util/pingpong.c:373 : failed to connect: "
                                                   "Connection refused"]
    findings = list(judge_record("fi-pingpong", record, Config(), source="t"))
    assert [(f.check_id, f.status) for f in findings] == [("fabric.pingpong", Status.FAIL)]
    # what it must not take: C log lines of another program that never names pingpong
    assert detect_kind("[error] src/main.c:12 : cannot open config\n") != "fi-pingpong"


def test_perftest_that_finds_no_rdma_device_is_a_perftest_failure() -> None:
    """k8s-rdma-shared-dev-plugin#169: ib_write_bw in a pod without the device prints three lines and stops."""
    text = "ib_write_bw \n Did not detect devices \n If device exists, check if driver is up\n" \
           " Unable to find the Infiniband/RoCE device\n"
    assert detect_kind(text) == "perftest"
    record = parse_perftest(text)
    assert record.rows == [] and record.errors == ["Unable to find the Infiniband/RoCE device"]
    # what it must not take: perftest's own advice line alone is no failure line
    assert detect_kind(" If device exists, check if driver is up\n") is None


def test_perftest_test_name_with_several_words() -> None:
    """perftest#273: 'RDMA_Write Post List BW Test' (and 'Bidirectional') name the test too."""
    text = ("                    RDMA_Write Post List BW Test\n Dual-port       : OFF\t\tDevice         : ib0\n"
            "---------------------------------------------------------------------------------------\n"
            " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
            " 8          224958464        0.00               0.48   \t\t   7.498617\n")
    record = parse_perftest(text)
    assert (record.test, record.device, record.bw_avg_max_gbps) == ("RDMA_Write Post List BW Test", "ib0", 0.48)
    assert parse_perftest(text.replace("Post List ", "")).test == "RDMA_Write BW Test"


def test_ibv_devinfo_with_no_device_is_a_device_error() -> None:
    """infra-controller#5251: without the vendor libibverbs providers ibv_devinfo says 'No IB devices found'
    (libibverbs' warning before it says why): no device verbs can open is a FAIL, not an unreadable text."""
    text = ("root@scout:~# ibv_devinfo\n"
            "libibverbs: Warning: couldn't open config directory '/etc/libibverbs.d'.\nNo IB devices found\n")
    assert detect_kind(text) == "ibv-devinfo"
    record = parse_devinfo(text)
    assert record.devices == []
    assert record.errors == ["No IB devices found (libibverbs: Warning: couldn't open config directory "
                             "'/etc/libibverbs.d'.)"]
    findings = list(judge_record("ibv-devinfo", record, Config(), source="t"))
    assert [(f.check_id, f.status, f.code) for f in findings] == [("ib.ports", Status.FAIL, "device_error")]
    # what it must not take: a text with neither an hca_id nor that line is still no ibv_devinfo
    with pytest.raises(ParseError):
        parse_devinfo("libibverbs: Warning: couldn't open config directory '/etc/libibverbs.d'.\n")


def _ca(name: str, guid: str, state: str, physical: str, rate: int) -> str:
    return (f"CA '{name}'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tFirmware version: 28.45.4028\n"
            f"\tHardware version: 0\n\tNode GUID: 0x{guid}4\n\tSystem image GUID: 0x{guid}0\n\tPort 1:\n"
            f"\t\tState: {state}\n\t\tPhysical state: {physical}\n\t\tRate: {rate}\n\t\tBase lid: 0\n"
            f"\t\tLMC: 0\n\t\tSM lid: 0\n\t\tCapability mask: 0x00010000\n\t\tPort GUID: 0x{guid}5\n"
            "\t\tLink layer: Ethernet\n")


def test_ports_of_one_card_are_not_rails() -> None:
    """sbc-reviews#92: a GB10's QSFP cages show as four PCIe functions of one card (one System image GUID);
    with one cage cabled, two are Active and the other cage's functions are Down: not a missing rail.
    The same layout on separate cards (one GUID each) is a rail set with a rail down."""
    one_card = (_ca("roceP2p1s0f0", "fc4cea0300f9423", "Active", "LinkUp", 200)
                + _ca("roceP2p1s0f1", "fc4cea0300f9423", "Down", "Disabled", 40)
                + _ca("rocep1s0f0", "fc4cea0300f9423", "Active", "LinkUp", 200))
    record = parse_ibstat(one_card)
    assert {d.system_guid for d in record.devices} == {"0xfc4cea0300f94230"}
    assert rail_sets(record) == {}
    statuses = {f.status for f in judge_record("ibstat", record, Config(), source="t")}
    assert statuses == {Status.WARN}
    three_cards = (_ca("mlx5_0", "a088c20300adeab", "Active", "LinkUp", 400)
                   + _ca("mlx5_1", "a088c20300bb98b", "Down", "Disabled", 40)
                   + _ca("mlx5_2", "a088c20300adeaa", "Active", "LinkUp", 400))
    assert rail_sets(parse_ibstat(three_cards)) == {"MT4129": (2, 3)}
    assert Status.FAIL in {f.status for f in judge_record("ibstat", parse_ibstat(three_cards), Config(), source="t")}
