"""libfabric: ``fi_info`` provider listings and ``fi_pingpong`` results.

``fi_info`` prints one block per (provider, endpoint type) as ``provider:`` followed by
indented ``key: value`` lines; ``fi_info -v`` prints a nested tree per entry whose
provider, fabric and domain live under ``fi_fabric_attr``/``fi_domain_attr``. Both are
read; a paste that starts or stops inside an entry (a ``-v`` tree cut in its attributes, before the
provider it names last) keeps the entries it shows whole, and the cut one is not counted. When no
provider matches, fi_info prints ``fi_getinfo: -61`` (``(No data available)`` on newer versions) and
exits 61: that is a record with ``error_code=-61`` and no providers — the answer "no such provider",
which a judge must not confuse with a parse failure. ``fi_info -l`` lists the providers libfabric was built with
(``tcp:`` / ``    version: 121.0``), device or not: kept apart (``provider_list``), never counted as entries.

``fi_pingpong`` prints a table whose columns are found by name (``bytes``, ``#sent`` or
``iters``, ``MB/sec``, ``usec/xfer``...); sizes use k/m/g suffixes (powers of 1024). A run
that failed before its table prints its log lines (``[error] util/pingpong.c:373 : failed
to connect: Connection refused``; ``[debug]`` ones too with ``-v``) or its failed calls (``fi_eq_sread():
util/pingpong.c:1762, ret=-110 (Connection timed out)``): those are recognised, and the ``[error]`` and failed-call
lines are the record's errors (a pingpong that did not complete), as is ``-c``'s ``Error at iteration=..`` (a
message that arrived corrupted), after rows too: the run stopped there.
"""

from __future__ import annotations

import re

from ..records.libfabric import FiInfoRecord as FiInfoRecord
from ..records.libfabric import FiProvider as FiProvider
from ..records.libfabric import PingpongRecord as PingpongRecord
from ..records.libfabric import PingpongRow as PingpongRow
from .detect import parser
from .errors import ParseError
from .text import is_noise, prepare, to_float

INFO_KIND = "fi-info"
PINGPONG_KIND = "fi-pingpong"

_GETINFO_ERROR = re.compile(r"fi_getinfo:\s*(?P<code>-?\d+)(?:\s*\((?P<text>[^)]*)\))?")
_KEY = re.compile(r"^(?P<indent>\s*)(?P<key>\w[\w ]*?):\s*(?P<value>.*)$")
_SUFFIX = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_SIZE = re.compile(r"^(?P<n>\d+(?:\.\d+)?)(?P<unit>[kmgt]?)$", re.IGNORECASE)


# fi_info -l (util/info.c print_providers, with FI_PROV_ATTR_ONLY): "<prov_name>:" then "    version: M.m" per
# provider libfabric has, whether or not a device for it is there.
_PROVIDER_LIST = re.compile(r"^(?P<provider>[\w;.-]+):[ \t]*\n[ \t]+version:[ \t]*(?P<version>\d+\.\d+)[ \t]*$",
                            re.MULTILINE)


def sniff_info(text: str) -> int:
    if re.search(r"^\s*" + _GETINFO_ERROR.pattern, text, re.MULTILINE):
        return 90
    if _PROVIDER_LIST.search(text) and not re.search(r"^provider:", text, re.MULTILINE):
        return 70
    if re.search(r"^provider:\s*\S+", text, re.MULTILINE) and re.search(r"^\s+(?:fabric|domain):", text, re.MULTILINE):
        return 90
    if re.search(r"^fi_info:\s*$", text, re.MULTILINE) and "fi_fabric_attr:" in text:
        return 90
    return 0


# fi_pingpong's own log lines (util/pingpong.c: ``[error] util/pingpong.c:373 : failed to connect: ...``, with
# ``-v`` its ``[debug]`` lines too): a run that never exchanged a message prints only these.
_FABTESTS_LOG = re.compile(r"^\[(?P<level>error|warn|warning|debug|info)\]\s+[\w/.-]+\.c:\s*\d+\s*:", re.IGNORECASE)
# Its failed calls (util/pingpong.c PP_PRINTERR, fabtests' FT_PRINTERR before it: "%s(): %s:%-4d, ret=%d (%s)",
# e.g. "fi_eq_sread(): util/pingpong.c:1762, ret=-110 (Connection timed out)"), and the data check of -c
# ("Error at iteration=%d size=%d byte=%d": a message arrived corrupted). Each ends the run.
_PRINTERR = re.compile(r"^[\w/()-]+\(\): [\w/.-]+\.c:\s*\d+\s*, ret=-?\d+ \([^)]*\)\s*$")
_CORRUPTED = re.compile(r"^Error at iteration=\d+ size=\d+ byte=\d+$")
# After the exchange pp_free_res closes every fid (util/pingpong.c:1874-1887, PP_CLOSE_FID :138-147) and logs a close
# the provider refused as "[error] util/pingpong.c:1876: fi_close (-22) fid 0": below a complete table (AWS's EFA
# test shows one as the expected output) that is teardown, not an exchange that stopped.
_CLOSE_ERROR = re.compile(r":\s*fi_close \(-?\d+\) fid \d+\s*$")


def sniff_pingpong(text: str) -> int:
    """The result table, or (a run that failed before it) fi_pingpong's own log lines."""
    if re.search(r"^bytes\s+(?:#sent|iters)\s+.*MB/sec", text, re.MULTILINE):
        return 90
    lines = text.splitlines()
    if "pingpong" in text and any(_FABTESTS_LOG.match(line) or _PRINTERR.match(line) for line in lines):
        return 85
    return 0


@parser(INFO_KIND, sniff=sniff_info, title="fi_info (short or -v listing, or fi_getinfo error)")
def parse_info(text: str) -> FiInfoRecord:
    """Parse ``fi_info`` output: provider entries, or the ``fi_getinfo: -61`` answer, or ``-l``'s provider list."""
    if not re.search(r"^(?:provider|fi_info):", text, re.MULTILINE) and _PROVIDER_LIST.search(text):
        return FiInfoRecord(provider_list=[FiProvider(m.group("provider"), version=m.group("version"))
                                           for m in _PROVIDER_LIST.finditer(text)])
    record = FiInfoRecord()
    entry: dict[str, str] | None = None
    section: list[tuple[int, str]] = []
    entries: list[dict[str, str]] = []
    headless = False  # the first entry's own line was not pasted: a -v paste that starts inside an entry
    for raw in prepare(INFO_KIND, text):
        if not raw.strip() or is_noise(raw):
            continue
        if m := _GETINFO_ERROR.search(raw):
            record.error_code = int(m.group("code"))
            record.error = (m.group("text") or "").strip() or None
            continue
        m = _KEY.match(raw.expandtabs(4))
        if m is None:
            continue
        indent, key, value = len(m.group("indent")), m.group("key").strip(), m.group("value").strip()
        if indent == 0 and key in ("provider", "fi_info"):
            entry = {}
            entries.append(entry)
            section = []
            if key == "provider":
                entry["provider"] = value
            continue
        if entry is None:
            if indent == 0:
                continue
            entry, headless = {}, True  # attribute lines before any "fi_info:" / "provider:" line
            entries.append(entry)
        while section and section[-1][0] >= indent:
            section.pop()
        path = ".".join([name for _, name in section] + [key])
        if not value:
            section.append((indent, key))
        else:
            entry[path] = value
    for i, e in enumerate(entries):
        provider = e.get("provider") or e.get("fi_fabric_attr.prov_name")
        if not provider and ((i == 0 and headless) or i == len(entries) - 1):
            continue  # a paste cut inside its first or last entry (-v prints the provider last): judged on the rest
        if not provider:
            raise ParseError(INFO_KIND, "an fi_info entry without a provider name")
        record.providers.append(FiProvider(
            provider=provider,
            fabric=e.get("fabric") or e.get("fi_fabric_attr.name"),
            domain=e.get("domain") or e.get("fi_domain_attr.name"),
            version=e.get("version") or e.get("fi_fabric_attr.prov_version"),
            type=e.get("type") or e.get("fi_ep_attr.type"),
            protocol=e.get("protocol") or e.get("fi_ep_attr.protocol"),
        ))
    if not record.providers and record.error_code is None:
        raise ParseError(INFO_KIND, "no 'provider:' entry and no fi_getinfo error line")
    return record


@parser(PINGPONG_KIND, sniff=sniff_pingpong, title="fi_pingpong (fabtests) result table")
def parse_pingpong(text: str) -> PingpongRecord:
    """Parse the ``fi_pingpong`` table (client or server side)."""
    record = PingpongRecord()
    columns: list[str] | None = None
    for number, raw in enumerate(prepare(PINGPONG_KIND, text), 1):
        line = raw.strip()
        if not line or is_noise(raw):
            continue
        if m := _FABTESTS_LOG.match(line):  # fabtests' log: only its [error] lines are failures
            if m.group("level").lower() == "error" and not (record.rows and _CLOSE_ERROR.search(line)):
                record.errors.append(line)
            continue
        if _PRINTERR.match(line) or _CORRUPTED.match(line):
            record.errors.append(line)
            continue
        tokens = line.split()
        if tokens[0] == "bytes" and any("MB/sec" in t for t in tokens):
            columns = tokens
            continue
        if columns is None or not _SIZE.match(tokens[0]):
            if re.search(r"error|fail|refused|timed out", line, re.IGNORECASE):
                record.errors.append(line)
            continue
        if len(tokens) != len(columns):
            raise ParseError(PINGPONG_KIND, f"{len(tokens)} values for {len(columns)} columns", number)
        values = dict(zip(columns, tokens, strict=True))
        size = _bytes(values["bytes"])
        if size is None:
            raise ParseError(PINGPONG_KIND, f"size {values['bytes']!r} is not a byte count", number)
        iterations = values.get("iters") or values.get("#sent")
        record.rows.append(PingpongRow(
            size_bytes=size,
            iterations=_bytes(iterations) if iterations else None,
            total_bytes=_bytes(values.get("total", "")),
            time_s=to_float(values.get("time")),
            mb_per_s=to_float(values.get("MB/sec")),
            usec_per_xfer=to_float(values.get("usec/xfer")),
            mxfers_per_s=to_float(values.get("Mxfers/sec")),
        ))
    if not record.rows and not record.errors:
        raise ParseError(PINGPONG_KIND, "no fi_pingpong result row")
    return record


def _bytes(text: str) -> int | None:
    """``64`` → 64, ``1k`` → 1024, ``1.2m`` → 1258291 (fabtests' size_str uses powers of 1024)."""
    m = _SIZE.match(text.strip())
    if m is None:
        return None
    return int(float(m.group("n")) * _SUFFIX[m.group("unit").lower()])
