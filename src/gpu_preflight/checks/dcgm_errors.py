"""DCGM's own failure codes (``DCGM_FR_*``) and the operator action each calls for.

Every warning a DCGM diagnostic prints stands for one code of ``dcgmError_t``, and DCGM gives
each code a severity (``dcgmErrorSeverity_t``: MONITOR "can perform workload, but needs to be
monitored", ISOLATE "cannot perform workload, GPU should be isolated", RESET "drain and reset
GPU", TRIAGE "should be triaged", CONFIG "can be configured"). ``dcgmi diag -j`` prints the
code beside each warning (``error_id``; its ``error_severity`` is the same table looked up,
``DcgmError.h``), the text table prints only the message: this module knows both, so a saved
table is judged as precisely as the JSON.

Transcribed from NVIDIA/DCGM at commit 72fa3feaa67d716a75323a8f47c34ff3ee73f824 (DCGM 4.6.0,
Apache-2.0): codes and message formats from ``dcgmlib/dcgm_errors.h``, severities from the
``dcgmErrorMeta`` table in ``dcgmlib/src/dcgm_errors.c``. Message formats also list the older
wordings of the same code, from every release of that file in the repository's history (2.2.6
onwards: "clock throttling" before "clocks event", "has uncorrectable memory errors and row
remappings are pending" before "had memory errors ..."), since saved tables come from every
version. Severities are the current release's: they were reworked in 4.6.0 (most codes were
MONITOR or ISOLATE before), and the newest word is DCGM's best.

Pure data and two lookups; no I/O.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping

from ..actions import Action, strongest

__all__ = ["DCGM_ERRORS", "FALLBACK", "OVERRIDES", "SEVERITY_ACTIONS", "SEVERITY_LEVELS", "code_action", "dcgm_action",
           "dcgm_codes", "severity_action"]

# Severity word -> action. TRIAGE's own advice (SYSTEM_TRIAGE_MSG, the text most TRIAGE codes
# carry) is "Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics.";
# CONFIG is a setting to change (persistence mode, a CUDA variable, a test the SKU lacks): no
# routing action. UNKNOWN says nothing: the test's own result decides (FALLBACK).
SEVERITY_ACTIONS: Mapping[str, Action | None] = {
    "NONE": Action.NONE, "MONITOR": Action.MONITOR, "ISOLATE": Action.ISOLATE_NODE, "RESET": Action.RESET_GPU,
    "TRIAGE": Action.RESET_GPU, "CONFIG": Action.NONE, "UNKNOWN": None,
}

# ``dcgmErrorSeverity_t`` (dcgm_errors.h): the number ``dcgmi diag -j`` prints as a warning's
# ``error_severity`` (4.x), the level DCGM gave that code in the release that ran.
SEVERITY_LEVELS: Mapping[int, str] = {0: "NONE", 1: "MONITOR", 2: "ISOLATE", 3: "UNKNOWN", 4: "TRIAGE", 5: "CONFIG",
                                      6: "RESET"}

# Codes whose own advice (the ``*_NEXT`` text beside the code) names another action than their
# severity word, by code number.
OVERRIDES: Mapping[int, Action] = {
    9: Action.MONITOR,  # CORRUPT_INFOROM: "Flash the InfoROM"; the GPU works (as nvidia_smi.failure's WARN)
    22: Action.NONE,  # CANNOT_OPEN_LIB: "set LD_LIBRARY_PATH": a software install
    45: Action.CHECK_MECHANICALS,  # PCIE_GENERATION: a link below its generation, as gpu.pcie judges it
    46: Action.CHECK_MECHANICALS,  # PCIE_WIDTH: a link below its width: reseat (gpu.pcie link_downtrained)
    49: Action.NONE,  # CANNOT_GET_STAT: "verify that [nv-hostengine] is up": DCGM itself
    59: Action.NONE,  # CUDA_DEVICE: "CUDA_VISIBLE_DEVICES ... CUDA libraries": the environment
    66: Action.NONE,  # CUDA_CONTEXT: "the correct driver version is installed": the software stack
    73: Action.REBOOT_NODE,  # MEMORY_ALLOC_HOST: "Manually kill processes or restart your machine"
    **dict.fromkeys((89, 90, 91, 92, 93, 94, 124), Action.NONE),  # EUD / binary permissions: the install
    97: Action.NONE,  # PAUSE_RESUME_FAILED: DCGM's own module state
    130: Action.NONE,  # RETEST_REQUESTED: DCGM asks for a rerun, not for an operator
    132: Action.ISOLATE_NODE,  # UNCORRECTABLE_ROW_REMAP_LIMIT: "Run a field diagnostic on the GPU" (RMA path)
}

# A failed or warning test whose codes are unknown (a table message no format matches, an
# UNKNOWN code): a failure gets DCGM's generic triage (reset the GPU, rerun), a warning is watched.
FALLBACK: Mapping[str, Action] = {"fail": Action.RESET_GPU, "warn": Action.MONITOR}

# code: (DCGM_FR_ name, severity word, message formats, newest first)
DCGM_ERRORS: Mapping[int, tuple[str, str, tuple[str, ...]]] = {
    0: ("OK", "UNKNOWN", ("The operation completed successfully.",)),
    1: ("UNKNOWN", "UNKNOWN", ("Unknown error.",)),
    2: ("UNRECOGNIZED", "UNKNOWN", ("Unrecognized error code.",)),
    3: ("PCI_REPLAY_RATE", "ISOLATE", ("Detected more than %u PCIe replays per minute for GPU %u : %d",)),
    4: ("VOLATILE_DBE_DETECTED", "ISOLATE", ("Detected %d volatile double-bit ECC error(s) in GPU %u.",)),
    5: ("VOLATILE_SBE_DETECTED", "MONITOR", (
        "More than %u single-bit ECC error(s) detected in GPU %u Volatile SBEs: %lld",
    )),
    6: ("PENDING_PAGE_RETIREMENTS", "RESET", ("A pending retired page has been detected in GPU %u.",)),
    7: ("RETIRED_PAGES_LIMIT", "ISOLATE", ("%u or more retired pages have been detected in GPU %u. ",)),
    8: ("RETIRED_PAGES_DBE_LIMIT", "ISOLATE", (
        "An excess of %u retired pages due to DBEs have been detected and more than one page has been "
        "retired due to DBEs in the past week in GPU %u.",
    )),
    9: ("CORRUPT_INFOROM", "TRIAGE", ("A corrupt InfoROM has been detected in GPU %u.",)),
    10: ("CLOCKS_EVENT_THERMAL", "MONITOR", (
        "Detected clocks event due to thermal violation in GPU %u.",
        "Detected clock throttling due to thermal violation in GPU %u.",
    )),
    11: ("POWER_UNREADABLE", "MONITOR", ("Cannot reliably read the power usage for GPU %u.",)),
    12: ("CLOCKS_EVENT_POWER", "MONITOR", (
        "Detected clocks event due to power violation in GPU %u.",
        "Detected clock throttling due to power violation in GPU %u.",
    )),
    13: ("NVLINK_ERROR_THRESHOLD", "ISOLATE", (
        "Detected %ld %s NvLink errors on GPU %u's NVLink which exceeds threshold of %u",
    )),
    14: ("NVLINK_DOWN", "TRIAGE", ("GPU %u's NvLink link %d is currently down",)),
    15: ("NVSWITCH_FATAL_ERROR", "ISOLATE", ("Detected fatal errors on NvSwitch %u link %u",)),
    16: ("NVSWITCH_NON_FATAL_ERROR", "MONITOR", ("Detected nonfatal errors on NvSwitch %u link %u",)),
    17: ("NVSWITCH_DOWN", "MONITOR", ("NvSwitch physical ID %u's NvLink port %d is currently down.",)),
    18: ("NO_ACCESS_TO_FILE", "CONFIG", ("File %s could not be accessed directly: %s",)),
    19: ("NVML_API", "MONITOR", ("Error calling NVML API %s: %s",)),
    20: ("DEVICE_COUNT_MISMATCH", "CONFIG", (
        "The number of devices NVML returns is different than the number of devices in /dev.",
    )),
    21: ("BAD_PARAMETER", "UNKNOWN", ("Bad parameter to function %s cannot be processed",)),
    22: ("CANNOT_OPEN_LIB", "TRIAGE", ("Cannot open library %s: '%s'",)),
    23: ("DENYLISTED_DRIVER", "CONFIG", ("Found driver on the denylist: %s", "Found blacklisted driver: %s")),
    24: ("NVML_LIB_BAD", "ISOLATE", ("Cannot get pointer to %s from libnvidia-ml.so",)),
    25: ("GRAPHICS_PROCESSES", "RESET", (
        "NVVS has detected processes with graphics contexts open running on at least one GPU. This may cause "
        "some tests to fail.",
    )),
    26: ("HOSTENGINE_CONN", "MONITOR", ("Could not connect to the host engine: '%s'",)),
    27: ("FIELD_QUERY", "MONITOR", ("Could not query field %s for GPU %u",)),
    28: ("BAD_CUDA_ENV", "CONFIG", ("Found CUDA performance-limiting environment variable '%s'.",)),
    29: ("PERSISTENCE_MODE", "CONFIG", (
        "Persistence mode for GPU %u is disabled.",
        "Persistence mode for GPU %u is currently disabled. The DCGM diagnostic requires peristence mode to "
        "be enabled.",
    )),
    30: ("LOW_BANDWIDTH", "TRIAGE", (
        "Bandwidth of GPU %u in direction %s of %.2f did not exceed minimum required bandwidth of %.2f.",
    )),
    31: ("HIGH_LATENCY", "TRIAGE", ("Latency type %s of GPU %u value %.2f exceeded maximum allowed latency of %.2f.",)),
    32: ("CANNOT_GET_FIELD_TAG", "MONITOR", ("Unable to get field information for field id %hu",)),
    33: ("FIELD_VIOLATION", "ISOLATE", ("Detected %ld %s for GPU %u",)),
    34: ("FIELD_THRESHOLD", "MONITOR", ("Detected %ld %s for GPU %u which is above the threshold %ld",)),
    35: ("FIELD_VIOLATION_DBL", "ISOLATE", ("Detected %.1f %s for GPU %u",)),
    36: ("FIELD_THRESHOLD_DBL", "ISOLATE", (
        "Detected %.1f %s for %s:%u which is above the threshold %.1f",
        "Detected %.1f %s for GPU %u which is above the threshold %.1f",
    )),
    37: ("UNSUPPORTED_FIELD_TYPE", "TRIAGE", (
        "Field %s is not supported by this API because it is neither an int64 nor a double type.",
    )),
    38: ("FIELD_THRESHOLD_TS", "ISOLATE", (
        "%s met or exceeded the threshold of %lu per second: %lu at %.1f seconds into the test.",
    )),
    39: ("FIELD_THRESHOLD_TS_DBL", "ISOLATE", (
        "%s met or exceeded the threshold of %.1f per second: %.1f at %.1f seconds into the test.",
    )),
    40: ("THERMAL_VIOLATIONS", "MONITOR", (
        "There were thermal violations totaling %.1f seconds for GPU %u",
        "There were thermal violations totaling %lu seconds for GPU %u",
    )),
    41: ("THERMAL_VIOLATIONS_TS", "MONITOR", (
        "Thermal violations totaling %.1f seconds started at %.1f seconds into the test for GPU %u",
        "Thermal violations totaling %lu samples started at %.1f seconds into the test for GPU %u",
    )),
    42: ("TEMP_VIOLATION", "MONITOR", (
        "Temperature %lld of %s %u exceeded user-specified maximum allowed temperature %lld",
        "Temperature %lld of GPU %u exceeded user-specified maximum allowed temperature %lld",
    )),
    43: ("CLOCKS_EVENT_VIOLATION", "MONITOR", (
        "Clocks event for GPU %u because of clocks event starting %.1f seconds into the test. %s",
        "Clocks are being throttled for GPU %u because of clock throttling starting %.1f seconds into the test. %s",
    )),
    44: ("INTERNAL", "TRIAGE", ("There was an internal error during the test: '%s'",)),
    45: ("PCIE_GENERATION", "TRIAGE", (
        "GPU %u is running at PCI link generation %d, which is below the minimum allowed link generation of "
        "%d (parameter '%s')",
    )),
    46: ("PCIE_WIDTH", "CONFIG", (
        "GPU %u is running at PCI link width %dX, which is below the minimum allowed link generation of %d "
        "(parameter '%s')",
    )),
    47: ("ABORTED", "CONFIG", ("Test was aborted early due to user signal",)),
    48: ("TEST_DISABLED", "CONFIG", ("The %s test is skipped.", "The %s test is skipped for this GPU.")),
    49: ("CANNOT_GET_STAT", "TRIAGE", ("Unable to generate / collect stat %s for GPU %u",)),
    50: ("STRESS_LEVEL", "TRIAGE", ("Max stress level of %.1f did not reach desired stress level of %.1f for GPU %u",)),
    51: ("CUDA_API", "MONITOR", ("Error using CUDA API %s",)),
    52: ("FAULTY_MEMORY", "ISOLATE", (
        "Found %lld faulty memory elements on GPU %u",
        "Found %d faulty memory elements on GPU %u",
    )),
    53: ("CANNOT_SET_WATCHES", "MONITOR", ("Unable to add field watches to DCGM: %s",)),
    54: ("CUDA_UNBOUND", "TRIAGE", ("Cuda GPU %d is no longer bound to a CUDA context...Aborting",)),
    55: ("ECC_DISABLED", "CONFIG", ("Skipping test %s because ECC is not enabled on GPU %u",)),
    56: ("MEMORY_ALLOC", "TRIAGE", ("Couldn't allocate at least %.1f%% of GPU memory on GPU %u",)),
    57: ("CUDA_DBE", "ISOLATE", ("CUDA APIs have indicated that a double-bit ECC error has occured on GPU %u.",)),
    58: ("MEMORY_MISMATCH", "ISOLATE", (
        "A memory mismatch was detected on GPU %u, but no error was reported by CUDA or NVML.",
    )),
    59: ("CUDA_DEVICE", "TRIAGE", ("Unable to find a corresponding CUDA device for GPU %u: '%s'",)),
    60: ("ECC_UNSUPPORTED", "CONFIG", ("ECC Memory is not turned on or is unsupported. Skipping test.",)),
    61: ("ECC_PENDING", "MONITOR", ("ECC memory for GPU %u is in a pending state.",)),
    62: ("MEMORY_BANDWIDTH", "TRIAGE", (
        "GPU %u only achieved a memory bandwidth of %.2f GB/s, failing to meet %.2f GB/s for test %d",
    )),
    63: ("TARGET_POWER", "TRIAGE", ("Max power of %.1f did not reach desired power minimum %s of %.1f for GPU %u",)),
    64: ("API_FAIL", "TRIAGE", ("API call %s failed: '%s'",)),
    65: ("API_FAIL_GPU", "TRIAGE", ("API call %s failed for GPU %u: '%s'",)),
    66: ("CUDA_CONTEXT", "TRIAGE", ("GPU %u failed to create a CUDA context: %s",)),
    67: ("DCGM_API", "TRIAGE", ("Error using DCGM API %s",)),
    68: ("CONCURRENT_GPUS", "CONFIG", (
        "Unable to run concurrent pair bandwidth test without 2 or more gpus. Skipping",
    )),
    69: ("TOO_MANY_ERRORS", "MONITOR", (
        "This API can only return up to four errors per system. Additional errors were found for this system "
        "that couldn't be communicated.",
    )),
    70: ("NVLINK_CRC_ERROR_THRESHOLD", "ISOLATE", (
        "%.1f %s NvLink errors found occuring per second on GPU %u, exceeding the limit of 100 per second.",
    )),
    71: ("NVLINK_ERROR_CRITICAL", "ISOLATE", ("Detected %ld %s NvLink errors on GPU %u's NVLink (should be 0)",)),
    72: ("ENFORCED_POWER_LIMIT", "CONFIG", (
        "Enforced power limit on GPU %u set to %.1f, which is too low to attempt to achieve target power %.1f",
    )),
    73: ("MEMORY_ALLOC_HOST", "TRIAGE", ("Cannot allocate %zu bytes on the host",)),
    74: ("GPU_OP_MODE", "MONITOR", ("Skipping plugin due to a GPU being in GPU Operating Mode: LOW_DP.",)),
    75: ("NO_MEMORY_CLOCKS", "MONITOR", ("No memory clocks <= %u MHZ were found in %u supported memory clocks.",)),
    76: ("NO_GRAPHICS_CLOCKS", "MONITOR", (
        "No graphics clocks <= %u MHZ were found in %u supported graphics clocks for memory clock %u MHZ.",
    )),
    77: ("HAD_TO_RESTORE_STATE", "TRIAGE", ("Had to restore GPU state on NVML GPU(s): %s",)),
    78: ("L1TAG_UNSUPPORTED", "CONFIG", ("This card does not support the L1 cache test. Skipping test.",)),
    79: ("L1TAG_MISCOMPARE", "ISOLATE", ("Detected a miscompare failure in the L1 cache.",)),
    80: ("ROW_REMAP_FAILURE", "RESET", (
        "GPU %u had uncorrectable memory errors and row remapping failed.",
        "Row remapping failed.",
    )),
    81: ("UNCONTAINED_ERROR", "ISOLATE", ("GPU had an uncontained error (XID 95)",)),
    82: ("EMPTY_GPU_LIST", "CONFIG", ("No valid GPUs passed to plugin",)),
    83: ("DBE_PENDING_PAGE_RETIREMENTS", "RESET", (
        "Pending page retirements together with a DBE were detected on GPU %u.",
    )),
    84: ("UNCORRECTABLE_ROW_REMAP", "RESET", ("GPU %u had uncorrectable memory errors and %u rows were remapped",)),
    85: ("PENDING_ROW_REMAP", "RESET", (
        "GPU %u had memory errors and row remappings are pending",
        "GPU %u has uncorrectable memory errors and row remappings are pending",
    )),
    86: ("BROKEN_P2P_MEMORY_DEVICE", "ISOLATE", (
        "GPU %u was unsuccessfully written to by GPU %u in a peer-to-peer test: %s",
        "GPU %u was unsuccessfully written to in a peer-to-peer test: %s",
    )),
    87: ("BROKEN_P2P_WRITER_DEVICE", "ISOLATE", (
        "GPU %u unsuccessfully wrote data to GPU %u in a peer-to-peer test: %s",
        "GPU %u unsuccessfully wrote data in a peer-to-peer test: %s",
    )),
    88: ("NVSWITCH_NVLINK_DOWN", "ISOLATE", ("NVSwitch %u's NvLink %u is down.",)),
    89: ("EUD_BINARY_PERMISSIONS", "TRIAGE", ()),
    90: ("EUD_NON_ROOT_USER", "TRIAGE", ()),
    91: ("EUD_SPAWN_FAILURE", "TRIAGE", ()),
    92: ("EUD_TIMEOUT", "TRIAGE", ()),
    93: ("EUD_ZOMBIE", "TRIAGE", ()),
    94: ("EUD_NON_ZERO_EXIT_CODE", "TRIAGE", ()),
    95: ("EUD_TEST_FAILED", "ISOLATE", ()),
    96: ("FILE_CREATE_PERMISSIONS", "CONFIG", (
        "The DCGM Diagnostic does not have permissions to create a file in directory '%s'",
    )),
    97: ("PAUSE_RESUME_FAILED", "TRIAGE", ()),
    98: ("PCIE_H_REPLAY_VIOLATION", "ISOLATE", (
        "GPU %u host-side PCIe replay violation, see dmesg for more information",
        "GPU %u had PCIe replays, see dmesg for more information",
    )),
    99: ("GPU_EXPECTED_NVLINKS_UP", "TRIAGE", ("Only %u NvLinks are up out of the expected %u",)),
    100: ("NVSWITCH_EXPECTED_NVLINKS_UP", "TRIAGE", ("NvSwitch %u - Only %u NvLinks are up out of the expected %u",)),
    101: ("XID_ERROR", "TRIAGE", ("Detected XID %u for GPU %u",)),
    102: ("SBE_VIOLATION", "ISOLATE", ("Detected %ld %s for GPU %u",)),
    103: ("DBE_VIOLATION", "ISOLATE", ("Detected %ld %s for GPU %u",)),
    104: ("PCIE_REPLAY_VIOLATION", "ISOLATE", ("Detected %ld %s for GPU %u",)),
    105: ("SBE_THRESHOLD_VIOLATION", "ISOLATE", ("Detected %ld %s for GPU %u which is above the threshold %ld",)),
    106: ("DBE_THRESHOLD_VIOLATION", "ISOLATE", ("Detected %ld %s for GPU %u which is above the threshold %ld",)),
    107: ("PCIE_REPLAY_THRESHOLD_VIOLATION", "ISOLATE", (
        "Detected %ld %s for GPU %u which is above the threshold %ld",
    )),
    108: ("CUDA_FM_NOT_INITIALIZED", "MONITOR", ()),
    109: ("SXID_ERROR", "ISOLATE", ("Detected fatal NvSwitch SXID %u",)),
    110: ("GFLOPS_THRESHOLD_VIOLATION", "TRIAGE", ("Detected %.2f %s for GPU %u which is below the threshold %.2f",)),
    111: ("NAN_VALUE", "ISOLATE", (
        "Found %lld NaN-value memory elements on GPU %u",
        "Found %d NaN-value memory elements on GPU %u",
    )),
    112: ("FABRIC_MANAGER_TRAINING_ERROR", "CONFIG", (
        "Fabric Manager (Cluster UUID: %s, Clique ID: %ld, Health Mask: %#lx): %s.",
        "Fabric Manager (Cluster UUID: %s, Clique ID: %ld): %s.",
    )),
    113: ("BROKEN_P2P_PCIE_MEMORY_DEVICE", "ISOLATE", (
        "GPU %u was unsuccessfully written to by GPU %u over PCIe in a peer-to-peer test: %s",
    )),
    114: ("BROKEN_P2P_PCIE_WRITER_DEVICE", "ISOLATE", (
        "GPU %u unsuccessfully wrote data to GPU %u over PCIe in a peer-to-peer test: %s",
    )),
    115: ("BROKEN_P2P_NVLINK_MEMORY_DEVICE", "ISOLATE", (
        "GPU %u was unsuccessfully written to by GPU %u over NVLink in a peer-to-peer test: %s",
    )),
    116: ("BROKEN_P2P_NVLINK_WRITER_DEVICE", "ISOLATE", (
        "GPU %u unsuccessfully wrote data to GPU %u over NVLink in a peer-to-peer test: %s",
    )),
    117: ("TEST_SKIPPED", "CONFIG", ("Test %s was skipped.",)),
    118: ("SRAM_THRESHOLD", "ISOLATE", ("SRAM Threshold Count exceeded on GPU %d: %ld",)),
    119: ("NVLINK_EFFECTIVE_BER_THRESHOLD", "ISOLATE", (
        "Detected effective BER %.2e exceeds minimum threshold on GPU %u's NVLink.",
    )),
    120: ("FALLEN_OFF_BUS", "ISOLATE", ("GPU %d has fallen off the bus",)),
    121: ("NVLINK_SYMBOL_BER_THRESHOLD", "ISOLATE", (
        "Detected symbol BER %.2e exceeds minimum threshold on GPU %u's NVLink.",
    )),
    122: ("IMEX_UNHEALTHY", "ISOLATE", ("IMEX %s status is %s (%s)",)),
    123: ("FABRIC_PROBE_STATE", "MONITOR", ("GPU %u: Fabric State is %s (%lld).",)),
    124: ("BINARY_PERMISSIONS", "TRIAGE", ()),
    125: ("GPU_RECOVERY_RESET", "RESET", (
        "GPU %u requires a reset to recover from a fault. Recovery action: %ld (GPU_RESET).",
    )),
    126: ("GPU_RECOVERY_REBOOT", "ISOLATE", (
        "GPU %u fault may have left the OS in an inconsistent state. Recovery action: %ld (NODE_REBOOT).",
    )),
    127: ("GPU_RECOVERY_DRAIN_P2P", "RESET", (
        "GPU %u requires peer-to-peer traffic to be quiesced. Recovery action: %ld (DRAIN_P2P).",
    )),
    128: ("GPU_RECOVERY_DRAIN_RESET", "RESET", (
        "GPU %u operating at reduced capacity due to a fault. Recovery action: %ld (DRAIN_AND_RESET).",
    )),
    129: ("NCCL_ERROR", "RESET", ("Detected NCCL error: %s Recovery action: %ld (DRAIN_AND_RESET).",)),
    130: ("RETEST_REQUESTED", "TRIAGE", ()),
    131: ("CONTAINED_ERROR", "MONITOR", ("GPU had a contained error.",)),
    132: ("UNCORRECTABLE_ROW_REMAP_LIMIT", "TRIAGE", (
        "GPU %u exceeded uncorrectable row remap limit with %u remapped rows",
    )),
}


def code_action(code: int) -> Action | None:
    """The action DCGM's code calls for; None for a code this table does not know or that says nothing."""
    if code in OVERRIDES:
        return OVERRIDES[code]
    entry = DCGM_ERRORS.get(code)
    return SEVERITY_ACTIONS.get(entry[1]) if entry else None


_CONVERSION = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t)?([diouxXeEfgGsc%])")
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf)"
_PIECES = {"s": r".*?", "c": r".", "%": "%", "x": r"(?:0x)?[0-9a-fA-F]+", "X": r"(?:0x)?[0-9a-fA-F]+"}


def _pattern(fmt: str) -> re.Pattern[str]:
    """A printf format as a regular expression: conversions as what they print, any run of spaces
    as any spacing (a table re-wraps DCGM's text at its cell width)."""
    out, at = [], 0
    for m in _CONVERSION.finditer(fmt):
        out.append(r"\s*".join(re.escape(w) for w in re.split(r"\s+", fmt[at:m.start()])))
        out.append(_PIECES.get(m.group(1), r"-?\d+" if m.group(1) in "diou" else _NUMBER))
        at = m.end()
    out.append(r"\s*".join(re.escape(w) for w in re.split(r"\s+", fmt[at:])))
    return re.compile("".join(out), re.IGNORECASE)


@functools.cache
def _patterns() -> tuple[tuple[int, re.Pattern[str]], ...]:
    """Every code's formats, compiled once (only a saved table without codes needs them)."""
    return tuple((code, _pattern(fmt)) for code, (_, _, formats) in DCGM_ERRORS.items() for fmt in formats
                 if fmt.strip() and code > 2)


def dcgm_codes(messages: Iterable[str]) -> list[int]:
    """The codes whose message formats match ``messages`` (a table's warnings), in code order."""
    found = {code for text in messages for code, pattern in _patterns() if pattern.search(text)}
    return sorted(found)


def severity_action(level: int) -> Action | None:
    """The action a printed ``error_severity`` level calls for; None for UNKNOWN or a level not in the enum."""
    word = SEVERITY_LEVELS.get(level)
    return SEVERITY_ACTIONS.get(word) if word else None


def _routed(code: int, levels: Mapping[str, int]) -> Action | None:
    """A known code by this table; an unknown one by the severity level printed beside it, if any."""
    if code in DCGM_ERRORS:
        return code_action(code)
    level = levels.get(str(code))
    return severity_action(level) if level is not None else None


def dcgm_action(status: str, error_ids: Iterable[int], messages: Iterable[str],
                severities: Mapping[str, int] | None = None) -> Action:
    """The operator action for one test's outcome (``fail``/``warn``), from DCGM's own codes.

    The codes are the JSON's ``error_id``\\ s, or for a table the codes whose message format its
    warnings match. The action is the strongest any of them calls for (a message two codes
    share, "Detected %ld %s for GPU %u", gets the stronger). A code this table does not know (a
    newer DCGM's) is routed by the ``error_severity`` level DCGM printed beside it
    (``severities``: code -> level), so a 4.x ``-j`` run is routed even past this table; a known
    code keeps this table's action (the newest release's word). A test whose codes say nothing
    gets :data:`FALLBACK` by its result.
    """
    codes = list(error_ids) or dcgm_codes(messages)
    actions = [a for a in (_routed(c, severities or {}) for c in codes) if a is not None]
    if not actions:
        return FALLBACK.get(status, Action.NONE)
    return strongest(actions)
