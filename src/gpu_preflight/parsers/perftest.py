"""perftest bandwidth and latency tests (``ib_write_bw``, ``ib_send_bw``, ``ib_read_bw``, ``ib_*_lat``).

The header block is ``key : value`` pairs, two per line (``Dual-port : OFF<TAB>Device :
mlx5_0``); the result table's columns are found by name. Bandwidth is reported in
``Gb/sec`` with ``--report_gbits`` and otherwise in ``MiB/sec`` (``MB/sec`` in older
releases, which count the same 2^20-byte megabytes); both are converted to Gb/s
(1 MiB/s = 2^20 * 8 / 10^9 Gb/s) and the unit printed is kept. Warnings perftest
prints inside the table (``Conflicting CPU frequency values detected``) are kept as
warnings; connection failures (``Unable to init the socket connection``) as errors, so a
run that never measured reads as "could not measure". Those failure lines alone (a client
that never reached its server prints nothing else) are recognised as perftest too. A banner
and header with neither a result row nor a failure line (cut, or a run that hung before it
measured) is a perftest run marked incomplete. A latency test's rows (``t_min[usec] ... t_typical[usec]``)
keep their typical latency and no bandwidth: the run connected and measured, but there is no bandwidth to
hold against a floor.
"""

from __future__ import annotations

import re

from ..records.perftest import PerftestRecord as PerftestRecord
from ..records.perftest import PerftestRow as PerftestRow
from .detect import parser
from .errors import ParseError
from .text import is_noise, prepare, to_float, to_int

KIND = "perftest"

_MIB_PER_S_TO_GBPS = 1024 * 1024 * 8 / 1e9
_PAIR = re.compile(r"(?P<key>[A-Za-z][\w .*/-]*?)\s*:\s*(?P<value>\S+)")
_HEADER_LINE_MAX = 512  # a header line is ~80 characters; _PAIR is quadratic in a line without a colon
_HEADER_KEYS = {"device": "device", "transport type": "transport", "connection type": "connection_type",
                "link type": "link_layer"}
# perftest's failure lines that say none of those words (see _FAILURE_LINE) are errors too.
_ERROR = re.compile(r"unable to|failed|error|couldn't|cannot|^Port number \d+ state is (?!Active\b)"
                    r"|^IB device \S+ not found|^No such device ID|Incompatibility issue|^Bad wc status"
                    r"|^Problems? (?:with|in) |is not supported on this GPU|^unexpected CM event", re.IGNORECASE)


# rdma-core's loader warns for each provider listed in /etc/libibverbs.d whose library is not installed
# ("libibverbs: Warning: couldn't load driver 'libmana-rdmav34.so': ..."): the device in use has its provider,
# and a run left without one says so on its own line ("Did not detect devices"), so these are warnings.
# Searched, not anchored: a launcher's host or rank tag may stand before it ("gpu-node-07: libibverbs: ...").
_LOADER_WARNING = re.compile(r"(?:^|[\s:\]])libibverbs: Warning: ")
# The result table's columns by name; a paste that lost the second '#' ("#bytes  iterations  BW peak...")
# still names the iterations column. perftest_parameters.h's other headers add columns: --report-per-port's
# "BW Port1[MiB/sec]   MsgRate Port1[Mpps]" pairs, --cpu_util's "CPU_Util[%]", and the latency tests' (ib_*_lat)
# "t_min[usec] ... t_typical[usec] ... 99% percentile[usec]" (-D: "t_avg[usec]    tps average").
_COLUMN = re.compile(r"#\w+|\biterations\b|BW peak\[[^\]]+\]|BW average\[[^\]]+\]|MsgRate\[[^\]]+\]"
                     r"|(?:BW|MsgRate) Port\d\[[^\]]+\]|CPU_Util\[%\]|t_\w+\[usec\]|[\d.]+% percentile\[usec\]"
                     r"|tps average")


# perftest's own failure lines (perftest_communication.c, perftest_resources.c): a run that never
# connected prints only these, and people paste them alone (quoted with '>' too, indented under a list item,
# which the paste reader does not unwrap).
_FAILURE_LINE = re.compile(r"^[\s>]*(?:Couldn't connect to \S+:\d+|Unable to init the socket connection"
                           r"|Unable to open file descriptor for socket connection"
                           r"|Completion with error at (?:client|server)|Failed status \d+: wr_id"
                           r"|(?:ethernet|rdma_cm)_(?:read|write)_keys: Couldn't|Couldn't (?:read|exchange) remote"
                           r"|Failed to exchange data between server and clients"
                           # resources it could not create (a QP the device refuses) and RDMA CM connection failures
                           r"|Unable to create QP|Failed to create QP|Couldn't create IB resources"
                           r"|RDMA CM event error|Failed to (?:handle|connect) RDMA CM event"
                           # no RDMA device at all (perftest_parameters.c): a container without the device, a
                           # driver that is not up
                           r"|Did not detect devices|Unable to find the Infiniband/RoCE device"
                           # a port that is not up, and the device context that therefore cannot be had
                           # (perftest_parameters.c's link-layer check); GPU memory it cannot register
                           r"|Port number \d+ state is (?!Active\b)\w+|Couldn't set the link layer"
                           r"|Couldn't get context for the device|Couldn't allocate MR"
                           # a QP that would not move to RTR/RTS (perftest_resources.c) and an RDMA CM event it
                           # reports with its error ("Event: RDMA_CM_EVENT_REJECTED; error: -111.")
                           r"|Failed to modify QP (?:\d+ )?to (?:INIT|RTR|RTS)"
                           r"|Unable to Connect the HCA's through the link"
                           r"|Event: RDMA_CM_EVENT_\w+; error: -?\d+"
                           # the rest of its stderr by family (perftest's src/*.c fprintf(stderr, ...)): its
                           # out-of-band socket or RDMA CM channel ("Unable to set up socket connection", "Unable to
                           # read from socket/rdma_cm", "rdma_resolve_addr failed"), the device it was asked for
                           # ("IB device mlx5_9 not found", "No such device ID (9) exists in system"), the GID types
                           # of the two sides, the verbs objects of a run (CQ, SRQ, QP posts, work completions:
                           # "poll CQ failed 1", "Bad wc status 12", "Couldn't post send: ..."), the server and
                           # client falling out of step, a measurement loop that failed, a result below the limit
                           # it was given, GPU memory it could not use, and its own argument parser's refusal
                           r"|Unable to (?:\w+ ){1,3}(?:socket|rdma_cm|RDMA_CM)\b|Unable to create RDMA_CM resources"
                           r"|Problem in resolving basic address and port|rdma_\w+ failed\b|unexpected CM event"
                           r"|IB device \S+ not found|No such device ID \(\d+\) exists in system"
                           r"|Found Incompatibility issue with GID types"
                           r"|(?:[Pp]oll (?:\w+ )*CQ failed|Bad wc status)\b"
                           r"|Couldn't (?:post (?:send|recv)|create (?:a \w+ )?(?:CQ|SRQ)|request R?CQ notification"
                           r"|attach QP|init GPU context)\b|Failed to post receive"
                           r"|Failed to sync (?:between|before)|Failed to complete run_iter_\w+ function"
                           r"|Problems with warm up|Error occurred while running infinitely"
                           r"|Error: (?:BW result|Msg rate) +is below"
                           r"|DMA-BUF is not supported on this GPU|Parser function exited with Error"
                           r"|Test exited with Error)", re.M)
# After the closing RESULT_LINE a run releases its verbs objects and its out-of-band connection (write_bw.c:562-604 @
# 00b55b66: ctx_close_connection, then destroy_ctx, perftest_resources.c:1609-1754: "Failed to destroy CQ - ...",
# "Couldn't destroy QP - ...", "Failed to deallocate PD - ...", "Failed to deregister MR #1", "Failed to close device
# context"): below a closed table such a line is teardown, not a measurement that stopped: a warning.
_TEARDOWN = re.compile(r"^(?:Failed to (?:destroy|deallocate|deregister|close)|Couldn't (?:destroy|close)) ")
# A pasted shell prompt running a perftest binary ("$ ib_write_bw ...", "[root@host perftest]# ./ib_send_bw ...",
# "user@host:~$ sudo ib_read_bw ...", "host:~# ib_send_bw"); a Markdown heading ("# ib_write_bw") or a shell
# history is no prompt.
_PROMPT_RUN = re.compile(r"^(?:\$|[\w.-]+@[\w.-]+(?::[^\s$#]*)?\s?[$#]|\[[^\]\n]+\]\s?[$#]|[\w.-]+:[^\s$#]*[$#])"
                         r"\s+(?:sudo\s+)?(?:\S*/)?ib_(?:write|read|send|atomic)_(?:bw|lat)\b", re.M)


def sniff(text: str) -> int:
    if re.search(r"#bytes\s+#iterations\s+(?:BW peak|t_min\[usec\]|t_avg\[usec\]\s+tps average)", text):
        return 95
    if re.search(r"\b(?:RDMA_Write|RDMA_Read|Send|Atomic)(?: [\w ]+?)? (?:BW|Latency) Test\b", text) \
            or _PROMPT_RUN.search(text):
        return 80
    return 65 if _FAILURE_LINE.search(text) else 0


@parser(KIND, sniff=sniff, title="perftest ib_*_bw (Gb/sec or MiB/sec) and ib_*_lat")
def parse(text: str) -> PerftestRecord:
    """Parse a perftest bandwidth run: header facts, result rows, warnings and errors."""
    record = PerftestRecord()
    columns: list[str] | None = None
    closed = False  # the dashed RESULT_LINE came after the rows: the measurement ended
    for number, raw in enumerate(prepare(KIND, text), 1):
        line = raw.strip().lstrip("> \t")  # an indented quote ("  > Couldn't ...") the paste reader leaves
        if line and set(line) <= {"-"}:
            closed = closed or bool(record.rows)
            continue
        if not line or is_noise(raw):
            continue
        if m := re.match(r"^(?P<test>\w+(?: [\w ]+?)? (?:BW|Latency) Test)$", line):  # "... Post List BW Test" too
            record.test = m.group("test")
            continue
        if line.startswith("#bytes"):
            columns = ["#iterations" if c == "iterations" else c for c in _COLUMN.findall(line)]
            unit = re.search(r"BW peak\[([^\]]+)\]", line)
            record.bw_unit = unit.group(1) if unit else None
            continue
        if columns is not None and line[:1].isdigit():
            record.rows.append(_row(record, columns, line, number))
            continue
        if _LOADER_WARNING.search(line):
            record.warnings.append(line)
            continue
        if columns is None and ":" in line and not _ERROR.search(line):
            _header(record, raw)
            continue
        if _ERROR.search(line) and not line.startswith("Conflicting") and not (closed and _TEARDOWN.match(line)):
            record.errors.append(line)
        elif columns is not None or line.startswith(("Conflicting", "Warning", "WARNING")):
            record.warnings.append(line)
    if not record.rows and not record.errors:
        if record.test is None and record.device is None:
            raise ParseError(KIND, "no perftest result row and no error")
        # Its banner and settings but nothing after them: the paste was cut (or the run hung) before any result
        # row, as a server still waiting for its client or a client stuck connecting prints. A run we read and
        # could not judge, not an unknown text.
        record.incomplete.append("the output ends before any result row: cut, or the run never measured")
    peaks = [r.bw_peak_gbps for r in record.rows if r.bw_peak_gbps is not None]
    avgs = [r.bw_avg_gbps for r in record.rows if r.bw_avg_gbps is not None]
    record.bw_peak_max_gbps = max(peaks) if peaks else None
    record.bw_avg_max_gbps = max(avgs) if avgs else None
    return record


def _header(record: PerftestRecord, raw: str) -> None:
    for m in _PAIR.finditer(raw.strip()[:_HEADER_LINE_MAX]):
        attr = _HEADER_KEYS.get(m.group("key").strip().lower())
        if attr is not None:
            setattr(record, attr, m.group("value").strip() or None)


def _row(record: PerftestRecord, columns: list[str], line: str, number: int) -> PerftestRow:
    values = line.split()
    if len(values) != len(columns):
        raise ParseError(KIND, f"{len(values)} values for {len(columns)} columns", number)
    cells = dict(zip(columns, values, strict=True))
    size = to_int(cells.get("#bytes"))
    if size is None:
        raise ParseError(KIND, f"size {cells.get('#bytes')!r} is not a byte count", number)
    scale = 1.0 if not record.bw_unit or record.bw_unit.startswith("Gb") else _MIB_PER_S_TO_GBPS
    peak = next((to_float(v) for k, v in cells.items() if k.startswith("BW peak")), None)
    avg = next((to_float(v) for k, v in cells.items() if k.startswith("BW average")), None)
    rate = next((to_float(v) for k, v in cells.items() if k.startswith("MsgRate")), None)
    # A latency row's median (t_typical) or, in a timed (-D) run, its mean (t_avg): no bandwidth in it.
    latency = to_float(cells.get("t_typical[usec]", cells.get("t_avg[usec]")))
    return PerftestRow(size_bytes=size, iterations=to_int(cells.get("#iterations")),
                       bw_peak_gbps=round(peak * scale, 4) if peak is not None else None,
                       bw_avg_gbps=round(avg * scale, 4) if avg is not None else None, msg_rate_mpps=rate,
                       latency_usec=latency)
