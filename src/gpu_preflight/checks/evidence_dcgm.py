"""Judging a DCGM diagnostic (``dcgmi diag``), JSON or table.

``dcgm.diag``: one finding per failing or warning GPU of each test, naming the GPU and
quoting DCGM's own message (it is the diagnosis: "GPU 1 Max power of 224.1 did not reach
desired power minimum..."); FAIL for a failed test, WARN for a warning. Skipped tests are
reported as SKIP, and tests listed in ``evidence.dcgm_ignore_tests`` are reported as SKIP
whatever their result. Passing tests fold into one PASS. A run DCGM could not complete
(``Return: (-30)``, plugins missing) is an ERROR: nothing was measured; error lines beside
a partial table are an ERROR too, since some tests did not run. A run whose hardware tests
(level 2 and up) were all skipped WARNs (``hardware_not_tested``): only the software checks ran.

Each FAIL and WARN names the operator action DCGM's own codes call for
(:func:`~.dcgm_errors.dcgm_action`: the JSON's ``error_id``\\ s, or the codes a table's warning
texts match, through DCGM's severity table), so a scheduler hook routes a DCGM failure with the
same words as an Xid.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..actions import Action, with_action
from ..config.evidence import evidence_config
from ..model import Finding, Status
from ..registry import declare
from .dcgm_errors import dcgm_action
from .evidence import judges

if TYPE_CHECKING:
    from ..config import Config
    from ..records.dcgm import DcgmDiagRecord, DcgmDmonRecord, DcgmHealthRecord, DcgmStatsRecord, DcgmTest

CHECK = "dcgm.diag"
_SOFTWARE_CATEGORIES = frozenset({"deployment", "metadata", "software"})  # the level-1 checks; the rest test the GPU
_STATUS = {"fail": Status.FAIL, "warn": Status.WARN}
_ADVICE = {
    "fail": "Drain the node: rerun `dcgmi diag -r 3` on it and follow DCGM's message (reset the GPU, "
            "check power/cooling, RMA if it fails again).",
    "warn": "Rerun the test; if the warning repeats, check the GPU named in the message before long jobs.",
}

_MIG_ADVICE = ("DCGM does not diagnose a GPU split into MIG instances: disable MIG on the GPUs it names "
               "(`nvidia-smi -i N -mig 0`, then reset them) and rerun `dcgmi diag`.")


@judges("dcgmi-diag")
def judge_dcgm(record: DcgmDiagRecord, config: Config, source: str) -> Iterator[Finding]:
    """Per-test, per-GPU verdicts of a DCGM diagnostic run."""
    ignored = {name.strip().lower() for name in evidence_config(config).dcgm_ignore_tests}
    version = f"DCGM {record.dcgm_version}" if record.dcgm_version else "DCGM"
    yield from _mig_refused(record, config, source)
    if record.overall == "error":
        code = f" (return code {record.return_code})" if record.return_code is not None else ""
        yield Finding(CHECK, Status.ERROR, source, "diag_error",
                      f"{version} diagnostic could not run{code}: {'; '.join(record.errors)[:300]}",
                      observed=record.return_code, expected=0, details={"errors": record.errors},
                      recommendation=_MIG_ADVICE if record.mig_gpus else
                      "Fix the DCGM installation (nv-hostengine running, the diagnostic plugins for "
                      "this CUDA major installed) and rerun `dcgmi diag`.")
        return
    if record.errors:  # DCGM printed errors beside a partial result: what is missing was not measured
        yield Finding(CHECK, Status.ERROR, source, "diag_errors",
                      f"{version} reported errors beside its results: {'; '.join(record.errors)[:300]}",
                      details={"errors": record.errors, "return_code": record.return_code},
                      recommendation="Some tests may not have run: fix the error and rerun `dcgmi diag`.")
    passed = []
    for test in record.tests:
        label = f"{test.category}/{test.name}" if test.category else test.name
        if test.name.strip().lower() in ignored and test.status != "pass":
            yield Finding(CHECK, Status.SKIP, source, _slug(test.name),
                          f"{version} {label}: {test.status}, ignored (evidence.dcgm_ignore_tests)",
                          observed=test.status, details=_details(test))
        elif test.status in _STATUS:
            yield from _failures(test, label, version, source)
        elif test.status == "skip":
            yield Finding(CHECK, Status.SKIP, source, _slug(test.name), f"{version} {label}: skipped by DCGM",
                          observed="skip", details=_details(test))
        else:
            passed.append(label)
    yield from _hardware_not_tested(record, ignored, version, source)
    if passed:
        yield Finding(CHECK, Status.PASS, source, "ok",
                      f"{version}: {len(passed)} test(s) passed" + (f" (driver {record.driver_version})"
                                                                     if record.driver_version else ""),
                      observed=passed, details={"gpu_device_ids": record.gpu_device_ids})


def _mig_refused(record: DcgmDiagRecord, config: Config, source: str) -> Iterator[Finding]:
    """The GPUs DCGM refused to diagnose because of their MIG configuration, judged by ``gpu.inventory.mig``.

    DCGM's refusal states the GPU is in MIG mode, the reading the node check takes from NVML: with
    ``gpu.mig_mode = "disabled"`` (training needs whole GPUs) that FAILs as it would on the node, beside
    the diagnostic's own ERROR (nothing was tested); a site that plans MIG (``"enabled"``/``"any"``) PASSes it.
    """
    from ..records import GpuRecord
    from .evidence_gpu import _facts, run_gpu_checks

    gpus = [GpuRecord(index=i, mig_current=True) for i in dict.fromkeys(record.mig_gpus)]
    if gpus:
        yield from run_gpu_checks(_facts("dcgmi diag", record.driver_version, None, gpus), config, source,
                                  lambda check_id: check_id == "gpu.inventory.mig")


def _hardware_not_tested(record: DcgmDiagRecord, ignored: set[str], version: str, source: str) -> Iterator[Finding]:
    """WARN when a run had hardware tests (level 2 and up) and DCGM skipped every one of them.

    Only the Deployment (software) checks then ran: the run says nothing of the GPUs' memory,
    PCIe, power or compute, so its passes must not read as a healthy GPU (a level-3 run on a
    GPU the DCGM release does not support, or with the tests' plugins missing, looks like this).
    """
    hardware = [t for t in record.tests if t.category and t.category.strip().lower() not in _SOFTWARE_CATEGORIES
                and t.name.strip().lower() not in ignored]
    if not hardware or any(t.status != "skip" for t in hardware):
        return
    names = list(dict.fromkeys(t.name for t in hardware))
    yield Finding(CHECK, Status.WARN, source, "hardware_not_tested",
                  f"{version}: DCGM skipped every hardware test of the run ({', '.join(names)[:200]}): only the "
                  f"software checks ran, the GPUs were not examined",
                  observed="skip", expected="pass", details={"skipped_tests": names},
                  recommendation="Find out why DCGM skipped them (`dcgmi diag -r 3 -v`: a GPU this DCGM release does "
                                 "not support, missing test plugins, a test not allowed) and rerun before trusting "
                                 "the node.")


def _failures(test: DcgmTest, label: str, version: str, source: str) -> Iterator[Finding]:
    status = _STATUS[test.status]
    message = " ".join(test.messages) or "no message from DCGM"
    targets: list[int | None] = list(test.gpus) or [None]
    action = dcgm_action(test.status, test.error_ids, test.messages, test.error_severities)
    for gpu in targets:
        subject = f"{source}/gpu{gpu}" if gpu is not None else source
        where = f" on GPU {gpu}" if gpu is not None else ""
        yield Finding(CHECK, status, subject, _slug(test.name),
                      f"{version} {label} {'failed' if test.status == 'fail' else 'warned'}{where}: {message}"[:400],
                      observed=test.status, expected="pass", recommendation=_ADVICE[test.status],
                      details=with_action({**_details(test), "gpu": gpu}, action))


def _details(test: DcgmTest) -> dict[str, object]:
    details: dict[str, object] = {"category": test.category, "test": test.name, "gpu_status": test.gpu_status,
                                  "messages": test.messages, "info": test.info, "error_ids": test.error_ids}
    if test.error_severities:
        details["error_severities"] = test.error_severities
    return details


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "test"


HEALTH = "dcgm.health"
_HEALTH_STATUS = {"Healthy": Status.PASS, "Warning": Status.WARN, "Failure": Status.FAIL,
                  "Internal error": Status.ERROR}
DCGM_HEALTH = declare(
    HEALTH, "DCGM's health watches report the GPUs healthy",
    """A saved ``dcgmi health -c`` (table or ``-j``) is judged by the health DCGM's own watches report:
    ``Healthy`` PASS, ``Warning`` WARN, ``Failure`` FAIL, ``Internal error`` ERROR (the watches could
    not say; so is dcgmi's answer that it could not check, e.g. watches never enabled). Each incident
    (a GPU's PCIe, NVLink, memory, InfoROM, thermal, power or driver system)
    is one finding quoting DCGM's messages; a Failure calls for draining the node (DCGM's health
    failures are the conditions its policy manager isolates a GPU for), a Warning for watching it.""",
    group=(), component="hardware_health", core=True,
    actions={"health_failure": Action.ISOLATE_NODE, "health_warning": Action.MONITOR})


@judges("dcgmi-health")
def judge_dcgm_health(record: DcgmHealthRecord, config: Config, source: str) -> Iterator[Finding]:
    """The overall health of ``dcgmi health -c``, then one finding per incident it lists."""
    from ..registry import stamp_actions

    if record.overall is None:
        yield Finding(HEALTH, Status.ERROR, source, "health_not_checked",
                      f"dcgmi health could not check the GPUs: {'; '.join(record.errors)[:300]}",
                      details={"errors": record.errors},
                      recommendation="Enable the health watches first (`dcgmi health -g <group> -s a`), let them "
                                     "collect, then rerun `dcgmi health -g <group> -c`.")
        return
    overall = _HEALTH_STATUS[record.overall]
    findings = [Finding(HEALTH, overall, source, "overall" if overall is Status.PASS else
                        f"health_{record.overall.lower().replace(' ', '_')}",
                        f"DCGM health watches: overall {record.overall}"
                        + (f" ({len(record.incidents)} incident(s))" if record.incidents else ""),
                        observed=record.overall, expected="Healthy")]
    for incident in record.incidents:
        status = _HEALTH_STATUS[incident.health]
        text = "; ".join(incident.messages)[:300]
        summary = f"{incident.entity} {incident.system}: {incident.health}" + (f": {text}" if text else "")
        findings.append(Finding(HEALTH, status, f"{source}/{incident.entity.replace(' ', '').lower()}",
                                f"health_{incident.health.lower().replace(' ', '_')}", summary,
                                observed=incident.health, expected="Healthy",
                                details={"system": incident.system, "messages": incident.messages}))
    yield from stamp_actions(findings)


# dcgmi dmon's field short names (dcgm_fields: DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_MEMORY_TEMP, DCGM_FI_DEV_POWER_USAGE)
# for the readings ``gpu.thermal`` judges on an nvidia-smi dmon
_DMON_TEMPERATURE, _DMON_MEMORY_TEMPERATURE, _DMON_POWER = "TMPTR", "MMTMP", "POWER"


@judges("dcgmi-dmon")
def judge_dcgm_dmon(record: DcgmDmonRecord, config: Config, source: str) -> Iterator[Finding]:
    """``dcgmi dmon`` judged as ``nvidia-smi dmon`` is: the GPUs it sampled, and each one's hottest and most
    power-hungry sample by ``gpu.thermal`` where the fields were asked for (``TMPTR``, ``MMTMP``, ``POWER``).
    Profiling activity (``GRACT``, ``SMACT``, ``DRAMA``...) has no healthy range to hold a GPU to. A dmon that
    could not watch its fields and sampled no GPU measured nothing: an ERROR quoting dmon's own line."""
    from ..model import NA
    from ..records import GpuRecord
    from .evidence_gpu import _facts, _inventory, run_gpu_checks

    by_gpu: dict[int, list[dict[str, float | None]]] = {}
    for sample in record.samples:
        if sample.entity == "GPU":
            by_gpu.setdefault(sample.index, []).append(sample.values)
    if record.errors and not by_gpu:
        yield Finding("nvidia_smi.gpu", Status.ERROR, source, "dmon_error",
                      f"dcgmi dmon sampled nothing: {'; '.join(record.errors)[:300]}",
                      details={"errors": record.errors, "fields": record.fields},
                      recommendation="Watch fields this GPU and DCGM support (`dcgmi dmon -l`; profiling fields "
                                     "need a supported GPU and a host engine with the profiling module).")
        return
    yield from _inventory("dmon", len(by_gpu), None, None, source, tool="dcgmi")

    def peak(samples: list[dict[str, float | None]], field: str) -> float | NA:
        values = [v for s in samples if (v := s.get(field)) is not None]
        return max(values) if values else NA(f"field {field!r} not sampled")

    def as_int(value: float | NA) -> int | NA:
        return value if isinstance(value, NA) else round(value)

    gpus = [GpuRecord(index=i, temperature_c=as_int(peak(s, _DMON_TEMPERATURE)),
                      memory_temperature_c=as_int(peak(s, _DMON_MEMORY_TEMPERATURE)),
                      power_draw_w=peak(s, _DMON_POWER)) for i, s in sorted(by_gpu.items())]
    if gpus:
        yield from run_gpu_checks(_facts("dcgmi dmon", None, None, gpus), config, source,
                                  lambda check_id: check_id == "gpu.thermal")


# dcgmi stats' Event Stats rows that count faults DCGM's health watches fail a GPU for (ProcessStats.cpp)
_STATS_FAULTS = ("Double Bit ECC Errors", "Critical XID Errors")


@judges("dcgmi-stats")
def judge_dcgm_stats(record: DcgmStatsRecord, config: Config, source: str) -> Iterator[Finding]:
    """``dcgmi stats`` (a job's or process's statistics): the GPUs it reports on (``nvidia_smi.gpu``), and
    by ``dcgm.health`` what its Event Stats count while the job ran (double-bit ECC errors, critical Xids:
    any is a FAIL) and the Overall Health it prints (``Healthy``/``Warning``/``Failure``). Execution and
    performance statistics (times, energy, clocks, utilisation) have no healthy range to hold a GPU to."""
    from ..registry import stamp_actions
    from .evidence_gpu import _inventory

    yield from _inventory("stats", len({box.gpu for box in record.gpus if box.gpu is not None}), None, None,
                          source, tool="dcgmi")
    findings = []
    for box in record.gpus:
        where = f"{source}/gpu{box.gpu}" if box.gpu is not None else f"{source}/{'rows' if box.fragment else 'summary'}"
        name = f"GPU {box.gpu}" if box.gpu is not None else ("the pasted rows" if box.fragment else "the job summary")
        for label in _STATS_FAULTS:
            value = box.rows.get(label, "")
            if value.isdigit() and int(value) > 0:
                findings.append(Finding(HEALTH, Status.FAIL, where, "health_failure",
                                        f"dcgmi stats: {name} counted {value} {label} during the job",
                                        observed=int(value), expected=0))
        overall = box.rows.get("Overall Health", "").strip()
        status = next((s for word, s in _HEALTH_STATUS.items() if overall.lower().startswith(word.lower())), None)
        if status is not None:
            code = "overall" if status is Status.PASS else f"health_{overall.split()[0].lower()}"
            findings.append(Finding(HEALTH, status, where, code, f"dcgmi stats: {name} overall health {overall}",
                                    observed=overall, expected="Healthy"))
    yield from stamp_actions(findings)
