"""Kernel-log failures beyond plain Xid lines: driver messages, Xid chains, self-described severities,
Xid 154's recovery action, NVSwitch SXids, journal timestamp styles, clock jumps, operator actions.

The log lines are real: each is quoted from a case of the field corpus (tests/fixtures/field/kernel,
provenance in its SOURCES.toml) or from NVIDIA's Xid catalogue text.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gpu_preflight.actions import BY_NVIDIA_ACTION, DETAIL_KEY, Action, strongest, with_action
from gpu_preflight.config import Config
from gpu_preflight.config.xid_policy import RECOVERY_ACTIONS, load_xid_policy
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Finding, Status
from gpu_preflight.parsers.dmesg import parse
from gpu_preflight.parsers.kernel_log import DRIVER_MESSAGES, KernelLineReader, line_timestamp
from gpu_preflight.probes.kernel_log import snapshot_log_facts

FALLEN_NO_XID = """\
[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0
               NVRM: (PCI ID: 10de:26b5) installed in this system has
               NVRM: fallen off the bus and is not responding to commands.
[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).
"""
XID79_AND_NOTICE = """\
[6781741.548779] NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
[6781741.548783] NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.
"""


def xids(text: str) -> list[Finding]:
    return [f for f in judge_text(text, Config(), kind="dmesg", source="n1") if f.check_id == "gpu.xid"]


def by_code(findings: list[Finding]) -> dict[str, Finding]:
    return {f.code: f for f in findings}


def test_a_gpu_fallen_off_the_bus_without_an_xid_line_fails_with_its_action() -> None:
    found = by_code(xids(FALLEN_NO_XID))
    fallen = found["nvrm_fallen_off_bus"]
    assert fallen.status is Status.FAIL and fallen.subject.endswith("pci:0000:b3:00")
    assert fallen.details[DETAIL_KEY] == "reboot_node" and fallen.details["kind"] == "nvrm:fallen_off_bus"
    assert found["nvrm_probe_failed"].status is Status.FAIL


def test_the_notice_after_an_xid_79_line_is_judged_once() -> None:
    (only,) = xids(XID79_AND_NOTICE)
    assert only.code == "xid_79" and only.status is Status.FAIL and "kind" not in only.details


@pytest.mark.parametrize(("line", "code"), [
    ("Dec  2 11:49:53 worker4 kernel: [  885.242168] NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)",
     "nvrm_rm_init_failed"),
    # driver 358 (Bumblebee-Project/Bumblebee#722): the old wording names no GPU
    ("[87669.726564] NVRM: RmInitAdapter failed! (0x26:0xffff:1375)", "nvrm_rm_init_failed"),
    ("[  115.083750] NVRM: GPU6 RmInitAdapter: Cannot initialize GSP firmware RM", "nvrm_gsp_init_failed"),
    # H100 in a TDX guest, R550 (NVIDIA/nvtrust#54): the FSP never answered the GSP boot command, no Xid line
    ("[  121.802181] NVRM: kfspPollForResponse_IMPL: FSP command timed out", "nvrm_gsp_init_failed"),
    # R570+ wording of the same timeout (kern_fsp.c's kfspWaitForResponse)
    ("[  391.925000] NVRM: kfspWaitForResponse: FSP command timed out", "nvrm_gsp_init_failed"),
    ("               NVRM: This PCI I/O region assigned to your NVIDIA device is invalid:", "nvrm_pci_region_invalid"),
    # GB200, no Xid line (kubernetes-sigs/dra-driver-nvidia-gpu#982): the GPU refuses work until reset
    ("[373871.354096] NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required [NV_ERR_RESET_REQUIRED] "
     "(0x00000062) returned from status @ kernel_channel.c:2827", "nvrm_reset_required"),
    # RTX 4070 SUPER on resume, R570 (NVIDIA/open-gpu-kernel-modules#795): the GPU's firmware boot never completed
    (" kernel: NVRM: kgspWaitForGfwBootOk_TU102: failed to wait for GFW boot complete: 0x55 VBIOS version "
     "95.04.69.40.36", "nvrm_gsp_init_failed"),
    (" kernel: NVRM: gpuWaitForGfwBootComplete_TU102: failed to wait for GFW_BOOT: (progress 0x3)",
     "nvrm_gsp_init_failed"),
    # the same paste, cut before its Xid 119 line: the driver's banner for that Xid
    (" kernel: NVRM: _kgspLogXid119: ********************************* GSP Timeout "
     "**********************************", "nvrm_gsp_timeout"),
    # nvidia-modeset quoting the status after a resume (open-gpu-kernel-modules#472, R535, a Russian-locale journal)
    ("июл 01 22:08:37 pc kernel: nvidia-modeset: ERROR: GPU:0: Failed to initialize display engine: 0x62 "
     "(Reset required [NV_ERR_RESET_REQUIRED])", "nvrm_reset_required"),
])
def test_driver_failure_messages_fail(line: str, code: str) -> None:
    (f,) = xids(line + "\n")
    assert (f.code, f.status) == (code, Status.FAIL) and f.details[DETAIL_KEY]



# An RTX 5090's previous boot (NVIDIA/open-gpu-kernel-modules#1080, `journalctl -b -1 | grep ...`): every GSP RPC
# fails with status 0x0000000f, NV_ERR_GPU_IS_LOST, and no Xid line made it into the paste.
GPU_LOST_RPCS = """\
May 02 21:43:54 ethan-desktop kernel: NVRM: nvAssertFailedNoLog: Assertion failed: (status == NV_OK) || (status == \
NV_ERR_GPU_IN_FULLCHIP_RESET) @ rs_server.c:1375
May 02 21:43:54 ethan-desktop kernel: NVRM: GPU0 _issueRpcAndWait: rpcSendMessage failed with status 0x0000000f for \
fn 10 sequence 12303!
May 02 21:43:54 ethan-desktop kernel: NVRM: GPU0 rpcRmApiFree_GSP: GspRmFree failed: hClient=0xc1d00029; \
hObject=0xbeef0100; paramsStatus=0x00000000; status=0x0000000f
"""


def test_rpcs_failing_with_gpu_is_lost_fail_as_a_gpu_off_the_bus() -> None:
    (lost,) = xids(GPU_LOST_RPCS)
    assert (lost.code, lost.status, lost.details[DETAIL_KEY]) == ("nvrm_gpu_lost", Status.FAIL, "reboot_node")
    assert lost.details["events_in_window"] == 2  # the RPC failure and the free after it; not the assertion


@pytest.mark.parametrize("line", [
    # the status text where a check quotes it (a macOS port's log of the same driver, 2026)
    "07:54:35.973 NVRM: Check failed: GPU lost from the bus [NV_ERR_GPU_IS_LOST] (0x0000000F)",
    # an interrupt read that returned all ones
    "[ 9.5] NVRM: GPU0 _intrServiceStallCommonCheckBegin: Failed GPU reg read : 0xffffffff. Check whether GPU is "
    "present on the bus",
])
def test_the_driver_saying_the_gpu_is_lost_in_words_fails(line: str) -> None:
    (f,) = xids(line + "\n")
    assert (f.code, f.status) == ("nvrm_gpu_lost", Status.FAIL)


def test_an_rpc_failing_with_another_status_is_not_a_lost_gpu() -> None:
    """0x00000065 is NV_ERR_TIMEOUT, 0x0000001f NV_ERR_INVALID_ARGUMENT...: only 0x0f says the GPU left the bus."""
    for status in ("0x00000065", "0x0000001f", "0x000000f0"):
        line = f"[1.0] NVRM: GPU0 _issueRpcAndWait: rpcSendMessage failed with status {status} for fn 76!\n"
        assert all(f.code != "nvrm_gpu_lost" for f in xids(line))


def test_a_driver_that_probed_no_gpu_fails_and_one_that_skipped_some_warns() -> None:
    """No Xid stands for these (another driver bound the GPUs): the node cannot use them; one passed
    through to a VM on purpose is only a warning (driver 384's wording, mattshma/bigdata#133)."""
    found = by_code(xids("[188497.595099] NVRM: No NVIDIA graphics adapter probed!\n"
                         "[188549.976351] NVRM: The NVIDIA probe routine was not called for 3 device(s).\n"))
    assert (found["nvrm_no_adapter_probed"].status, found["nvrm_probe_not_called"].status) == (Status.FAIL, Status.WARN)
    assert found["nvrm_no_adapter_probed"].summary.startswith("NVRM message (The NVIDIA driver")  # no "as Xid 0"
    (alone,) = xids("[   12.5] NVRM: The NVIDIA probe routine was not called for 1 device(s).\n")
    assert alone.status is Status.WARN

def test_an_xid_45_names_its_cause_and_the_cause_is_judged() -> None:
    text = ("kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 "
            "caused by previous Xid 149\n"
            "kernel: NVRM: Xid (PCI:0000:ba:00): 45, pid=1818989, name=python3, Ch 00000002 "
            "caused by previous Xid 48\n")
    found = {(f.code, f.subject.rsplit("/", 1)[1]): f for f in xids(text)}
    assert found[("xid_149", "pci:0000:dc:00")].status is Status.FAIL  # an NVLink5 error that tore a job down
    assert found[("xid_48", "pci:0000:ba:00")].status is Status.FAIL
    assert found[("xid_45", "pci:0000:dc:00")].status is Status.PASS  # not solo: follows its cause


def test_a_named_cause_logged_itself_is_judged_once() -> None:
    text = ("[10.0] NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>', name=<unknown>, "
            "An uncorrectable double bit error\n"
            "[10.1] NVRM: Xid (PCI:0000:07:00): 45, pid=7, name=python3, Ch 00000001 caused by previous Xid 48\n")
    assert sorted(f.code for f in xids(text)) == ["xid_45", "xid_48"]


def test_a_solo_xid_45_burst_warns_and_asks_to_restart_the_job() -> None:
    text = "".join(f"[Sat Oct 12 18:35:32 2024] NVRM: Xid (PCI:0000:61:00): 45, pid=1496200, name=distprovers-gpu, "
                   f"Ch 0000000{c}\n" for c in "abcdef")
    (f,) = xids(text)
    assert f.status is Status.WARN and f.details[DETAIL_KEY] == "restart_job"


@pytest.mark.parametrize(("severity", "status"), [("Fatal", Status.FAIL), ("Nonfatal", Status.PASS)])
def test_nvlink5_xids_are_judged_by_the_severity_their_line_states(severity: str, status: Status) -> None:
    line = (f"NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE {severity} XC0 i0 Link 13 "
            "(0x0409a0c2 0x00000008 0x00000001 0x00000000 0x00100000 0x00000004)\n")
    (f,) = xids(line)
    assert f.status is status and f.details["kind"] == ("xid:fatal" if severity == "Fatal" else "xid:nonfatal")


@pytest.mark.parametrize(("action", "status", "operator"), [
    ("0x2 (Node Reboot Required)", Status.FAIL, "reboot_node"),
    ("0x1 (GPU Reset Required)", Status.FAIL, "reset_gpu"),
    ("0x4 (Drain and Reset)", Status.FAIL, "reset_gpu"),
    ("0x0 (None)", Status.PASS, None),
])
def test_xid_154_follows_the_recovery_action_its_line_names(action: str, status: Status, operator: str | None) -> None:
    (f,) = xids(f"[171167.621162] NVRM: Xid (PCI:0009:01:00): 154, GPU recovery action changed from 0x0 (None) to "
                f"{action}\n")
    assert f.status is status and f.details.get(DETAIL_KEY) == operator


def test_nvswitch_sxids_fatal_fail_and_non_fatal_warn() -> None:
    """A non-fatal SXid was contained, but the Fabric Manager guide warns of a performance impact: MONITOR."""
    text = ("[6781753.400584] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up\n"
            "[111111111.111] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted "
            "PRIV error (First)\n")
    found = by_code(xids(text))
    assert found["sxid_20034"].status is Status.FAIL and found["sxid_20034"].details[DETAIL_KEY] == "reboot_node"
    assert found["sxid_12028"].status is Status.WARN and found["sxid_12028"].details[DETAIL_KEY] == "monitor"


def test_journal_short_precise_and_iso_stamps_are_read() -> None:
    now = datetime(2025, 2, 14, 12, 0, tzinfo=UTC)
    assert line_timestamp("Feb 14 05:03:41.123456 host kernel: NVRM: x", now=now) == \
        datetime(2025, 2, 14, 5, 3, 41, 123456, tzinfo=UTC)
    assert line_timestamp("2025-02-14T05:03:41+0000 host kernel: NVRM: x") == \
        datetime(2025, 2, 14, 5, 3, 41, tzinfo=UTC)
    assert line_timestamp("[Fri Aug 30 11:43:09 2024] NVRM: x") == datetime(2024, 8, 30, 11, 43, 9, tzinfo=UTC)


def test_a_line_dated_far_ahead_does_not_hide_the_xid_before_it() -> None:
    """Issue 28 item 2: one line dated 2099 after an Xid 79 moved the window's end and the log passed."""
    text = ("2024-05-01T10:00:00+00:00 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, GPU has fallen "
            "off the bus.\n2024-05-01T10:05:00+00:00 kernel: eth0: link up\n"
            "2099-01-01T00:00:00+00:00 kernel: eth0: link down\n")
    record = parse(text)
    assert record.last_timestamp == "2024-05-01T10:05:00+00:00" and len(record.clock_jumps) == 1
    (f,) = xids(text)
    assert f.status is Status.FAIL and "clock jump" in f.summary and "2099" in f.summary


def test_a_log_that_resumes_after_a_gap_still_ends_at_its_last_line() -> None:
    text = ("2024-05-01T10:00:00+00:00 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=p, GPU has fallen off the "
            "bus.\n2024-05-09T08:00:00+00:00 kernel: Linux version 6.1\n2024-05-09T08:00:01+00:00 kernel: eth0: up\n")
    record = parse(text)
    assert record.last_timestamp == "2024-05-09T08:00:01+00:00" and record.clock_jumps == []
    (f,) = xids(text)
    assert f.status is Status.PASS  # the Xid is a week older than the window: counted outside it


def test_the_live_path_judges_driver_messages_too() -> None:
    now = datetime(2025, 6, 2, 13, 20, tzinfo=UTC)
    host = {"kernel_log": {"available": True, "read_at": now.isoformat(), "source": "dmesg",
                           "lines": FALLEN_NO_XID.splitlines()}}
    facts = snapshot_log_facts(host, 2.0, now)
    kinds = sorted(g.kind for g in facts.tally.groups)
    assert kinds == ["nvrm:fallen_off_bus", "nvrm:probe_failed"]


def test_every_driver_message_and_sxid_kind_has_a_rule_with_a_routable_action() -> None:
    policy = load_xid_policy()
    assert {name for name, _, _ in DRIVER_MESSAGES} == set(policy.drivers)
    assert set(policy.sxids) == {"fatal", "nonfatal", "unknown"}
    rules = [*policy.rules.values(), *policy.drivers.values(), *policy.sxids.values(), policy.default]
    for rule in rules:
        assert rule.action in BY_NVIDIA_ACTION and rule.recommendation, rule
    assert all(action in BY_NVIDIA_ACTION for _, action in RECOVERY_ACTIONS.values())


def test_the_reader_keeps_the_gpu_a_multi_line_notice_named() -> None:
    reader = KernelLineReader()
    events = [e for line in FALLEN_NO_XID.splitlines() for e in reader.read(line)]
    assert [(e.xid, e.pci, e.kind) for e in events] == [(79, "0000:b3:00.0", "nvrm:fallen_off_bus"),
                                                          (79, None, "nvrm:probe_failed")]


def test_operator_actions_are_ordered_and_none_adds_no_key() -> None:
    assert strongest([Action.RESTART_JOB, None, Action.REBOOT_NODE, Action.RESET_GPU]) is Action.REBOOT_NODE
    assert strongest([]) is Action.NONE
    assert with_action({"a": 1}, Action.NONE) == {"a": 1} and with_action({}, None) == {}
    assert with_action({}, Action.ISOLATE_NODE) == {DETAIL_KEY: "isolate_node"}
