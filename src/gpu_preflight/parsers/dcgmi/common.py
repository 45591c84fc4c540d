"""What both ``dcgmi diag`` readers share: status words, severity order, GPU ids in a message.

Kept apart from the package's ``__init__`` so the readers (``json_report``, ``table``) import
it without importing the module that dispatches to them.
"""

from __future__ import annotations

import re

from ...records.dcgm import DcgmDiagRecord

KIND = "dcgmi-diag"
STATUSES = ("pass", "skip", "warn", "fail")  # ascending severity
_ALIASES = {"pass": "pass", "passed": "pass", "fail": "fail", "failed": "fail", "error": "fail",
            "warn": "warn", "warning": "warn", "skip": "skip", "skipped": "skip", "not run": "skip",
            "notrun": "skip", "n/a": "skip"}
_GPU_IN_TEXT = re.compile(r"\bGPU\s*(\d+)\b")
# The diagnostic's refusal to run on a GPU split into MIG instances (NVVS, DCGM 2.x-4.x: "GPU 2's MIG
# configuration is incompatible with the diagnostic because it prevents access to the entire GPU."),
# printed by `dcgmi diag` and by nvvs run by hand: nothing was tested, and DCGM says the GPU is in MIG mode.
MIG_REFUSAL = re.compile(r"\bGPU (?P<id>\d+)'s MIG configuration is incompatible with the diagnostic\b[^\n]*")
# nv-hostengine's own answers when DCGM cannot run (hostengine/src/main.cpp: "Err: Failed to start DCGM Server: <ret>",
# "Unable to terminate host engine, it may not be running."; DCGM 1.x-2.x, as exporters' start scripts log them:
# "Failed to start host engine server", "Error: Failed to initialize NVML"), and DCGM's error strings as its clients
# quote them (dcgmlib/src/dcgm_errors.c's "This GPU is not supported by DCGM" and "Host engine connection
# invalid/disconnected", DCGM_ST_CONNECTION_NOT_VALID, which every client that found no nv-hostengine logs: ldmsd's
# dcgm_sampler, go-dcgm agents; dcgm-exporter's "Error starting nv-hostengine: <DCGM's error>"): DCGM measured
# nothing, wherever the line sits in a client's log. dcgmi diag's own listener for the diagnostic's telemetry failing
# to start (dcgmi/Diag.cpp StartListenerServer, 2.x-4.x: "Err: Can't listen for incoming queries, so DCGM Diag can't
# get telemetry: <ret>.") stops the run the same way.
HOSTENGINE_DOWN = re.compile(r"(?:Err: )?Failed to start DCGM Server: -?\d+|Failed to start host engine server"
                             r"|(?:Err: )?Can't listen for incoming queries, so DCGM Diag can't get telemetry: -?\d+"
                             r"|Unable to terminate host engine, it may not be running"
                             r"|^\s*Error: Failed to initialize NVML\s*$"
                             r"|Error starting nv-hostengine: [^\"\n]+|This GPU is not supported by DCGM"
                             r"|Host engine connection invalid/disconnected", re.MULTILINE)
# dcgm-exporter's own fatal exit (its logrus logger, 2.x-3.x: 'level=fatal msg="..."' when not on a terminal,
# "FATA[0000] ..." on one): the exporter stopped before exporting anything, whatever DCGM call it names ("Error
# retrieving DCGM MIG hierarchy: API version mismatch", "Error getting device busid: API version mismatch").
# Read only where the text shows the exporter's own start line ("Starting dcgm-exporter"): a fatal line alone is
# any logrus program's.
EXPORTER_STARTED = re.compile(r"\bStarting dcgm-exporter\b")
# From 4.x (log/slog, text or JSON handler) a fatal exit is an ERROR line and os.Exit(1); only the messages the exporter
# always exits after count (NVIDIA/dcgm-exporter, 4.1.1-4.0.4 to 4.5.3-4.8.2: internal/pkg/dcgmprovider/dcgm.go's
# "Failed to connect to remote hostengine" and "Failed to initialize DCGM Fields module; err: <n>",
# internal/pkg/collector/collector_factory.go's "collector '<name>' cannot be initialized; err: ..." and "DCGM collector
# for entity type '<type>' cannot be initialized; err: ..." (fatal unless startup validation is off: its metrics are
# missing either way), pkg/cmd/app.go's "Encountered a failure." after a panic); other ERROR lines are not fatal.
_SLOG_FATAL = (r"(?:Failed to connect to remote hostengine|Failed to initialize DCGM Fields module; err: -?\d+"
               r"|(?:DCGM )?collector (?:for entity type )?'[^'\n]+' cannot be initialized; err: [^\"\n]*"
               r"|Encountered a failure\.)")
EXPORTER_FATAL = re.compile(r'\blevel=fatal msg="(?P<msg>[^"\n]+)"|^\s*FATA\[\d+\]\s+(?P<tty>\S.*?)\s*$'
                            rf'|\blevel=ERROR msg="?(?P<slog>{_SLOG_FATAL})'
                            rf'|"level"\s*:\s*"ERROR"\s*,\s*"msg"\s*:\s*"(?P<json>{_SLOG_FATAL})', re.MULTILINE)
# nv-hostengine's start line (hostengine/src/main.cpp: "Started host engine version <v> using port number: <p>"): the
# engine started, nothing was measured yet; a text holding nothing else holds no result (the container runtime's
# "nvidia driver modules are not yet loaded" before it says why none will come).
HOSTENGINE_STARTED = re.compile(r"^\s*Started host engine version \S+ using "
                                r"(?:port number|socket path|vsock CID:PORT):")
# A line of the diagnostic's own debug log (nvvs, ``--debugLogFile``/nvvs.log, DCGM 2.x-4.x: "<date> <time> ERROR
# [pid:tid] <message> [<source under nvvs/>:<line>] [<function>]"): its ERROR lines are why a run produced no result
# (a config it could not read, a test it could not start). Only nvvs' own sources count: that is the diagnostic's log.
NVVS_LOG_ERROR = re.compile(r"^\s*\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? ERROR\s+\[\d+:\d+\]\s+(?P<msg>.*?)\s+"
                            r"\[/\S*/nvvs/\S+:\d+\]\s+\[[^\]]*\]\s*$")
# `dcgmi diag --iterations N`'s closing line when a run could not complete (dcgmi/Diag.cpp, DCGM 2.4-4.x: "Aborting the
# iterative runs of the diagnostic due to failure: <DCGM's error string>"): the loop stopped, the runs after it never
# happened. Beside tables that passed it is still an error, never a pass.
ITERATIONS_ABORTED = re.compile(r"^[>\s]*Aborting the iterative runs of the diagnostic due to failure: [^\n]*?(?=\s*$)",
                                re.MULTILINE)
_DRIVER_NOT_LOADED = re.compile(r"driver modules? (?:are|is) not (?:yet )?loaded")


def hostengine_start_errors(lines: list[str]) -> list[str]:
    """A start log's lines as errors (:data:`HOSTENGINE_STARTED`): the start, and why nothing will be measured."""
    started = [line.strip() for line in lines if HOSTENGINE_STARTED.match(line)]
    if not started:
        return []
    why = [line.strip() for line in lines if _DRIVER_NOT_LOADED.search(line)]
    return [*why, f"{started[0]} (the host engine's start, and no result after it)"]


def fatal_message(match: re.Match[str]) -> str:
    """An :data:`EXPORTER_FATAL` match as the error it records."""
    message = match.group("msg") or match.group("tty") or match.group("slog") or match.group("json")
    return f"dcgm-exporter stopped: {message}"


def exporter_fatal(text: str) -> list[str]:
    """dcgm-exporter's fatal messages (:data:`EXPORTER_FATAL`), when the text is dcgm-exporter's log."""
    if not EXPORTER_STARTED.search(text):
        return []
    return [fatal_message(m) for m in EXPORTER_FATAL.finditer(text)]


def normalize_status(text: str) -> str | None:
    """DCGM's status words (``PASS``, ``Pass``, ``SKIPPED``, ``Not Run``) → ours; ``None`` if not one."""
    return _ALIASES.get(text.strip().lower())


def worst_status(statuses: list[str]) -> str:
    """The most severe of ``statuses`` (``pass`` when empty)."""
    return max(statuses, key=STATUSES.index, default="pass")


def gpu_ids_in(text: str) -> list[int]:
    """GPU ids a DCGM message names (``"GPU 1 Max power ..."`` → ``[1]``), in order, once each."""
    return list(dict.fromkeys(int(m.group(1)) for m in _GPU_IN_TEXT.finditer(text)))


def overall_of(record: DcgmDiagRecord) -> str:
    if record.errors and not record.tests:
        return "error"
    statuses = [t.status for t in record.tests]
    if statuses and all(s == "skip" for s in statuses):
        return "skip"
    return worst_status([s for s in statuses if s != "skip"])
