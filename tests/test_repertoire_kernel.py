"""The NVIDIA kernel driver's fault messages, rendered from their format strings (docs/repertoire/kernel.md).

The fixtures (tests/fixtures/repertoire/kernel, provenance in its PROVENANCE.md) render format strings of
NVIDIA/open-gpu-kernel-modules in the log forms users paste (plain dmesg, dmesg -T, journalctl -k, syslog); each
is judged as the Xid or fault it stands for.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpu_preflight.actions import DETAIL_KEY
from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Finding, Status
from gpu_preflight.parsers.kernel_log import parse_xid_events
from gpu_preflight.probes.kernel_log import snapshot_log_facts

FORMS = Path(__file__).parent / "fixtures" / "repertoire" / "kernel"


def form(name: str) -> str:
    return (FORMS / name).read_text(encoding="utf-8")


def xids(text: str) -> list[Finding]:
    return [f for f in judge_text(text, Config(), kind="dmesg", source="n1") if f.check_id == "gpu.xid"]


def test_xid_lines_attributed_to_a_mig_instance_are_events_of_their_gpu() -> None:
    events = parse_xid_events(form("mig-xids-94-95-31-dmesg-T-journal.txt"))
    assert [(e.xid, e.pci, e.pid) for e in events] == [
        (94, "0000:01:00", 7194), (95, "0000:01:00", 7062), (31, "0000:41:00", 1234)]


def test_a_mig_instance_xid_is_judged_as_its_xid_not_as_an_unreadable_line() -> None:
    found = {f.code: f for f in xids(form("mig-xids-94-95-31-dmesg-T-journal.txt"))}
    assert found["xid_95"].status is Status.FAIL and found["xid_95"].subject.endswith("pci:0000:01:00")
    assert found["xid_94"].status is Status.WARN and found["xid_31"].status is Status.WARN
    assert not any(f.status is Status.ERROR for f in found.values())


def test_xid_154_asking_to_recover_the_imex_domain_fails_and_isolates_the_node() -> None:
    (f,) = xids(form("xid154-recover-imex-domain-595.txt"))
    assert f.status is Status.FAIL and f.details[DETAIL_KEY] == "isolate_node"


@pytest.mark.parametrize("name", [
    "rm-init-adapter-failed-515.txt", "rm-init-adapter-failed-595-dmesg-T.txt",
    "rm-init-adapter-failed-pre515-syslog.txt",
])
def test_nv_c_saying_rm_init_adapter_failed_is_a_gpu_that_did_not_initialise(name: str) -> None:
    (f,) = xids(form(name))
    assert (f.code, f.status) == ("nvrm_rm_init_failed", Status.FAIL)


@pytest.mark.parametrize("name", ["gsp-rpc-poll-rm-heartbeat-595.txt", "gsp-rpc-poll-libos-heartbeat-595-journal.txt"])
def test_the_rpc_poll_naming_a_stopped_gsp_heartbeat_is_a_gsp_timeout(name: str) -> None:
    (f,) = xids(form(name))
    assert (f.code, f.status) == ("nvrm_gsp_heartbeat", Status.FAIL)


@pytest.mark.parametrize("name", ["rpc-recv-poll-timedout-595.txt", "rpc-recv-poll-timedout-535-dmesg-T.txt"])
def test_an_rpc_that_got_no_answer_from_gsp_is_a_gsp_timeout(name: str) -> None:
    (f,) = xids(form(name))
    assert (f.code, f.status) == ("nvrm_gsp_timeout", Status.FAIL)


def test_an_rpc_poll_failing_with_gpu_is_lost_is_a_gpu_off_the_bus() -> None:
    (f,) = xids(form("rpc-recv-poll-gpu-lost-595-journal.txt"))
    assert (f.code, f.status, f.details[DETAIL_KEY]) == ("nvrm_gpu_lost", Status.FAIL, "reboot_node")


def test_gsp_rpc_prints_rate_limited_after_repeated_timeouts_fail_on_the_gpu_they_name() -> None:
    (f,) = xids(form("gsp-rpc-rate-limiting-needs-reset-535-journal.txt"))
    assert (f.code, f.status) == ("nvrm_gsp_timeout", Status.FAIL) and f.subject.endswith("pci:0000:c1:00")


def test_an_nvswitch_the_driver_could_not_bring_up_fails_and_its_sxids_are_still_read() -> None:
    found = {f.code: f for f in xids(form("nvswitch-init-failed-and-sxid-515.txt"))}
    assert found["nvrm_nvswitch_init_failed"].status is Status.FAIL
    assert found["nvrm_nvswitch_init_failed"].details[DETAIL_KEY] == "reboot_node"
    assert found["sxid_20034"].status is Status.FAIL


@pytest.mark.parametrize(("name", "code"), [
    ("nvswitch-blacklisted-595-dmesg-T.txt", "nvrm_nvswitch_blacklisted"),
    ("nvswitch-post-init-failed-595-journal.txt", "nvrm_nvswitch_init_failed"),
])
def test_an_nvswitch_out_of_service_fails(name: str, code: str) -> None:
    (f,) = xids(form(name))
    assert (f.code, f.status) == (code, Status.FAIL)


def test_the_live_path_reads_the_nvswitch_drivers_own_failures() -> None:
    now = datetime(2026, 12, 7, 10, 30, tzinfo=UTC)
    host = {"kernel_log": {"available": True, "read_at": now.isoformat(), "source": "dmesg",
                           "lines": form("nvswitch-init-failed-and-sxid-515.txt").splitlines()}}
    tally = snapshot_log_facts(host, 2.0, now).tally
    assert tally is not None and sorted(g.kind for g in tally.groups) == ["nvrm:nvswitch_init_failed", "sxid:fatal"]


def test_a_missing_gsp_firmware_image_is_a_gsp_that_cannot_boot() -> None:
    (f,) = xids(form("gsp-no-firmware-image-535.txt"))
    assert (f.code, f.status) == ("nvrm_gsp_init_failed", Status.FAIL)


@pytest.mark.parametrize("name", ["probe-aborted-one-gpu-515.txt", "probe-pci-enable-failed-595-dmesg-T.txt"])
def test_a_probe_aborted_for_one_gpu_is_a_failed_probe(name: str) -> None:
    (f,) = xids(form(name))
    assert (f.code, f.status) == ("nvrm_probe_failed", Status.FAIL)


def test_an_nvswitch_shutting_down_for_overtemperature_is_a_fatal_sxid() -> None:
    found = {(f.code, f.details.get("kind")): f.status for f in xids(form("nvswitch-sxid-thermal-shutdown-535.txt"))}
    assert found[("sxid_10006", "sxid:fatal")] is Status.FAIL
