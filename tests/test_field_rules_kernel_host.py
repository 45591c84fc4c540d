"""Rules issue 27's field corpus taught the kernel-log reader about the host side (in-repository texts only).

* ``dmesg -H``/``--reltime`` prefixes (``[Feb22 04:01]``, ``[  +0.000844]``) are a kernel log, and so is
  a hung-task, OOM-kill or thermal message pasted bare, on a line of its own.
* The PCIe AER driver's reports are ``kernel.pcie_aer``: Uncorrected (Fatal) or a failed recovery
  FAILs, Non-Fatal and Corrected WARN.
* OOM kills (``kernel.oom``), hung tasks (``kernel.hung_task``) and CPU thermal throttling
  (``kernel.thermal``) WARN, naming the process or CPU.
* A ConnectX adapter whose driver could not bring it up FAILs ``kernel.nic``; a ConnectX port's
  ``Link down`` WARNs.
* Host messages older than the Xid window are counted, not judged.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.checks.evidence_kernel import HOST_VERDICTS
from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind
from gpu_preflight.parsers.host_log import HOST_MESSAGES, host_message
from gpu_preflight.parsers.nic_log import nic_message

KERNEL = Path(__file__).parent / "fixtures" / "field" / "kernel"
AER_FATAL = (KERNEL / "returnn1500_aer_uncorrected_fatal_gpu_reltime.txt").read_text()
AER_CORRECTED = (KERNEL / "pop3363_aer_correctable_gpu_port_syslog.txt").read_text()
OOM = (KERNEL / "tranx41_oom_killed_python3_training.txt").read_text()
THROTTLE = (KERNEL / "throttled103_cpu_thermal_throttle_reltime.txt").read_text()
HUNG = (KERNEL / "k8sdp77_hung_task_nvc_nvidia_uvm.txt").read_text()
MLX5_PROBE = (KERNEL / "tinycore9_mlx5_probe_failed_hca_cap.txt").read_text()


def judged(text: str, check: str) -> list[tuple[Status, str, str]]:
    return [(f.status, f.code, f.subject) for f in judge_text(text, Config(), source="n1") if f.check_id == check]


def worst(text: str) -> Status:
    return Status.worst(f.status for f in judge_text(text, Config(), source="n1"))


# --------------------------------------------------------------------------- formats

@pytest.mark.parametrize("text", [AER_FATAL, THROTTLE], ids=["reltime-plus", "reltime-minute"])
def test_dmesg_reltime_prefixes_are_a_kernel_log(text: str) -> None:
    assert detect_kind(text) == "dmesg"
    assert detect_kind("[  +0.000001] usb 1-1: new high-speed USB device number 2\n") == "dmesg"


def test_a_host_message_in_prose_is_not_a_kernel_log() -> None:
    assert detect_kind("The job said: Out of memory: Killed process 12 (python) and stopped.\n") is None


def test_a_bare_hung_task_paste_is_a_kernel_log_and_warns() -> None:
    text = (KERNEL / "ogkm1205_hung_task_nvidia_modeset_bare.txt").read_text()
    assert detect_kind(text) == "dmesg"
    assert judged(text, "kernel.hung_task") == [(Status.WARN, "hung_task", "n1/kwin_wayland[1590]")]


# --------------------------------------------------------------------------- PCIe AER

def test_an_uncorrected_fatal_aer_error_fails() -> None:
    found = judged(AER_FATAL, "kernel.pcie_aer")
    assert (Status.FAIL, "pcie_aer_fatal", "n1/0000:00:03.0") in found
    assert worst(AER_FATAL) is Status.FAIL


def test_corrected_aer_errors_warn_and_count() -> None:
    assert judged(AER_CORRECTED, "kernel.pcie_aer") == [(Status.WARN, "pcie_aer_corrected", "n1/0000:00:03.1")]
    finding = next(f for f in judge_text(AER_CORRECTED, Config(), source="n1") if f.check_id == "kernel.pcie_aer")
    assert finding.observed == 4  # two errors, each a "received" line and its "PCIe Bus Error" record


@pytest.mark.parametrize(("line", "code", "subject"), [
    ("[ 5.1] pcieport 0000:00:01.0: AER: Uncorrected (Non-Fatal) error received: 0000:01:00.0",
     "pcie_aer_nonfatal", "0000:00:01.0"),
    ("[ 5.1] nvidia 0000:01:00.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer",
     "pcie_aer_nonfatal", "0000:01:00.0"),
    ("[ 5.1] pcieport 0000:00:1c.5: AER: Multiple Corrected error received: 0000:00:1c.5",
     "pcie_aer_corrected", "0000:00:1c.5"),
    ("[ 5.1] pcieport 0000:00:03.0: AER: device recovery failed", "pcie_aer_fatal", "0000:00:03.0"),
    # newer kernels name the severities as the PCIe spec does: Correctable / Uncorrectable
    ("[ 5.1] pcieport 0000:00:01.0: AER: Uncorrectable (Fatal) error message received from 0000:01:00.0",
     "pcie_aer_fatal", "0000:00:01.0"),
    ("[ 5.1] nvidia 0000:01:00.0: PCIe Bus Error: severity=Uncorrectable (Non-Fatal), type=Transaction Layer",
     "pcie_aer_nonfatal", "0000:01:00.0"),
    ("[ 5.1] Out of memory: Kill process 25635 (python) score 974 or sacrifice child", "oom_kill", "python[25635]"),
    ("[ 5.1] Killed process 25635 (python) total-vm:55518724kB, anon-rss:23902876kB", "oom_kill", "python[25635]"),
    ("Mar 1 k kernel: Memory cgroup out of memory: Killed process 77 (pt_main_thread) total-vm:1kB",
     "oom_kill", "pt_main_thread[77]"),
    ("[ 843.07] INFO: task python3:5604 blocked for more than 120 seconds.", "hung_task", "python3[5604]"),
    ("mce: CPU2: Package temperature above threshold, cpu clock throttled (total events = 3654)",
     "cpu_thermal_throttle", "cpu2"),
])
def test_host_message_names_code_and_subject(line: str, code: str, subject: str) -> None:
    assert host_message(line)[:2] == (code, subject)  # type: ignore[index]


@pytest.mark.parametrize("line", [
    "[ 5.1] CPU2: Core temperature/speed normal",
    "[ 5.1] pcieport 0000:00:1c.5: AER: enabled with IRQ 122",
    "[ 5.1] oom_reaper: reaped process 25315 (python3), now anon-rss:0kB",
    "/bin/bash: line 27: 318 Killed sh start.sh",
])
def test_ordinary_lines_are_no_host_message(line: str) -> None:
    assert host_message(line) is None


def test_every_host_code_has_a_verdict() -> None:
    assert {code for code, _ in HOST_MESSAGES} == set(HOST_VERDICTS)


# --------------------------------------------------------------------------- OOM, hung task, thermal

def test_an_oom_kill_warns_naming_the_process() -> None:
    assert judged(OOM, "kernel.oom") == [(Status.WARN, "oom_kill", "n1/python3[25315]")]
    assert worst(OOM) is Status.WARN


def test_a_hung_task_warns() -> None:
    assert judged(HUNG, "kernel.hung_task") == [(Status.WARN, "hung_task", "n1/nvc:[driver][5403]")]


def test_cpu_thermal_throttling_warns_per_cpu() -> None:
    found = judged(THROTTLE, "kernel.thermal")
    assert {s for s, _, _ in found} == {Status.WARN}
    assert {subject for _, _, subject in found} == {f"n1/cpu{n}" for n in (0, 1, 3, 4, 5, 7)}


def test_host_messages_before_the_window_are_counted_not_judged() -> None:
    text = ("2024-04-29T02:00:00,000000+00:00 Out of memory: Killed process 1440763 (perl) total-vm:87033376kB\n"
            "2024-04-29T14:55:41,000000+00:00 usb 1-1: new high-speed USB device number 2\n")
    assert judged(text, "kernel.oom") == [(Status.PASS, "older", "n1")]


# --------------------------------------------------------------------------- ConnectX

def test_a_connectx_that_failed_to_load_fails() -> None:
    found = judged(MLX5_PROBE, "kernel.nic")
    assert found == [(Status.FAIL, "mlx5_probe_failed", "n1/0000:03:00.0")]
    assert nic_message("mlx5_core 0000:03:00.0: handle_hca_cap failed") is None  # a step, not the verdict


def test_a_connectx_port_link_down_warns() -> None:
    line = "[ 9.2] mlx5_core 0000:5e:00.0 enp94s0f0: Link down"
    assert nic_message(line)[:2] == ("mlx5_link_down", "0000:5e:00.0")  # type: ignore[index]
    assert judged(line + "\n", "kernel.nic") == [(Status.WARN, "mlx5_link_down", "n1/0000:5e:00.0")]
    assert nic_message("[ 9.2] mlx5_core 0000:5e:00.0 enp94s0f0: Link up") is None
