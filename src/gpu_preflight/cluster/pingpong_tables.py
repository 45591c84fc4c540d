"""The fi_pingpong tables rank 0 gathered, parsed once before the cluster checks judge them.

Node leaders send each pair side's raw ``fi_pingpong`` output (it is also what the
SageMaker layout shows under ``network.efa_communication_test``). Parsing is not a check's
job (checks are pure rules over records), so the aggregation parses each pair's client
table here and hands the cluster checks a fact ``pingpong_tables``: per pair, the parsed
record or the :class:`~gpu_preflight.records.errors.ParseError` that says why it could not
be read. The assessment's latency table reads a side's rows through :func:`side_rows`.
"""

from __future__ import annotations

from ..evidence import parse_as
from ..records import ClusterView, pingpong_client_text, pingpong_pairs
from ..records.errors import ParseError
from ..records.libfabric import PingpongRecord, PingpongRow

__all__ = ["KIND", "client_tables", "side_rows"]

KIND = "fi-pingpong"


def client_tables(view: ClusterView) -> dict[int, PingpongRecord | ParseError]:
    """Each pair's client table (the pair's measurement), parsed; nothing is imported without pairs."""
    pairs = pingpong_pairs(view)
    if not pairs:
        return {}

    tables: dict[int, PingpongRecord | ParseError] = {}
    for k, sides in pairs.items():
        client = sides.get("client")
        if client is None:
            continue
        try:
            tables[k] = parse_as(KIND, pingpong_client_text(client))
        except ParseError as exc:
            tables[k] = exc
    return tables


def side_rows(raw_output: str) -> list[PingpongRow]:
    """The rows of one side's table; none where the text is not a readable table."""
    try:
        record: PingpongRecord = parse_as(KIND, raw_output)
    except ParseError:
        return []
    return record.rows
