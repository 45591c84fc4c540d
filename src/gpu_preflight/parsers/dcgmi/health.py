"""``dcgmi health -c`` (``--check``), the tree table or ``-j`` JSON; and ``dcgmi discovery -l``/``-c``.

``dcgmi/Health.cpp`` (GenerateOutputFromResponse, DCGM 2.x-4.x) prints a ``Health Monitor Report`` box
whose first row is ``Overall Health`` (HelperHealthToString: ``Healthy``, ``Warning``, ``Failure`` or
``Internal error``), then per entity group and id (``GPU`` / ``-> 0``) an ``Errors`` node whose children
are the watched systems that raised incidents (``PCIe system``, ``NVLINK system``, ``Memory system``,
``InfoROM system``, ``Thermal system``, ``Power system``, ``Driver``...), each with its health and DCGM's
messages as overflow lines. ``-j`` prints the same tree as ``{"body": {...}, "header": ["Health Monitor
Report"]}`` (DcgmiOutputJson: ``value``, ``children``, ``overflow``). When it cannot check (the group's
watches were never set, or the check failed) it prints one ``Error: ...`` line instead: an error record.

``dcgmi/DeviceMonitor.cpp`` prints ``dcgmi discovery -l`` as ``<n> GPU(s) found.`` and a box per GPU
(``GPU ID``, ``Name:``, ``PCI Bus ID:``, ``Device UUID:``), then the NvSwitches; DCGM 4.x (``dcgmi/Query.cpp``)
says which GPUs it counted: ``<n> GPUs found (Active).`` or ``(All).``. It is read into the GPU listing that
``nvidia-smi -L`` fills, so the inventory checks judge both alike. A box cut out of a paste (fewer boxes than
the count line says) makes the listing ``elided``; a paste indented as a whole (a Markdown list's code block)
keeps its boxes, so a row is read after its leading blanks. ``dcgmi discovery -c`` (the MIG instance hierarchy) adds
each GPU's GPU instances to that listing: a GPU with instances is in MIG mode, as ``nvidia-smi -L`` shows it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...records.dcgm import DcgmHealthIncident, DcgmHealthRecord
from ...records.smi import ListedGpu, MigInstance, SmiListingRecord
from ..detect import parser
from ..errors import ParseError
from ..text import is_noise, prepare

HEALTH_KIND = "dcgmi-health"
DISCOVERY_KIND = "dcgmi-discovery"
HEALTH_WORDS = ("Healthy", "Warning", "Failure", "Internal error")

_OVERALL_ROW = re.compile(r"^\|\s*Overall Health\s*\|\s*(?P<health>Healthy|Warning|Failure|Internal error)\s*\|")
_REPORT_BOX = re.compile(r"^\|\s*Health Monitor Report\s*\|", re.MULTILINE)
_JSON_HEALTH = re.compile(r'"header"\s*:\s*\[\s*"Health Monitor Report"|"Overall Health"\s*:\s*\{')
# A watched system's row under an entity's Errors (Health::HelperSystemToString): "<name> system", "Driver", and
# "Internal error", the name it gives a system it has no word for: the NvSwitch fatal and non-fatal watches
# (DCGM 2.x-4.x; "Detected fatal errors on NvSwitch 0 link 12" under a Switch). Kept as DCGM prints it.
_SYSTEM_ROW = re.compile(r"^\|\s*(?:->\s*)?(?P<system>[A-Za-z][\w ]*? system|Driver|(?<=-> )Internal error)\s*\|\s*"
                         r"(?P<health>Healthy|Warning|Failure|Internal error)\s*\|")
_ENTITY_ROW = re.compile(r"^\|\s*->\s*(?P<id>\d+)\s*\|")
_GROUP_ROW = re.compile(r"^\|\s*(?P<group>GPU|Switch|NvSwitch|CPU|CPU Core|Link|ConnectX|GPU_I|GPU_CI)\s*\|\s*\|")
_MESSAGE_ROW = re.compile(r"^\|\s*\|\s*(?P<text>.*?)\s*\|\s*$")
_FOUND = re.compile(r"^(?P<count>\d+) GPUs? found(?: \((?:All|Active)\))?\.\s*$")
_DEVICE_ROW = re.compile(r"^\|\s*(?P<id>\d+)?\s*\|\s*(?P<field>Name|PCI Bus ID|Device UUID):\s*(?P<value>.*?)\s*\|\s*$")
# ``dcgmi discovery -c`` (dcgmi/Query.cpp's DisplayHierarchyInfo): an ``Instance Hierarchy`` box, per GPU a row
# ``GPU <n> | GPU <uuid> (EntityID: <n>)``, then each of its GPU instances (``-> I <gpu>/<gi>``) and their
# compute instances (``-> CI <gpu>/<gi>/<ci>``): a GPU with instances is in MIG mode.
_HIERARCHY_BOX = re.compile(r"^\|\s*Instance Hierarchy\s*\|", re.MULTILINE)
_HIERARCHY_GPU = re.compile(r"^\|\s*GPU (?P<id>\d+)\s*\|\s*GPU (?P<uuid>\S+) \(EntityID: \d+\)\s*\|")
_HIERARCHY_GI = re.compile(r"^\|\s*-> I (?P<gpu>\d+)/(?P<gi>\d+)\s*\|\s*GPU Instance\b")
_COMMAND = re.compile(r"^\s*(?:[>$#]\s*)?dcgmi\s+(?:health|discovery)\b")
# Health::CheckWatches' answers when it cannot check (dcgmi/Health.cpp): the group's watches were never set
# (``dcgmi health -s`` first), or the check itself failed ("Unable to check health watches. Return: ...").
_REFUSAL = re.compile(r"^\s*Error: (?:Health watches not enabled\. Please enable watches\.?"
                      r"|Unable to check health watches\. Return: .*)\s*$")
# DcgmHealthWatch::SetResponse (modules/health/DcgmHealthWatch.cpp) writes every incident a health check finds to
# the host engine's log as well: "[[Health]] Detected a WARNING in health system Thermal: '<DCGM's message>'"
# (GetHealthResultAsString: WARNING or FAILURE), the log line's own source position after it; a paste of that line
# is the same verdict as the report's row. The GPU is the one DCGM's message names.
_LOG_INCIDENT = re.compile(r"\[\[Health\]\] Detected a (?P<health>WARNING|FAILURE) "
                           r"in health system (?P<system>[\w ]+?): "
                           r"'?(?P<message>.*?)'?(?:\s+\[/[^\]\s]+:\d+\]\s+\[[^\]]*\])?\s*$")
_LOG_HEALTH = {"WARNING": "Warning", "FAILURE": "Failure"}
# The Health module's own ERROR lines in the host engine's log (modules/health/DcgmHealthWatch.cpp and the core proxy
# it calls, DCGM 3.x-4.x: "<date> <time> ERROR [pid:tid] [[Health]] Error 'API version mismatch' while attempting to get
# entities for group 0 [<source>:<line>] [<function>]"): the module could not serve the check, so no health exists.
_LOG_HEALTH_ERROR = re.compile(r"^\s*\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? ERROR\s+\[\d+:\d+\]\s+\[\[Health\]\]\s+"
                               r"(?P<message>.*?)(?:\s+\[[^\]\s]+:\d+\]\s+\[[^\]]*\])?\s*$")
# Health::SetWatches' confirmation (dcgmi/Health.cpp): what dcgmi prints when the call set the group's watches
# instead of checking them (``-s``, or a ``-c`` DCGM took as one, as on a group of CPUs): no health was reported.
_SET_ONLY = re.compile(r"^\s*Health monitor systems set successfully\.\s*$")
# Health::GetWatches' report (``dcgmi health -f``, dcgmi/Health.cpp, DCGM 2.x-4.x): "Health monitor systems report"
# over a box of the watched systems, each On or Off. Which watches are set, not what they found: no health reported.
_WATCHES_ONLY = re.compile(r"^\s*Health monitor systems report\s*$")


def sniff_health(text: str) -> int:
    if _REPORT_BOX.search(text) or _JSON_HEALTH.search(text) or any(_REFUSAL.match(x) for x in text.splitlines()):
        return 95
    if any(_SET_ONLY.match(x) or _WATCHES_ONLY.match(x) for x in text.splitlines()):
        return 80
    if any(_LOG_INCIDENT.search(x) for x in text.splitlines()):
        return 75
    if any(_LOG_HEALTH_ERROR.match(x) for x in text.splitlines()):
        return 70
    return 60 if any(_OVERALL_ROW.match(line) for line in text.splitlines()) else 0


def sniff_discovery(text: str) -> int:
    lines = text.splitlines()
    found = any(_FOUND.match(line.strip()) for line in lines)
    device = any((m := _DEVICE_ROW.match(line.lstrip())) and m.group("field") == "Device UUID" for line in lines)
    hierarchy = bool(_HIERARCHY_BOX.search(text)) or any(_HIERARCHY_GPU.match(line.lstrip()) for line in lines)
    return 90 if (found and device) or hierarchy else 60 if device else 0


@parser(HEALTH_KIND, sniff=sniff_health, title="dcgmi health -c (health watches: table or -j JSON)")
def parse_health(text: str) -> DcgmHealthRecord:
    """Parse ``dcgmi health -c``: the overall health and each system's incident with its messages."""
    lines = [line for line in prepare(HEALTH_KIND, text) if not _COMMAND.match(line)]
    body = "\n".join(lines)
    if body.lstrip().startswith("{"):
        return _health_json(body)
    refusals = [line.strip() for line in lines if _REFUSAL.match(line)]
    if refusals:
        return DcgmHealthRecord(overall=None, errors=refusals)
    reported = bool(_REPORT_BOX.search(body)) or any(_OVERALL_ROW.match(line) for line in lines)
    if not reported and (logged := _logged_incidents(lines)):
        worst = "Failure" if any(i.health == "Failure" for i in logged) else "Warning"
        return DcgmHealthRecord(overall=worst, incidents=logged)
    if not reported and (failed := [f"host engine, Health module: {m.group('message')}" for line in lines
                                    if (m := _LOG_HEALTH_ERROR.match(line))]):
        return DcgmHealthRecord(overall=None, errors=failed)
    if not reported and any(_SET_ONLY.match(line) for line in lines):
        return DcgmHealthRecord(overall=None, errors=[
            "dcgmi answered 'Health monitor systems set successfully.' (it set the watches) and reported no health"])
    if not reported and any(_WATCHES_ONLY.match(line) for line in lines):
        return DcgmHealthRecord(overall=None, errors=[
            "dcgmi answered 'Health monitor systems report' (which watches are on: health -f) and reported no health"])
    record: DcgmHealthRecord | None = None
    group, entity = "GPU", ""
    incident: DcgmHealthIncident | None = None
    for line in lines:
        if m := _OVERALL_ROW.match(line):
            record = DcgmHealthRecord(overall=m.group("health"))
        elif record is None or not line.strip() or is_noise(line):
            continue
        elif m := _GROUP_ROW.match(line):
            group = m.group("group")
        elif m := _ENTITY_ROW.match(line):
            entity, incident = f"{group} {m.group('id')}", None
        elif m := _SYSTEM_ROW.match(line):
            incident = DcgmHealthIncident(entity or group, m.group("system").strip(), m.group("health"))
            record.incidents.append(incident)
        elif (m := _MESSAGE_ROW.match(line)) and incident is not None and m.group("text"):
            _continue(incident, m.group("text"))
    if record is None:
        raise ParseError(HEALTH_KIND, "no 'Overall Health' row")
    return record


def _continue(incident: DcgmHealthIncident, text: str) -> None:
    """An overflow line of the box: DCGM wraps a message at the cell's width, mid-word included."""
    if incident.messages and not incident.messages[-1].endswith((".", ",")):
        incident.messages[-1] += ("" if incident.messages[-1].endswith("-") else " ") + text
    else:
        incident.messages.append(text)


def _health_json(body: str) -> DcgmHealthRecord:
    try:
        doc = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ParseError(HEALTH_KIND, f"not a JSON document: {exc.msg}", exc.lineno) from exc
    tree = doc.get("body") if isinstance(doc, dict) else None
    overall = tree.get("Overall Health") if isinstance(tree, dict) else None
    value = overall.get("value") if isinstance(overall, dict) else None
    if value not in HEALTH_WORDS:
        raise ParseError(HEALTH_KIND, "no 'Overall Health' value")
    record = DcgmHealthRecord(overall=value)
    assert isinstance(tree, dict)
    for group, node in tree.items():
        if group != "Overall Health":
            _walk(record, group, node, [group])
    return record


def _walk(record: DcgmHealthRecord, name: str, node: Any, path: list[str]) -> None:
    if not isinstance(node, dict):
        return
    value = node.get("value")
    system = name.endswith(" system") or name == "Driver" or (name == "Internal error" and "Errors" in path)
    if system and value in HEALTH_WORDS:
        entity = " ".join(p for p in path[:-1] if p != "Errors") or "?"
        messages = [str(x) for x in node.get("overflow", []) if isinstance(x, str | int)]
        record.incidents.append(DcgmHealthIncident(entity, name, str(value), messages))
    for child, sub in (node.get("children") or {}).items():
        _walk(record, child, sub, [*path, child])


def _logged_incidents(lines: list[str]) -> list[DcgmHealthIncident]:
    """The incidents the host engine's log lines name (:data:`_LOG_INCIDENT`), each on the GPU its message names."""
    incidents = []
    for line in lines:
        if m := _LOG_INCIDENT.search(line):
            gpu = re.search(r"\bGPU (\d+)\b", m.group("message"))
            system = m.group("system").strip()
            incidents.append(DcgmHealthIncident(f"GPU {gpu.group(1)}" if gpu else "GPU", f"{system} system",
                                                _LOG_HEALTH[m.group("health")], [m.group("message").strip()]))
    return incidents


@parser(DISCOVERY_KIND, sniff=sniff_discovery, title="dcgmi discovery -l / -c (the GPUs DCGM sees, MIG instances)")
def parse_discovery(text: str) -> SmiListingRecord:
    """Parse ``dcgmi discovery -l`` (and ``-c``'s instance hierarchy) into a GPU listing (id, name, UUID, MIG)."""
    record = SmiListingRecord(format="list", tool="dcgmi")
    count: int | None = None
    gpu: ListedGpu | None = None
    in_gpus = True
    for line in prepare(DISCOVERY_KIND, text):
        stripped = line.strip()
        if m := _FOUND.match(stripped):
            count = int(m.group("count")) if count is None else count
        elif re.match(r"^\d+ NvSwitch(?:es)? found\.", stripped):
            in_gpus = False
        elif m := _HIERARCHY_GPU.match(stripped):
            gpu = next((g for g in record.gpus if g.index == int(m.group("id"))), None)
            if gpu is None:
                gpu = ListedGpu(int(m.group("id")), None, m.group("uuid"))
                record.gpus.append(gpu)
        elif m := _HIERARCHY_GI.match(stripped):
            owner = next((g for g in record.gpus if g.index == int(m.group("gpu"))), None)
            if owner is not None:  # -c names no profile nor MIG UUID: the instance's index is what it shows
                owner.mig_devices.append(MigInstance("", int(m.group("gi")), ""))
        elif in_gpus and (m := _DEVICE_ROW.match(stripped)):
            if m.group("id") is not None:
                gpu = ListedGpu(int(m.group("id")), None, None)
                record.gpus.append(gpu)
            if gpu is not None and m.group("field") == "Name":
                gpu.name = m.group("value") or None
            elif gpu is not None and m.group("field") == "Device UUID":
                gpu.uuid = m.group("value") or None
    if count is None and not record.gpus:
        raise ParseError(DISCOVERY_KIND, "no '<n> GPUs found.' line, no GPU box and no instance hierarchy")
    record.elided = count is not None and count > len(record.gpus)
    return record
