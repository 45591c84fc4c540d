"""``dcgmi diag -j``: the JSON of DCGM 3.x (``"DCGM GPU Diagnostic"``) and 4.x (``"DCGM Diagnostic"``).

Layouts, from NVIDIA/DCGM's ``NvvsJsonStrings.h`` and ``dcgm_diag_schema.json``:

* 3.x: ``{"DCGM GPU Diagnostic": {"test_categories": [{"category", "tests": [{"name",
  "results": [{"gpu_ids": "0,1" | 0, "status", "warnings": [str | {"warning",
  "error_id"}], "info": [str]}]}]}], "version", "Driver Version Detected", "GPU Device
  IDs", "runtime_error", "error_code"}}``. Arrays may hold ``null`` holes (results are
  indexed by GPU id), and a banner line may precede the document.
* 4.x: the same categories, but results are per entity (``entity_group``,
  ``entity_id``), each test has a ``test_summary.status``, warnings carry ``error_id``/
  ``error_category``/``error_severity``, and ``metadata`` / ``entity_groups`` sit beside
  ``"DCGM Diagnostic"`` at the top level (accepted inside it too).

Test objects quoted without the root (an issue's excerpt of a ``-j`` document) are read as a
fragment, marked cut when the quote ends where the document goes on. So are the test objects of
a document cut at either end (its root's opening or closing braces lost): no longer one JSON
value, it is judged on the whole test objects it still holds, and marked incomplete.

No JSON schema is published as stable, so every field is read defensively: a missing one
is ``None``, a field of the wrong type is a :class:`ParseError`, never a ``KeyError``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...boundedio import JSON_MAX_DEPTH, nesting_depth
from ...records.dcgm import DcgmDiagRecord, DcgmTest
from ..errors import ParseError
from .common import KIND, gpu_ids_in, normalize_status, overall_of, worst_status

_ROOTS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")
_GAP = re.compile(r"\s*(,?)\s*")  # what separates two quoted test objects
_TEST_START = re.compile(r'\{\s*"name"\s*:')  # where a test object of either layout may begin


def parse_json(text: str) -> DcgmDiagRecord:
    if "\x00" in text:
        raise ParseError(KIND, "binary data (NUL bytes), not tool output")
    start = text.find("{")
    if start < 0:
        raise ParseError(KIND, "no JSON object")
    if (depth := nesting_depth(text[start:])) > JSON_MAX_DEPTH:
        raise ParseError(KIND, f"JSON nested {depth} levels deep (dcgmi's documents nest about 6)")
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as exc:
        if cut := _cut_document(text):
            return cut
        raise ParseError(KIND, f"malformed JSON: {exc.msg}", text[:start].count("\n") + exc.lineno) from None
    if not isinstance(data, dict):
        raise ParseError(KIND, "the JSON document is not an object")
    key = next((k for k in _ROOTS if k in data), None)
    if key is None and isinstance(data.get("iterations"), list):
        return _iterations(data)
    if key is None:
        if _is_test(data):
            return _excerpt(text, start)
        if cut := _cut_document(text):
            return cut
        raise ParseError(KIND, f"no {' or '.join(map(repr, _ROOTS))} key in the JSON document")
    record = _document(data, key)
    if not record.tests and not record.errors:
        raise ParseError(KIND, "the diagnostic holds neither tests nor a runtime error")
    record.overall = overall_of(record)
    return record


def _document(data: dict[str, Any], key: str) -> DcgmDiagRecord:
    """One run's document under its root ``key``: versions, runtime error and tests (``overall`` left to the caller)."""
    root = _object(data[key], key)
    metadata = _object(data.get("metadata", root.get("metadata", {})), "metadata")
    groups = data.get("entity_groups", root.get("entity_groups"))
    record = DcgmDiagRecord(
        format="json-4" if key == "DCGM Diagnostic" else "json-3",
        dcgm_version=_str(root.get("version", metadata.get("version"))),
        driver_version=_str(root.get("Driver Version Detected", metadata.get("Driver Version Detected"))),
        gpu_device_ids=_device_ids(root.get("GPU Device IDs"), groups),
    )
    for where in (root, data):
        value = where.get("runtime_error")
        if isinstance(value, str) and value.strip() and value.strip() not in record.errors:
            record.errors.append(value.strip())
    code = root.get("error_code")
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        record.return_code = code
    for category in _list(root.get("test_categories", []), "test_categories"):
        if category is None:
            continue
        cat = _object(category, "test_categories[]")
        for test in _list(cat.get("tests", []), "tests"):
            if test is not None:
                record.tests.append(_test(_str(cat.get("category")), _object(test, "tests[]")))
    return record


def _iterations(data: dict[str, Any]) -> DcgmDiagRecord:
    """``dcgmi diag --iterations N -j`` (DCGM 2.4-4.x): ``{"iterations": [each run's document], "Overall Result":
    "Pass" | "Fail", "warning": <DCGM's error string>}`` (dcgmi/Diag.cpp's RunDiagIterations).

    Every run's tests are read, in order. ``Overall Result`` says whether every run *ran*, not how its tests went
    (a run with a failed test is still ``Pass`` there); ``Fail`` is a run that could not complete, the loop stopped
    there: an error beside the results, with DCGM's ``warning``. A failed run leaves the document before it in its
    slot, so that run's tests are not shown.
    """
    record = DcgmDiagRecord(format="json-iterations")
    for number, run in enumerate(_list(data["iterations"], "iterations"), 1):
        if run is None:
            continue
        doc = _object(run, f"iterations[{number - 1}]")
        key = next((k for k in _ROOTS if k in doc), None)
        if key is None:
            raise ParseError(KIND, f"iteration {number} holds no {' or '.join(map(repr, _ROOTS))} document")
        one = _document(doc, key)
        record.format = f"{one.format}-iterations"
        record.dcgm_version = record.dcgm_version or one.dcgm_version
        record.driver_version = record.driver_version or one.driver_version
        record.gpu_device_ids = record.gpu_device_ids or one.gpu_device_ids
        record.tests.extend(one.tests)
        record.errors.extend(f"iteration {number}: {e}" for e in one.errors)
        record.return_code = record.return_code if record.return_code is not None else one.return_code
    result = _str(data.get("Overall Result"))
    if result is None or normalize_status(result) != "pass":
        why = _str(data.get("warning")) or "no reason given"
        record.errors.append(f"the iterative runs stopped (Overall Result {result or 'missing'}): {why}")
    if not record.tests and not record.errors:
        raise ParseError(KIND, "the iterations hold neither tests nor a runtime error")
    record.overall = overall_of(record)
    return record


def _is_test(value: Any) -> bool:
    """A test object of either layout: ``{"name": ..., "results": [...]}``."""
    return isinstance(value, dict) and isinstance(value.get("name"), str) and isinstance(value.get("results"), list)


def _excerpt(text: str, start: int) -> DcgmDiagRecord:
    """Test objects quoted out of a ``-j`` document without its root (an issue's excerpt).

    Read as a fragment: judged on the tests shown, nothing assumed of the others. A quote that
    ends with the ``,`` before the next object, or inside one, was cut out of a longer document
    and says so in ``incomplete``: a run whose other tests are not shown is not a pass.
    """
    decoder = json.JSONDecoder()
    record = DcgmDiagRecord(format="json-excerpt")
    at = start
    while True:
        try:
            obj, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            line = text.count("\n", 0, at) + 1
            record.incomplete.append(f"the JSON excerpt is cut inside a test object (line {line})")
            break
        if not _is_test(obj):
            raise ParseError(KIND, "a JSON excerpt mixing test objects with other values")
        record.tests.append(_test(None, obj))
        gap = _GAP.match(text, end)  # read in place: a copy of the rest per object was quadratic
        assert gap is not None  # the pattern matches the empty string
        if not text.startswith("{", gap.end()):
            if gap.group(1) or text[gap.end():].strip():
                record.incomplete.append("the JSON excerpt ends where the document goes on (a ',' or text after "
                                         "its last test object): the run's other tests are not shown")
            break
        at = gap.end()
    record.fragment = len(record.tests)
    record.overall = overall_of(record)
    return record


def _cut_document(text: str) -> DcgmDiagRecord | None:
    """The whole test objects of a ``-j`` document that no longer parses as one value (a paste cut at its
    start, which lost the root's ``{``, or at its end); ``None`` when it holds none.

    Each test object is decoded where it begins and skipped past, so the scan reads the text once. The
    record is a fragment judged on those tests, and incomplete: the rest of the run is not shown.
    """
    decoder = json.JSONDecoder()
    tests: list[DcgmTest] = []
    at = 0
    while (m := _TEST_START.search(text, at)) is not None:
        try:
            obj, end = decoder.raw_decode(text, m.start())
        except json.JSONDecodeError:
            at = m.end()
            continue
        if _is_test(obj):
            tests.append(_test(None, obj))
        at = end if _is_test(obj) else m.end()
    if not tests:
        return None
    record = DcgmDiagRecord(format="json-excerpt", tests=tests, fragment=len(tests))
    record.incomplete.append(f"the JSON document is cut (it is not one JSON value): judged on the {len(tests)} "
                             "test object(s) it shows, the run's other tests and its result are not shown")
    record.overall = overall_of(record)
    return record


def _test(category: str | None, test: dict[str, Any]) -> DcgmTest:
    name = _str(test.get("name"))
    if not name:
        raise ParseError(KIND, "a test without a name")
    out = DcgmTest(category, name, "pass")
    statuses = []
    for result in _list(test.get("results", []), f"{name}.results"):
        if result is None:
            continue
        res = _object(result, f"{name}.results[]")
        status = normalize_status(_str(res.get("status")) or "") or "fail"
        statuses.append(status)
        ids = _result_gpus(res)
        for gpu in ids:
            out.gpu_status[str(gpu)] = status
        for warning in _list(res.get("warnings", []) or [], f"{name}.warnings"):
            message, error_id, severity = _warning(warning)
            if message:
                out.messages.append(message)
            if error_id is not None and error_id not in out.error_ids:
                out.error_ids.append(error_id)
            if error_id is not None and severity is not None:
                out.error_severities[str(error_id)] = severity
            if status in ("fail", "warn") and not ids:
                ids = gpu_ids_in(message)
        out.info.extend(_info(res.get("info")))
        if status in ("fail", "warn"):
            out.gpus.extend(i for i in ids if i not in out.gpus)
    summary = test.get("test_summary")
    summary_status = normalize_status(_str(summary.get("status")) or "") if isinstance(summary, dict) else None
    if summary_status is not None:
        out.status = summary_status
    elif statuses:
        non_skip = [s for s in statuses if s != "skip"]
        out.status = worst_status(non_skip) if non_skip else "skip"
    else:
        out.status = "skip"
    return out


def _result_gpus(res: dict[str, Any]) -> list[int]:
    if "gpu_ids" in res or "gpu_id" in res:
        value = res.get("gpu_ids", res.get("gpu_id"))
        if isinstance(value, int) and not isinstance(value, bool):
            return [value]
        if isinstance(value, str):
            return [int(x) for x in value.replace(" ", "").split(",") if x.isdigit()]
        return []
    group = res.get("entity_group")
    entity = res.get("entity_id")
    if isinstance(entity, int) and not isinstance(entity, bool) and (group is None or str(group).upper() == "GPU"):
        return [entity]
    return []


def _warning(warning: Any) -> tuple[str, int | None, int | None]:
    """A warning's text, its ``error_id`` and its ``error_severity`` (4.x; None where not printed)."""
    if isinstance(warning, str):
        return warning.strip(), None, None
    if isinstance(warning, dict):
        error_id, severity = warning.get("error_id"), warning.get("error_severity")
        return (_str(warning.get("warning")) or "", _int(error_id), _int(severity))
    raise ParseError(KIND, f"a warning that is neither text nor an object: {type(warning).__name__}")


def _info(info: Any) -> list[str]:
    if info is None:
        return []
    if isinstance(info, str):
        return [info]
    if isinstance(info, dict):
        return _info(info.get("messages"))
    if isinstance(info, list):
        return [x.strip() for x in info if isinstance(x, str)]
    raise ParseError(KIND, f"an info field of type {type(info).__name__}")


def _device_ids(value: Any, groups: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    ids: list[str] = []
    for group in groups if isinstance(groups, list) else []:
        if isinstance(group, dict) and str(group.get("entity_group", "GPU")).upper() == "GPU":
            for entity in group.get("entities") or []:
                if isinstance(entity, dict) and entity.get("device_id") is not None:
                    ids.append(str(entity["device_id"]))
    return ids


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ParseError(KIND, f"{where} is a {type(value).__name__}, expected an object")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ParseError(KIND, f"{where} is a {type(value).__name__}, expected a list")
    return value


def _str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value).strip() or None
    raise ParseError(KIND, f"expected text, got a {type(value).__name__}")
