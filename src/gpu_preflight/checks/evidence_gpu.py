"""Judging GPU evidence (nvidia-smi in every form, kernel logs) with the node checks' own rules.

An nvidia-smi record is converted into the :class:`~gpu_preflight.records.GpuFacts` the
NVML probe produces, and every registered check that needs only ``gpu`` facts runs on it
(``gpu.ecc.errors``, ``gpu.memory.remap``, ``gpu.clocks``, ``gpu.pcie``, ``gpu.nvlink``...),
so thresholds, profiles and wording are the node run's. Fields the output does not show
become ``NA`` with that reason, and the checks SKIP them as they do for NVML. A kernel log
is judged by the registered ``gpu.xid`` check and the Xid policy table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..actions import Action
from ..config.fields import settings_of, with_settings
from ..model import NA, Finding, Status
from ..registry import declare
from .evidence import judges
from .evidence_fabric import judge_kernel_network
from .evidence_kernel import judge_kernel_host
from .gpu_links import LinkSettings
from .gpu_topology import TopologyMatrix, judge_topology

if TYPE_CHECKING:
    from ..config import Config
    from ..records import GpuFacts, GpuRecord
    from ..records.dmesg import DmesgRecord
    from ..records.smi import DmonRecord, ListedGpu, NvidiaSmiRecord, P2pRecord, SmiGpu, SmiListingRecord, TopoRecord
    from ..records.xid import XidTally

MIB = 1024 * 1024
GPU_LIBRARIES = ("libnccl", "libcuda", "libnvidia", "libcudart", "libcublas", "libnvrm")
_LIST_CHECKS = ("gpu.inventory.count", "gpu.inventory.identity", "gpu.inventory.mig")
NVIDIA_SMI_GPU = declare(
    "nvidia_smi.gpu", "nvidia-smi output lists the GPUs it reports",
    """A saved nvidia-smi output (``-q``, XML, CSV query, table) lists GPUs to judge: ERROR when
    it lists none, WARN when it reports more attached GPUs than it lists (those were not judged).
    The GPUs it lists are judged by the node checks' own rules (``gpu.*``).""",
    group=(), component="hardware_health", core=True)
TOPO_ACTIONS = {"nvlink_down": Action.RESET_GPU, "nvlink_irregular": Action.RESET_GPU,
                "gpus_missing": Action.REBOOT_NODE}
"""A GPU short of NVLinks in the matrix is ``gpu.nvlink``'s down link (a reset retrains it); a GPU
missing from it is ``gpu.inventory.count``'s missing GPU (reboot first)."""
NVIDIA_SMI_TOPO = declare(
    "nvidia_smi.topo", "GPU topology as the matrix states it",
    """``nvidia-smi topo -m`` states how every GPU pair is connected, and is judged on that
    (``checks/gpu_topology.py``): a cell that is not a legend token (``X``, ``NV#``, ``PIX``, ``PXB``,
    ``PHB``, ``NODE``, ``SYS``, legacy ``SOC``), a missing cell or a pair whose two cells disagree is
    ERROR. Without ``gpu.nvlink_expected_links``: no NVLink PASSes (PCIe peers, farthest path named);
    NVLink that is regular (every GPU the same NVLink counts to its peers: NVSwitch clique, hybrid cube
    mesh, bridged pairs) PASSes; irregular NVLink WARNs naming the odd GPUs and pairs. With it (L): a
    GPU whose largest pair count or whose sum of pair counts reaches L meets it, else FAIL. Fewer GPUs
    than ``gpu.expected_count`` FAIL (more WARN). One GPU has no pair: SKIP. NICs and CPU/NUMA affinity
    are stated, not judged.""",
    group=(), component="hardware_health", core=True, settings=("gpu.nvlink_expected_links", "gpu.expected_count"),
    actions=TOPO_ACTIONS)
SMI_FAILURE_ACTIONS = {
    "gpu_unreachable": Action.REBOOT_NODE,
    "gpu_lost": Action.REBOOT_NODE,
    "no_devices": Action.REBOOT_NODE,
    "driver_unreachable": Action.REBOOT_NODE,
    "nvml_init_failed": Action.REBOOT_NODE,
    "gpu_requires_reset": Action.RESET_GPU,
    "reset_failed": Action.RESET_GPU,
    "inforom_corrupted": Action.MONITOR,
    "fabric_not_ready": Action.ISOLATE_NODE,
    "fabric_probe_failed": Action.ISOLATE_NODE,
    "fabric_unhealthy": Action.ISOLATE_NODE,
    "fabric_degraded": Action.MONITOR,
    "sram_threshold_exceeded": Action.ISOLATE_NODE,
    "unrepairable_memory": Action.ISOLATE_NODE,
    "repair_pending": Action.RESET_GPU,
}
"""nvidia-smi's failure texts, in the words gpu.nvml uses for the same states: a GPU it cannot reach
or that the driver lost is NVIDIA's Xid 79 resolution (RESTART_BM); no GPU or no driver is the driver
not bound or loaded, which a reboot (after the driver is fixed) brings back; ``GPU requires reset``
names its own action, as does a reset nvidia-smi could not do (retried once the clients that hold the GPU
are stopped: persistence daemon, fabric manager, DCGM); a corrupted infoROM leaves a working GPU
(nvidia-smi exit code 14) whose stored data is suspect: a reflash to plan. A GPU that has not joined its NVLink
fabric (or joined an unhealthy one) runs no CUDA or NVLink work until the fabric manager or NVSwitch side is
fixed: kept out (DCGM's DCGM_FR_IMEX_UNHEALTHY is ISOLATE too); a fabric of limited capacity is watched. SRAM past
its error threshold is DCGM's SRAM_THRESHOLD (ISOLATE), and so is memory the GPU cannot repair; a pending channel or
TPC repair completes at the next GPU reset."""
NVIDIA_SMI_FAILURE = declare(
    "nvidia_smi.failure", "nvidia-smi could read every GPU",
    """nvidia-smi printed one of its own failure messages instead of a reading: FAIL when it cannot
    reach a GPU (``Unable to determine the device handle``: fallen off the bus, lost, needs a
    reset), finds none (``No devices were found``), cannot talk to the driver or could not reset a GPU
    (``The following GPUs could not be reset``: it is still in the state that called for the reset); WARN on a
    corrupted infoROM (nvidia-smi's exit code 14: the GPU works, its stored data is suspect). ``-q``'s ``Fabric``
    block of an NVSwitch GPU: FAIL while its State is ``Not Started``/``In Progress`` (not registered: CUDA
    refuses it), when a completed probe's Status is not ``Success``, or when its Health says ``Unhealthy``, a
    ``Route Unhealthy`` or an ``Incorrect Configuration``; WARN on ``Limited Capacity``, degraded bandwidth or a
    recovery in progress. ``ECC Errors`` flags (555+, 590+): ``SRAM Threshold Exceeded : Yes`` and
    ``Unrepairable Memory : Yes`` FAIL (the memory is past repair), ``Channel``/``TPC Repair Pending : Yes`` WARNs
    (a reset completes it).""",
    group=(), component="hardware_health", core=True, actions=SMI_FAILURE_ACTIONS)
NVIDIA_SMI_P2P = declare(
    "nvidia_smi.p2p", "GPU pairs reach each other's memory directly",
    """``nvidia-smi topo -p2p`` states each GPU pair's peer-to-peer status. Every pair ``OK`` PASSes. For
    read or write (``-p2p r``/``w``, known from the pasted command), a pair not ``OK`` WARNs
    ``p2p_unavailable`` naming it and nvidia-smi's reason (``CNS`` chipset, ``GNS`` GPU, ``TNS`` topology,
    ``NS`` not supported, ``DR`` disabled by regkey, ``U`` unknown): NCCL cannot use its P2P transport
    between them and copies through host memory, slower collectives. Pairs not ``OK`` for NVLink, atomics
    or an unnamed capability are stated, not judged (SKIP): a PCIe-only node has no NVLink peers by
    design. One GPU has no pair: SKIP.""",
    group=(), component="hardware_health", core=True)
NVIDIA_SMI_ANSWER = declare(
    "nvidia_smi.answer", "What an nvidia-smi answer states that no check judges",
    """An answer of nvidia-smi to a command (``-pl``, ``-ac``, ``-lgc``, a reset that worked, a MIG
    listing that names no GPU: ``No MIG-enabled devices found.``) states something no readiness rule
    judges: SKIP, saying what it states. The settings an answer does state (persistence, compute and
    MIG mode, a pending ECC mode) are judged by their own ``gpu.inventory.*``/``gpu.ecc.mode`` checks; a
    text with nothing else is judged nothing (ERROR), never SUCCESS.""",
    group=(), component="software_stack")
KERNEL_SEGFAULT = declare(
    "kernel.segfault", "No GPU library crashed",
    """A saved kernel log shows a process segfaulting inside a GPU library (libnccl, libcuda,
    libnvidia, libcudart, libcublas, libnvrm): WARN, a driver/library mismatch or a bad node is
    likely.""",
    group=(), component="software_stack", actions={"gpu_library_segfault": Action.RESTART_JOB})


def _report_check(check_id: str) -> bool:
    """gpu.nvml judges NVML access (meaningless for a saved report); NVLink state is not in these
    reports: it is judged from ``nvidia-smi nvlink`` listings."""
    return check_id not in ("gpu.nvml", "gpu.nvlink")


def run_gpu_checks(facts: GpuFacts, config: Config, source: str, wanted: Callable[[str], bool]) -> list[Finding]:
    """The registered checks that need only GPU facts and that ``wanted`` selects, run on ``facts``.

    A check that raises on odd evidence is an ERROR finding, as in the node run.
    """
    from ..registry import CheckContext, all_checks

    ctx = CheckContext(host=source, facts={"gpu": facts}, config=config)
    findings: list[Finding] = []
    for spec in all_checks():
        if spec.needs != ("gpu",) or not wanted(spec.id):
            continue
        try:
            findings.extend(spec.fn(ctx))
        except Exception as exc:
            findings.append(Finding(spec.id, Status.ERROR, source, "check_crashed",
                                    f"check raised {type(exc).__name__}: {exc}"))
    return findings


# nvidia-smi's failure messages (parsers/nvidia_smi/failures.py codes): status, what it means, what to do.
SMI_FAILURES: dict[str, tuple[Status, str, str]] = {
    "gpu_unreachable": (Status.FAIL, "nvidia-smi cannot reach the GPU (fallen off the bus or hung)",
                        "Isolate the node: check the kernel log for Xid 79/NVRM messages, then reset the GPU or "
                        "reboot; reseat or replace the GPU if it recurs."),
    "gpu_lost": (Status.FAIL, "the driver lost the GPU",
                 "Isolate the node and reboot it to recover the GPU; replace the GPU if it is lost again."),
    "gpu_requires_reset": (Status.FAIL, "the GPU needs a reset before it can be used",
                           "Drain the node and reset the GPU (nvidia-smi -r -i N) or reboot."),
    "no_devices": (Status.FAIL, "nvidia-smi found no GPU",
                   "Check that the driver bound the GPUs (lspci -k, kernel log for RmInitAdapter/probe failures) "
                   "and that the GPUs are visible to this host or container."),
    "driver_unreachable": (Status.FAIL, "nvidia-smi cannot communicate with the NVIDIA driver",
                           "Load or reinstall the NVIDIA driver for the running kernel, then reboot if needed."),
    "nvml_init_failed": (Status.FAIL, "NVML could not be initialised",
                         "Match the user-space driver libraries to the loaded kernel module (reboot after a "
                         "driver upgrade)."),
    "unreadable_reading": (Status.WARN, "nvidia-smi printed ERR! for a reading (the driver could not read it)",
                           "Check the sensor the column names (fan, power, temperature): rerun nvidia-smi -q on the "
                           "GPU, and if ERR! persists, inspect or replace the part; the reading was not judged."),
    "reset_failed": (Status.FAIL, "nvidia-smi could not reset the GPU",
                     "Stop what holds the GPU (nvidia-persistenced or persistence mode, fabric manager, DCGM, "
                     "running jobs) and reset it again; reboot the node if the reset keeps failing."),
    "inforom_corrupted": (Status.WARN, "the GPU's infoROM is corrupted",
                          "Plan an infoROM reflash or RMA: the GPU runs, but its stored ECC/page-retirement data "
                          "cannot be trusted."),
    "fabric_not_ready": (Status.FAIL, "the GPU has not joined its NVLink fabric (CUDA refuses it until it does)",
                         "Start nvidia-fabricmanager (the driver's version) and check its log; on NVLink 5 systems "
                         "reset the GPUs once it runs. Keep the node out until every GPU's Fabric State is "
                         "Completed with Status Success."),
    "fabric_probe_failed": (Status.FAIL, "the GPU's fabric registration completed with an error",
                            "Read the fabric manager log for this GPU, fix its NVSwitch/NVLink cause and restart the "
                            "fabric manager (reset the GPUs or reboot); keep the node out until Status is Success."),
    "fabric_unhealthy": (Status.FAIL, "the GPU's NVLink fabric is unhealthy",
                         "Check the NVSwitches and the fabric manager/NMX log for the route or configuration it names; "
                         "keep the node out of multi-node NVLink jobs until Health Summary is Healthy."),
    "fabric_degraded": (Status.WARN, "the GPU's NVLink fabric runs at limited capacity",
                        "NVLink jobs run, slower: watch the fabric health and plan the NVSwitch/link repair it names."),
    "sram_threshold_exceeded": (Status.FAIL, "the GPU's SRAM uncorrectable errors passed their threshold",
                                "Take the GPU out of service and open an RMA: its SRAM errors passed the threshold "
                                "of NVIDIA's field diagnostics (nvml.h; DCGM's SRAM_THRESHOLD is ISOLATE)."),
    "unrepairable_memory": (Status.FAIL, "the GPU has memory it cannot repair",
                            "Take the GPU out of service and open an RMA: no row remap or repair can retire this "
                            "memory."),
    "repair_pending": (Status.WARN, "a memory channel or TPC repair waits for a GPU reset",
                       "Drain the GPU and reset it (nvidia-smi -r -i N) to complete the repair, then check the ECC "
                       "Errors flags again."),
}


@judges("nvidia-smi-xml", "nvidia-smi-q", "nvidia-smi-csv", "nvidia-smi-table", "nvidia-smi-error", "nvidia-smi-pmon",
        "nvidia-smi-mig", "nvidia-smi-set")
def judge_nvidia_smi(record: NvidiaSmiRecord, config: Config, source: str) -> Iterator[Finding]:
    """The GPUs an nvidia-smi report describes, judged by the ``gpu.*`` node checks.

    nvidia-smi's own failure messages are judged first (:data:`SMI_FAILURES`). A fragment
    (a pasted section without the report's header) is judged on the readings it shows: it
    does not say how many GPUs there are, so no count is inferred and none is checked.
    """
    yield from _smi_failures(record, source)
    yield from (Finding("nvidia_smi.answer", Status.SKIP, source, "stated", f"nvidia-smi {record.format}: {line}; "
                        "no readiness rule judges it") for line in record.stated)
    if record.format == "error":
        return
    findings: list[Finding] = []
    if record.gpus:
        facts = _facts(f"nvidia-smi {record.format}", record.driver_version, record.cuda_version,
                       [to_gpu_record(g, record.format) for g in record.gpus])
        findings = run_gpu_checks(facts, config, source, _report_check if record.fragment is None else _fragment_check)
    if record.fragment is None and record.format in ("q", "csv") and record.gpus and _nothing_judged(findings):
        yield Finding("nvidia_smi.gpu", Status.ERROR, source, "nothing_judged",
                      f"the {len(record.gpus)} GPU(s) of this nvidia-smi {record.format} show no reading a check "
                      "judges (a '-q -d' selection such as ACCOUNTING, CLOCK or UTILIZATION, or --query-gpu columns "
                      "no check reads): the GPUs were not judged",
                      observed=len(record.gpus), unit="GPUs",
                      recommendation="Save the whole 'nvidia-smi -q' (or the sections that judge the GPU: "
                                     "-d MEMORY,ECC,TEMPERATURE,POWER,PERFORMANCE,ROW_REMAPPER) and judge it again.")
    elif record.fragment is None:
        yield from _inventory(record.format, len(record.gpus), record.attached_gpus, record.driver_version, source,
                              selected=record.selected)
    yield from findings


_REPORT_LEVEL = ("gpu.inventory.count", "gpu.inventory.driver")
"""The checks that judge what the report's banner states (``Attached GPUs``, ``Driver Version``), not a GPU."""


def _nothing_judged(findings: list[Finding]) -> bool:
    """Whether every check of a GPU skipped: the report's banner was judged, none of its GPUs.

    ``nvidia-smi -q -d ACCOUNTING`` prints the banner and, under each GPU's header, only the sections asked
    for (``--query-gpu`` only the columns asked for); when none of them is a reading a check judges, a PASS would
    rest on the GPU count and driver alone.
    """
    return all(f.status is Status.SKIP for f in findings if f.check_id not in _REPORT_LEVEL)


def _fragment_check(check_id: str) -> bool:
    """A fragment's GPU count is unknown: ``gpu.inventory.count`` would judge one it made up."""
    return _report_check(check_id) and check_id != "gpu.inventory.count"


def _smi_failures(record: NvidiaSmiRecord, source: str) -> Iterator[Finding]:
    for failure in record.failures:
        status, what, advice = SMI_FAILURES[failure.code]
        subject = f"{source}/{failure.gpu}" if failure.gpu else source
        yield Finding("nvidia_smi.failure", status, subject, failure.code, f"{what}: {failure.message}",
                      observed=failure.message, expected="a reading", recommendation=advice,
                      details={"line": failure.line})


@judges("nvidia-smi-nvlink", "nvidia-smi-list", "dcgmi-nvlink", "dcgmi-discovery")
def judge_listing(record: SmiListingRecord, config: Config, source: str) -> Iterator[Finding]:
    """NVLink state/counters (``gpu.nvlink``) or GPU identities (``gpu.inventory.*``) of a listing.

    A GPU under which ``nvlink -s`` printed a message instead of links (``nvlink_note``) is
    judged by :func:`_nvlink_note`; the others by the ``gpu.nvlink`` check. ``dcgmi nvlink``
    lists the same links (and its NvSwitches': :func:`_switch_links`).
    """
    from ..records import GpuRecord, NvLink

    what = "nvlink" if record.format == "nvlink" else "discovery -l" if record.tool == "dcgmi" else "-L"
    yield from _inventory(what, len(record.gpus), None, None, source, tool=record.tool)
    yield from _switch_links(record, source)
    if not record.gpus:
        return
    gpus = []
    for g in record.gpus:
        gpu = GpuRecord(index=g.index, name=g.name or NA("not listed"), uuid=g.uuid or NA("not listed"),
                        mig_current=True if g.mig_devices or g.nvlink_note == "mig_mode"
                        else NA(f"{record.tool} {what} shows no MIG mode"))
        if record.format == "nvlink":
            if g.nvlink_note == "not_supported":
                gpu.nvlinks = NA(f"{record.tool}: the device does not have or support NVLink")
            elif g.nvlink_note is not None:
                yield _nvlink_note(g, record, config, source)
                continue
            else:
                # `nvlink -e` prints counters only: a link it lists is taken as present, its state is `-s`'s to say
                gpu.nvlinks = [NvLink(link=x.link, active=x.active is not False, errors=_link_errors(x.errors))
                               for x in g.links] if g.links else NA("no NVLink listed")
        gpus.append(gpu)
    if record.elided:  # links cut out of a pasted excerpt are not missing links
        config = with_settings(config, LinkSettings, nvlink_expected_links=None)
    if gpus:
        facts = _facts(f"{record.tool} {what}", None, None, gpus)
        wanted = ("gpu.nvlink",) if record.format == "nvlink" else _LIST_CHECKS
        yield from run_gpu_checks(facts, config, source, lambda check_id: check_id in wanted)


def _switch_links(record: SmiListingRecord, source: str) -> Iterator[Finding]:
    """The NvSwitches ``dcgmi nvlink -s`` lists: FAIL when any of a switch's links is down or disabled
    (the GPUs behind it lose that path, as a GPU's own link down does), else PASS. A switch is judged
    on its links alone: whether a port is meant to be cabled is not printed, so only ``D``/``X`` count."""
    for switch in record.switches:
        subject = f"{source}/nvswitch{switch.index}"
        down = [x.link for x in switch.links if not x.active]
        details = {"links": len(switch.links), "active": len(switch.links) - len(down), "down": down}
        if down:
            yield Finding("gpu.nvlink", Status.FAIL, subject, "nvswitch_links_down",
                          f"NvSwitch {switch.index}: {len(down)} link(s) down or disabled: {down}",
                          observed=len(switch.links) - len(down), unit="links", details=details,
                          recommendation="Check the fabric manager log and the NVSwitch tray; drain the node "
                                         "until the links train again.")
        else:
            yield Finding("gpu.nvlink", Status.PASS, subject, "ok",
                          f"NvSwitch {switch.index}: {len(switch.links)} link(s) up", observed=len(switch.links),
                          unit="links", details=details)


BASEBOARD_NVLINK_NAMES = (r"SXM", r"\bHGX\b", r"\bH[18]00 80GB HBM3\b", r"(?<!G)H200(?! NVL)", r"\bH20\b",
                          r"(?<!G)B[123]00\b", r"\bGB[23]00\b")
"""NVML names of GPUs sold only as modules whose NVLinks are wired on the baseboard (SXM2/4/5 and
the HGX/Blackwell boards, whose names do not all say SXM: ``H100 80GB HBM3`` is the SXM5 part,
``H100 PCIe`` and ``H200 NVL`` the cards). On any other GPU NVLink, where it exists at all, is an
optional bridge between two cards (GeForce, Quadro/RTX, the PCIe data-centre cards), and a card
without one fitted reports every link inactive. A profile's ``perf.allreduce_nvswitch_gpu_names``
adds its own names; ``gpu.nvlink_expected_links`` says links are expected whatever the name."""


def _nvlink_note(gpu: ListedGpu, record: SmiListingRecord, config: Config, source: str) -> Finding:
    """A GPU nvidia-smi printed a message for instead of links: all inactive, or not queried in MIG mode.

    All links inactive FAILs on a GPU whose NVLinks are on its baseboard (:data:`BASEBOARD_NVLINK_NAMES`)
    or that the profile expects links on: the GPU is cut off from its peers (nvidia-smi prints this when
    the fabric manager or the links failed to train). On a listing that shows a single GPU 0 it WARNs
    instead: a one-GPU VM slice of such a board has no peer to link to, as ``gpu.nvlink`` SKIPs a
    node's only GPU, but the listing may also be a ``-i 0`` excerpt of a broken node. On any other GPU
    it SKIPs: an optional bridge is not fitted. MIG mode SKIPs: nvidia-smi does not query NVLink there;
    so do counters the driver keeps to administrators, ``--capabilities`` (what a link supports) and
    ``-gt``/``-g`` (traffic counters): they say nothing about whether the links are up.
    """
    subject = f"{source}/gpu{gpu.index}"
    label = f"gpu{gpu.index}" + (f" ({gpu.name})" if gpu.name else "")
    if gpu.nvlink_note == "mig_mode":
        return Finding("gpu.nvlink", Status.SKIP, subject, "mig_mode",
                       f"{label}: nvidia-smi does not query NVLink of a GPU in MIG mode; not judged")
    if gpu.nvlink_note == "capabilities":
        return Finding("gpu.nvlink", Status.SKIP, subject, "capabilities_only",
                       f"{label}: nvidia-smi nvlink --capabilities lists what each link supports, not whether it is "
                       "up; not judged", recommendation="Run `nvidia-smi nvlink -s` for the links' state.")
    if gpu.nvlink_note == "throughput":
        return Finding("gpu.nvlink", Status.SKIP, subject, "throughput_only",
                       f"{label}: nvidia-smi nvlink -gt/-g lists each link's traffic counters, not whether it is "
                       "up; not judged", recommendation="Run `nvidia-smi nvlink -s` for the links' state.")
    if gpu.nvlink_note == "no_permission":
        return Finding("gpu.nvlink", Status.SKIP, subject, "no_permission",
                       f"{label}: the driver keeps the NVLink counters to administrators (insufficient "
                       "permissions); not judged", recommendation="Run `nvidia-smi nvlink -s` (link states need "
                                                                  "no privilege) or the counters as root.")
    patterns = (*BASEBOARD_NVLINK_NAMES, *config.perf.allreduce_nvswitch_gpu_names)
    on_board = bool(gpu.name) and any(_matches(p, gpu.name or "") for p in patterns)
    if not on_board and not settings_of(config, LinkSettings).nvlink_expected_links:
        return Finding("gpu.nvlink", Status.SKIP, subject, "no_bridge",
                       f"{label}: every NVLink inactive: its NVLink is an optional bridge, and none is fitted; "
                       "not judged", observed=0, unit="links")
    why = "its NVLinks are on the baseboard" if on_board else "the profile expects NVLinks"
    details = {"links": 0, "active": 0, "basis": why}
    if len(record.gpus) == 1 and gpu.index == 0:
        return Finding("gpu.nvlink", Status.WARN, subject, "nvlink_inactive_single_gpu",
                       f"{label}: every NVLink inactive, and it is the only GPU shown ({why}): a fault unless this "
                       "is a one-GPU VM slice", observed=0, unit="links", details=details,
                       recommendation="If the node has other GPUs, run `nvidia-smi nvlink -s` on all of them and "
                                      "check the fabric manager; a one-GPU VM has no peer to link to.")
    return Finding("gpu.nvlink", Status.FAIL, subject, "nvlink_down",
                   f"{label}: every NVLink inactive ({why})", observed=0, unit="links", details=details,
                   recommendation="Reset the GPU; if links stay down, drain the node and check the NVSwitch tray / "
                                  "fabric manager logs (systemctl status nvidia-fabricmanager).")


def _matches(pattern: str, name: str) -> bool:
    """A profile's name pattern that is not a valid regular expression matches nothing."""
    try:
        return re.search(pattern, name, re.IGNORECASE) is not None
    except re.error:
        return False


_DMON_CHECKS = ("gpu.thermal", "gpu.ecc.errors")
"""What ``dmon`` samples that a GPU check judges: the ``p`` group's temperatures and (when ``-s e`` printed them)
the ``e`` group's ECC counts."""


@judges("nvidia-smi-dmon")
def judge_dmon(record: DmonRecord, config: Config, source: str) -> Iterator[Finding]:
    """The hottest and most power-hungry sample per GPU, and its largest ECC counts, judged like a live reading.

    The GPU temperature is ``gtemp`` (``temp`` in drivers before the GPU/memory split, which was not read: a GPU
    at its slowdown temperature PASSed); ``-s e``'s ``dbecc``/``sbecc`` are the volatile uncorrected/corrected
    counts ``gpu.ecc.errors`` judges. A run whose groups show neither (``-s u``, ``c``, ``v``, ``m``, ``t``)
    judges no GPU: ERROR ``nothing_judged``, as a ``-q -d`` selection no check reads, not a PASS on the GPU count.
    """
    from ..records import GpuRecord

    by_gpu: dict[int, list[dict[str, float | None]]] = {}
    for sample in record.samples:
        index = sample.get("gpu")
        if index is not None:
            by_gpu.setdefault(int(index), []).append(sample)

    def peak(samples: list[dict[str, float | None]], column: str) -> Any:
        values = [v for s in samples if (v := s.get(column)) is not None]
        return max(values) if values else NA(f"column {column!r} not sampled")

    temperature = "temp" if "temp" in record.columns and "gtemp" not in record.columns else "gtemp"
    gpus = [GpuRecord(index=i, temperature_c=_as_int(peak(s, temperature)),
                      memory_temperature_c=_as_int(peak(s, "mtemp")), power_draw_w=peak(s, "pwr"),
                      ecc_volatile_uncorrected=_as_int(peak(s, "dbecc")),
                      ecc_volatile_corrected=_as_int(peak(s, "sbecc")))
            for i, s in sorted(by_gpu.items())]
    wanted = _DMON_CHECKS if {"sbecc", "dbecc"} & set(record.columns) else ("gpu.thermal",)
    findings = run_gpu_checks(_facts("nvidia-smi dmon", None, None, gpus), config, source,
                              lambda check_id: check_id in wanted) if gpus else []
    if gpus and all(f.status is Status.SKIP for f in findings):
        yield Finding("nvidia_smi.gpu", Status.ERROR, source, "nothing_judged",
                      f"the {len(gpus)} GPU(s) this nvidia-smi dmon samples show no column a check judges "
                      f"({' '.join(record.columns[1:]) or 'none'}): the GPUs were not judged",
                      observed=len(gpus), unit="GPUs",
                      recommendation="Sample the temperatures and ECC counts (nvidia-smi dmon -s pe) and judge that.")
    else:
        yield from _inventory("dmon", len(by_gpu), None, None, source)
    yield from findings


@judges("nvidia-smi-topo")
def judge_topo(record: TopoRecord, config: Config, source: str) -> Iterator[Finding]:
    """The matrix judged by :func:`~.gpu_topology.judge_topology` against the profile's NVLinks per GPU and
    the configured GPU count; each device's links and CPU/NUMA affinity are kept as observed/details."""
    gpus = tuple(d.name for d in record.devices if d.name.startswith("GPU"))
    nics = tuple(d.name for d in record.devices if d.name.startswith(("NIC", "mlx")))
    matrix = TopologyMatrix(gpus=gpus, cells={d.name: d.links for d in record.devices}, nics=nics,
                            expected_links=settings_of(config, LinkSettings).nvlink_expected_links,
                            expected_gpus=config.gpu.expected_count)
    affinity = {"affinity": {d.name: d.cpu_affinity for d in record.devices},
                "numa_affinity": {d.name: d.numa_affinity for d in record.devices if d.numa_affinity},
                "nic_names": dict(record.nic_names)}
    for verdict in judge_topology(matrix):
        yield Finding("nvidia_smi.topo", verdict.status, source, verdict.code, verdict.message,
                      observed=verdict.observed if verdict.observed is not None else {
                          d.name: d.links for d in record.devices},
                      expected=verdict.expected, unit=verdict.unit, recommendation=verdict.recommendation,
                      details=verdict.details | affinity)


@judges("nvidia-smi-p2p")
def judge_p2p(record: P2pRecord, config: Config, source: str) -> Iterator[Finding]:
    """Each pair's status, judged for read/write peer access (:data:`NVIDIA_SMI_P2P`)."""
    from ..records.smi import P2P_STATUSES

    pairs = {(a, b): record.cells[a][b] for i, a in enumerate(record.gpus) for b in record.gpus[i + 1:]}
    blocked = {f"{a}-{b}": f"{cell} ({P2P_STATUSES[cell]})" for (a, b), cell in pairs.items() if cell != "OK"}
    what = {"r": "read", "w": "write", "n": "NVLink", "a": "atomics", "p": "prop"}
    asked = "/".join(what[c] for c in record.capability) if record.capability else "an unnamed capability"
    details = {"capability": record.capability, "pairs": {f"{a}-{b}": c for (a, b), c in pairs.items()}}
    if not pairs:
        yield Finding("nvidia_smi.p2p", Status.SKIP, source, "single_gpu", "one GPU: no pair to judge",
                      details=details)
    elif not blocked:
        yield Finding("nvidia_smi.p2p", Status.PASS, source, "ok",
                      f"{len(record.gpus)} GPUs: every pair OK for {asked} peer access", observed=len(pairs),
                      unit="pairs", details=details)
    elif record.capability and set(record.capability) <= {"r", "w"}:
        listed = ", ".join(f"{pair} {why}" for pair, why in blocked.items())
        yield Finding("nvidia_smi.p2p", Status.WARN, source, "p2p_unavailable",
                      f"{len(blocked)} of {len(pairs)} GPU pair(s) without {asked} peer access: {listed}",
                      observed=blocked, expected="OK", details=details,
                      recommendation="NCCL copies between these GPUs through host memory. CNS/TNS: check the "
                                     "BIOS (ACS, IOMMU, PCIe switch settings); GNS: the GPUs do not support "
                                     "peer access (most GeForce cards); DR: a driver registry key disables it.")
    else:
        yield Finding("nvidia_smi.p2p", Status.SKIP, source, "not_judged",
                      f"{len(blocked)} of {len(pairs)} GPU pair(s) not OK for {asked}; only read/write peer access "
                      "is judged (paste the command: nvidia-smi topo -p2p r)", observed=blocked, details=details)


@judges("dmesg")
def judge_dmesg(record: DmesgRecord, config: Config, source: str) -> Iterator[Finding]:
    """Xids by the Xid policy (``gpu.xid``), RDMA NIC messages and link flaps (``kernel.nic``,
    ``kernel.link_flap``, :func:`~.evidence_fabric.judge_kernel_network`), the host's own messages (PCIe
    AER, OOM kills, hung tasks, CPU throttling: :func:`~.evidence_kernel.judge_kernel_host`), PCIe
    ``limited by`` links, and GPU-library crashes.

    The Xid window of a saved log ends at its last timestamp (the log has no "now");
    an unreadable log is an ERROR: the file says nothing about Xids.
    """
    if not record.readable:
        yield Finding("gpu.xid", Status.ERROR, source, "log_unreadable",
                      f"the kernel log could not be read: {record.denied}",
                      recommendation="Collect it with privileges (sudo dmesg, or CAP_SYSLOG in the container).")
        return
    yield from _xids(record, config, source)
    window = record.window(config.xid.window_hours)
    yield from judge_kernel_network(record, window, source)
    yield from judge_kernel_host(record, window, source)
    for limit in record.pcie_limits:
        yield Finding("pcie.limited_by", Status.WARN, f"{source}/{limit.device}", "link_limited",
                      f"{limit.device}: {limit.available_gbps:g} Gb/s available, limited by a "
                      f"{limit.limited_by_speed_gts:g} GT/s x{limit.limited_by_width} link at {limit.limited_at} "
                      f"(capable of {limit.capable_gbps:g} Gb/s at {limit.capable_speed_gts:g} GT/s "
                      f"x{limit.capable_width})",
                      observed=limit.available_gbps, expected=limit.capable_gbps, unit="Gb/s",
                      recommendation="A slower switch, slot or BIOS link setting upstream caps this device: check "
                                     "the PCIe generation of the slot/switch and the BIOS PCIe settings.")
    crashed = [s for s in record.segfaults if s.library and s.library.startswith(GPU_LIBRARIES)]
    for seg in {(s.process, s.pid, s.library): s for s in crashed}.values():
        yield Finding("kernel.segfault", Status.WARN, source, "gpu_library_segfault",
                      f"{seg.process}[{seg.pid}] crashed inside {seg.library}",
                      observed=seg.raw, details={"library": seg.library},
                      recommendation="An application crash inside a GPU library: match NCCL/CUDA library versions "
                                     "to the driver and check the job log for the first error.")


def _xids(record: DmesgRecord, config: Config, source: str) -> Iterator[Finding]:
    window = record.window(config.xid.window_hours)
    yield from judge_xid_tally(record.xid_tally(window), window.end, config, source, "kernel log")


def judge_xid_tally(tally: XidTally, end: datetime | None, config: Config, source: str,
                    gpu_source: str) -> Iterator[Finding]:
    """The registered ``gpu.xid`` check (and its one Xid catalogue) over the Xid events a saved text holds, as
    over a live kernel log's: a kernel log's, or a device plugin's health checker's (``gpu_source`` says which)."""
    from ..records import GpuFacts, KernelLogFacts
    from ..registry import CheckContext, get_check

    facts = {"kernel_log": KernelLogFacts(True, source, end or datetime(1970, 1, 1, tzinfo=UTC), tally=tally),
             "gpu": GpuFacts(source=gpu_source, available=True)}
    yield from get_check("gpu.xid").fn(CheckContext(host=source, facts=facts, config=config))


def _inventory(what: str, listed: int, attached: int | None, driver: str | None, source: str,
               tool: str = "nvidia-smi", selected: list[str] | None = None) -> Iterator[Finding]:
    """How many GPUs the output lists against how many it says are attached. A pasted ``-i``/``--id``
    selection (``selected``) makes nvidia-smi list only the GPUs asked for: those are the count to
    meet, and the attached GPUs not asked for were not meant to be listed."""
    if listed == 0:
        yield Finding("nvidia_smi.gpu", Status.ERROR, source, "no_gpus",
                      f"the {tool} {what} output lists no GPU: nothing to judge")
    elif selected is not None and attached is not None and attached > listed:
        asked = f"-i {','.join(selected)}"
        if listed < min(len(selected), attached):
            yield Finding("nvidia_smi.gpu", Status.WARN, source, "gpus_not_listed",
                          f"the command asked for {len(selected)} GPU(s) ({asked}) but nvidia-smi lists {listed}: "
                          "the others were not judged", observed=listed, expected=len(selected), unit="GPUs")
        else:
            yield Finding("nvidia_smi.gpu", Status.PASS, source, "ok",
                          f"{listed} GPU(s) judged from {tool} {what}, as selected by {asked} ({attached} attached)"
                          + (f" (driver {driver})" if driver else ""), observed=listed, unit="GPUs")
    elif attached is not None and attached > listed:
        yield Finding("nvidia_smi.gpu", Status.WARN, source, "gpus_not_listed",
                      f"nvidia-smi reports {attached} attached GPUs but lists {listed}: the others were not judged",
                      observed=listed, expected=attached, unit="GPUs")
    else:
        yield Finding("nvidia_smi.gpu", Status.PASS, source, "ok",
                      f"{listed} GPU(s) judged from {tool} {what}" + (f" (driver {driver})" if driver else ""),
                      observed=listed, unit="GPUs")


def _facts(what: str, driver: str | None, cuda: str | None, gpus: list[GpuRecord]) -> GpuFacts:
    from ..records import GpuFacts

    missing = f"not in {what} output"
    return GpuFacts(source=what, available=True, driver_version=driver or NA(missing),
                    cuda_driver_version=cuda or NA(missing), nvml_version=NA(f"{what}, not NVML"),
                    gpus=gpus, pci_gpus=NA(missing))


def to_gpu_record(g: SmiGpu, fmt: str) -> GpuRecord:
    """An nvidia-smi GPU as the NVML probe would have recorded it; absent fields are ``NA``."""
    from ..records import GpuProcess, GpuRecord
    from ..records.smi import clock_mask

    why = NA(f"not shown in nvidia-smi {fmt} output")

    def val(value: Any) -> Any:
        return why if value is None else value

    def mib(value: int | None) -> Any:
        return why if value is None else value * MIB

    # NVML's list (what gpu.busy judges) holds compute processes: graphics-only ones (type G) are not jobs.
    processes = ([GpuProcess(p.pid, p.used_memory_mib * MIB if p.used_memory_mib is not None else why)
                  for p in g.processes if p.type != "G"] if g.processes is not None else why)
    return GpuRecord(
        index=g.index if g.index is not None else 0,
        name=val(g.name), uuid=val(g.uuid), serial=val(g.serial), pci_bus_id=val(g.pci_bus_id), vbios=val(g.vbios),
        memory_total_bytes=mib(g.memory_total_mib), memory_used_bytes=mib(g.memory_used_mib),
        temperature_c=val(g.temperature_c), temp_slowdown_c=val(g.temp_slowdown_c),
        temp_shutdown_c=val(g.temp_shutdown_c), temp_gpu_max_c=val(g.temp_gpu_max_c),
        memory_temperature_c=val(g.memory_temperature_c), temp_memory_max_c=val(g.temp_memory_max_c),
        power_draw_w=val(g.power_draw_w), power_limit_w=val(g.power_limit_w),
        power_default_limit_w=val(g.power_default_limit_w), utilization_gpu_percent=val(g.utilization_gpu_percent),
        persistence_mode=val(g.persistence_mode), compute_mode=val(g.compute_mode),
        mig_current=_mode(g.mig_mode, why), mig_pending=_mode(g.mig_mode_pending, why),
        ecc_current=val(g.ecc_mode), ecc_pending=val(g.ecc_mode_pending),
        ecc_volatile_corrected=val(g.ecc_volatile_corrected), ecc_volatile_uncorrected=val(g.ecc_volatile_uncorrected),
        ecc_aggregate_corrected=val(g.ecc_aggregate_corrected),
        ecc_aggregate_uncorrected=val(g.ecc_aggregate_uncorrected),
        sram_aggregate_corrected=val(g.sram_aggregate_corrected),
        sram_aggregate_uncorrected=val(g.sram_aggregate_uncorrected),
        remapped_rows_correctable=val(g.remapped_rows_correctable),
        remapped_rows_uncorrectable=val(g.remapped_rows_uncorrectable),
        remap_pending=val(g.remapped_rows_pending), remap_failure=val(g.remapped_rows_failure),
        retired_pages_sbe=val(g.retired_pages_sbe), retired_pages_dbe=val(g.retired_pages_dbe),
        retired_pages_pending=val(g.retired_pages_pending), recovery_action=_recovery(g.recovery_action, why),
        clock_event_reasons=(clock_mask(g.clocks_event_reasons_active)
                             if g.clocks_event_reasons_active is not None else why),
        sm_clock_mhz=val(g.sm_clock_mhz), sm_clock_max_mhz=val(g.sm_clock_max_mhz),
        performance_state=_pstate(g.performance_state, why),
        pcie_gen_current=val(g.pcie_gen_current), pcie_gen_max=val(g.pcie_gen_max),
        pcie_width_current=val(g.pcie_width_current), pcie_width_max=val(g.pcie_width_max),
        pcie_replay_counter=val(g.pcie_replay_counter), processes=processes,
        nvlinks=NA(f"NVLink state is not in nvidia-smi {fmt} output (judge `nvidia-smi nvlink -s`)"),
    )


def _mode(mode: str | None, why: NA) -> Any:
    return why if mode is None else mode == "enabled"


def _pstate(state: str | None, why: NA) -> Any:
    if state and state.upper().startswith("P") and state[1:].isdigit():
        return int(state[1:])
    return why


# What nvidia-smi prints for NVML's GPU_RESET and NODE_REBOOT besides their names: real 570-590 reports read
# ``GPU Recovery Action : Reset`` / ``: Reboot`` (the words scripts grep for, nvidia_gpu_exporter maps); Xid 154
# names them ``GPU Reset Required`` / ``Node Reboot Required``.
_RECOVERY_WORDS = {"RESET": "GPU_RESET", "REBOOT": "NODE_REBOOT", "GPU_RESET_REQUIRED": "GPU_RESET",
                   "NODE_REBOOT_REQUIRED": "NODE_REBOOT"}


def _recovery(action: str | None, why: NA) -> Any:
    """nvidia-smi's printed recovery action (``None``, ``GPU Reset``, ``Reset``...) → NVML's value."""
    from ..recovery import RECOVERY_ACTIONS

    if action is None:
        return why
    by_name = {a.name: value for value, a in RECOVERY_ACTIONS.items()}
    name = action.upper().replace(" ", "_")
    return by_name.get(_RECOVERY_WORDS.get(name, name), NA(f"unknown recovery action {action!r}"))


def _link_errors(errors: dict[str, int]) -> dict[str, int | NA]:
    """nvlink -e labels → the NVML counter names gpu.nvlink sums (``crc`` counts as flit CRC).

    NVLink5 GPUs (GB200, B200: NVML's NVLINK_COUNT_* fields) print no ``Replay``/``Recovery``/``CRC Errors``
    but ``Total link recovery events`` (with ``Link recovery successful events`` and ``... failed events``): those
    are the link's recoveries, judged as ``Recovery Errors`` are. Their other counters (effective and symbol
    errors, BER, FEC histogram) match no gpu.nvlink rule and are not read.
    """
    names = {"replay": "replay", "recovery": "recovery", "crc": "crc_flit", "crc_flit": "crc_flit",
             "crc_data": "crc_data", "ecc_data": "ecc_data", "total_link_recovery_events": "recovery"}
    found: dict[str, int | NA] = {names[k]: v for k, v in errors.items() if k in names}
    parts = [errors[k] for k in ("link_recovery_successful_events", "link_recovery_failed_events") if k in errors]
    if "recovery" not in found and parts:
        found["recovery"] = sum(parts)
    return found


def _as_int(value: Any) -> Any:
    return int(value) if isinstance(value, float) else value
