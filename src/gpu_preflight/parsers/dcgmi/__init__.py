"""``dcgmi diag``: one record for the JSON (``-j``) and the text table of every version.

Prefer ``-j``; the table is read too because that is what people save and paste. Both
readers fill :class:`DcgmDiagRecord`: per test its category, a status
(``pass|fail|warn|skip``), the ids of the GPUs that failed or warned, and DCGM's own
messages verbatim (the warning text is the diagnosis). A run that could not happen at all
(``Error: ... Return: (-30)``, plugins missing) is a record too, with ``overall="error"``
and the tool's error lines: it must read as "could not measure", never as a pass.
"""

from __future__ import annotations

import re

from ...records.dcgm import DcgmDiagRecord as DcgmDiagRecord
from ...records.dcgm import DcgmTest as DcgmTest
from ..detect import parser
from ..text import is_noise
from .common import (
    HOSTENGINE_DOWN,
    HOSTENGINE_STARTED,
    ITERATIONS_ABORTED,
    KIND,
    MIG_REFUSAL,
    NVVS_LOG_ERROR,
    STATUSES,
    exporter_fatal,
    gpu_ids_in,
    normalize_status,
    overall_of,
    worst_status,
)

__all__ = [
    "KIND", "STATUSES", "DcgmDiagRecord", "DcgmTest", "gpu_ids_in", "normalize_status", "overall_of", "worst_status",
]


# A result row of the table, the strongest evidence a header-less paste keeps: a test label (or the empty
# label cell of a test's second result line), then DCGM's own result phrasing (``Pass - All``,
# ``Fail - GPU: 0``, ``Skip - All``, ``Pass - GPUs: 1, 2``).
_RESULT_ROW = re.compile(r"^\|\s*(?:[A-Za-z][\w /()-]*?)?\s*\|\s*(?:Pass|Fail|Skip|Warn)\s+-\s+"
                         r"(?:All|GPUs?:\s*\d[\d, ]*)\s*\|", re.MULTILINE)
# DCGM 1.x/2.x printed the bare result ("| NVML Library | Pass |"): a two-cell row is any Markdown table's,
# so a header-less paste of those rows counts only when two of them name DCGM's own tests and plugins.
_LEGACY_ROW = re.compile(r"^\|\s*(?:NVML Library|CUDA Main Library|CUDA Toolkit Libraries|Permissions and OS Blocks"
                         r"|Persistence Mode|Environment Variables|Page Retirement(?:/Row Remap)?|Graphics Processes"
                         r"|Inforom|Blacklist|Denylist|SM Stress|Targeted Stress|Targeted Power|Memory Bandwidth"
                         r"|GPU Memory|Memtest|Pulse Test|Context Create)\s*\|\s*(?:Pass|Fail|Skip|Warn)\s*\|",
                         re.MULTILINE)

# A warning (or error) row with the next row continuing it, in dcgmi's own fixed layout: the label cell is 27
# characters wide in every version (``+---------------------------+``) and DCGM hard-wraps the message into
# rows whose label cell is those 27 blanks. A paste cut down to a test's wrapped warning keeps only this.
_WRAPPED_MESSAGE = re.compile(r"^\|(?: Warning {19}| Error {21})\|[^\n]*\|[ \t]*\n\| {27}\|",
                              re.MULTILINE)

# A test object quoted out of a ``-j`` document (3.x ``gpu_id(s)`` or 4.x ``entity_group``), without
# the ``"DCGM ... Diagnostic"`` root: the strongest evidence an excerpt of the JSON keeps.
_JSON_TEST = re.compile(r'"name"\s*:\s*"[^"\n]+"\s*,\s*"results"\s*:\s*\[\s*\{\s*"(?:entity_group|gpu_ids?)"\s*:')


# dcgmi's own "Error: ..." answers when a run cannot start (dcgmi/Diag.cpp's failure messages and
# NVVS's unknown-test answer, DCGM 2.x-4.x): nothing was measured, the record is an error. Any dcgmi
# command (diag, discovery, group, test) answers the same two lines when no nv-hostengine listens
# (dcgmi/CommandLineParser's connection failure), and a diagnostic without its NVVS binary says so
# (DCGM_ST_NVVS_BINARY_NOT_FOUND's text); a paste may quote each line ('"Error: ..."', '> Error: ...': the
# paste reader takes an "Error: " on every line for a host tag, so the quoted text is read as given).
_REFUSED = re.compile(r"^[>\s]*\"?Error: (?:requested test \"[^\"\n]*\" was not found among possible test choices"
                      r"|Diagnostic can only be performed on a homogeneous group|Diagnostic could not be run "
                      r"(?:because|while)|Unsupported entities are indicated"
                      r"|[Uu]nable to establish a connection to the specified host|Unable to connect to host engine)"
                      r"|^[>\s]*\"?(?i:error) when executing the diagnostic: (?i:the nvvs binary was not found)",
                      re.MULTILINE)
# The families of dcgmi's other "Error: ..." answers (dcgmi/Command.cpp, Diag.cpp, Group.cpp, Health.cpp,
# ProcessStats.cpp, Nvlink.cpp...): "<what could not be done>. Return: <DCGM's error string>", and the answers
# that name DCGM, its host engine or the diagnostic ("Error: unable to initialize DCGM", "Error: Unable to start
# an embedded host engine", "Error: dcgmGetAllSupportedDevices() returned 0 devices"). Less sure than the
# answers above: "Error: ... Return:" is dcgmi's wording, not its name.
_DCGMI_ERROR = re.compile(r"^[>\s]*\"?Error: [^\n]*?(?:\. Return: \S|\bDCGM\b|\b[Hh]ost engine\b|\b[Dd]iagnostic\b"
                          r"|\bdcgm\w+\(\))", re.MULTILINE)


def sniff(text: str) -> int:
    if re.search(r'"DCGM (?:GPU )?Diagnostic"\s*:', text):
        return 100
    if _JSON_TEST.search(text) and re.search(r'"status"\s*:\s*"(?:Pass|Fail|Warn|Skip|PASS|FAIL|WARN|SKIP)', text):
        return 85
    if re.search(r"^\|\s*Diagnostic\s*\|\s*Result\s*\|", text, re.MULTILINE):
        return 95
    if re.search(r"^[|+][-=+ ]*(?:Deployment|Integration|Hardware|Stress|Metadata)[-=+ ]*[|+]", text, re.MULTILINE):
        return 70
    if exporter_fatal(text):
        return 96  # dcgm-exporter's start and fatal exit: its result, above a table another tool printed with it
    if re.search(r"DCGM GPU Diagnostic returned an error|Unable to (?:complete|run) diagnostic", text) or \
            _REFUSED.search(text) or MIG_REFUSAL.search(text) or HOSTENGINE_DOWN.search(text) or \
            ITERATIONS_ABORTED.search(text):
        return 90
    if _RESULT_ROW.search(text) or len(_LEGACY_ROW.findall(text)) >= 2 or _DCGMI_ERROR.search(text) or \
            _WRAPPED_MESSAGE.search(text):
        return 60  # rows pasted without the header (a test's result, or its wrapped warning); dcgmi's error answers
    if any(NVVS_LOG_ERROR.match(line) for line in text.splitlines()):
        return 58  # the diagnostic's debug log: its ERROR lines, no result
    if any(HOSTENGINE_STARTED.match(line) for line in text.splitlines()):
        return 55  # the host engine's start log: read, and judged as holding no result
    return 0


@parser(KIND, sniff=sniff, title="dcgmi diag (-j JSON of DCGM 3.x and 4.x, or the text table)")
def parse(text: str) -> DcgmDiagRecord:
    """Parse ``dcgmi diag`` output: JSON when it holds a JSON document, else the table."""
    body = [line for line in text.splitlines() if line.strip() and not is_noise(line)]
    root = re.search(r'"DCGM (?:GPU )?Diagnostic"', text)
    # a client's JSON log line that quotes DCGM's refusal is a log, not a -j document: the table reader keeps its line
    logged_refusal = (HOSTENGINE_DOWN.search(text) or exporter_fatal(text)) and not root and not _JSON_TEST.search(text)
    if not logged_refusal and (any(line.lstrip().startswith("{") for line in body[:50]) or root):
        from .json_report import parse_json

        return parse_json(text)
    from .table import parse_table

    return parse_table(text)
