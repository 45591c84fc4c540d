"""What NCCL said: recognised failure signatures in a job's log, and an nccl-tests run's results."""

from __future__ import annotations

import msgspec

KEPT_FAILURES = 500  # the first and the last this many ``Test ... failure`` lines are listed in ``errors``
FAILURE_EXAMPLES = 3  # lines listed per failure group
MAX_FAILURE_GROUPS = 1000  # (signature, host) groups counted apart; beyond, one group per signature for the rest
FAILURE_MESSAGE_CHARS = 1000  # a failure's message is kept (and classified) up to this long; a line may hold 16 MiB


class NcclSignature(msgspec.Struct):
    """One recognised failure: what (``kind``), where (rank, host, pid, device, peer), the line and how often."""

    kind: str
    rank: int | None
    detail: str
    line: int
    host: str | None = None
    pid: int | None = None
    device: int | None = None
    peer: str | None = None
    count: int = 1


class NcclLogRecord(msgspec.Struct):
    """What an NCCL debug log showed: NCCL version, the failure signatures found, the ranks and hosts seen."""

    nccl_version: str | None = None
    signatures: list[NcclSignature] = []
    ranks_seen: list[int] = []
    hosts: list[str] = []
    lines: int = 0
    comms_initialised: int = 0  # communicator ranks whose "Init COMPLETE" the log shows
    comms_unfinished: int = 0  # communicator ranks whose "Init START" has no "Init COMPLETE" after it


class PlacementResult(msgspec.Struct):
    """One nccl-tests result column group (out-of-place or in-place): time, algorithm and bus bandwidth, wrong count."""

    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    wrong: int | None
    error: float | None = None


class NcclTestRow(msgspec.Struct):
    """One message size: out-of-place figures at the top level, in-place under ``in_place``."""

    size_bytes: int
    count: int | None
    type: str | None
    redop: str | None
    root: int | None
    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    wrong: int | None
    error: float | None = None
    in_place: PlacementResult | None = None


class NcclTestFailure(msgspec.Struct):
    """One failure nccl-tests reported: host, kind, source file and line, message and its signature."""

    host: str | None
    kind: str
    file: str
    line: int
    message: str
    signature: str | None = None  # the NCCL failure signature the message matches (parsers/nccl_log.py)


class NcclFailureGroup(msgspec.Struct):
    """Every ``Test ... failure`` line of one signature from one host: the exact count and the first distinct
    lines (``examples``, at most :data:`FAILURE_EXAMPLES`).

    A log of an aborted job at scale repeats one failure per rank and per iteration (hundreds of
    thousands of lines); counting them by group keeps the record, and the findings made from it,
    the size of the distinct failures rather than of the log. ``other_hosts`` marks the group
    that counts a signature's lines from hosts seen after :data:`MAX_FAILURE_GROUPS` groups
    (its ``host`` is then ``None``).
    """

    signature: str | None
    host: str | None
    count: int = 0
    examples: list[NcclTestFailure] = []
    other_hosts: bool = False


class NcclTestDevice(msgspec.Struct):
    """One ``# Using devices`` line: which GPU (by its CUDA name) a rank ran on, and where."""

    rank: int
    host: str
    name: str


class NcclTestsRecord(msgspec.Struct):
    """A whole nccl-tests run: the test, ranks and hosts, versions, every size's row and the average bus bandwidth."""

    test: str | None = None
    nranks: int | None = None
    nranks_inferred: bool = False
    hosts: list[str] = []
    nccl_version: str | None = None
    nccl_tests_version: str | None = None
    rows: list[NcclTestRow] = []
    avg_busbw_gbps: float | None = None
    avg_busbw_source: str | None = None
    avg_busbw_failed: bool = False  # "Avg bus bandwidth : X FAILED": the run's own floor (NCCL_TESTS_MIN_BW) missed
    peak_busbw_gbps: float | None = None
    peak_size_bytes: int | None = None
    peak_busbw_in_place_gbps: float | None = None
    wrong_total: int | None = None
    max_error: float | None = None
    out_of_bounds: int | None = None
    errors: list[NcclTestFailure] = []  # the first and last KEPT_FAILURES only
    errors_total: int = 0  # every ``Test ... failure`` line, listed or not
    errors_omitted: int = 0  # failure lines between the first and last KEPT_FAILURES not listed in ``errors``
    failure_groups: list[NcclFailureGroup] = []  # every failure, counted by group
    # ``NCCL WARN`` lines whose job-log signature names a failure, by (signature, host): the cause a failure line
    # does not name (its examples' kind is "NCCL WARN"); judged only for a run that stopped
    warn_causes: list[NcclFailureGroup] = []
    incomplete: list[str] = []
    gpus: list[NcclTestDevice] = []
    rows_total: int = 0
    rows_omitted: int = 0  # rows between the first and last KEPT_ROWS not listed in ``rows``
    busbw_by_size: dict[int, float] = {}  # best out-of-place busbw per size
    wrong_sizes: list[int] = []  # sizes of the rows with #wrong > 0, in log order

    def failure_count(self) -> int:
        """Every failure line the log held (a record built by hand may list ``errors`` only)."""
        return max(self.errors_total, len(self.errors))

    def failures_by_group(self) -> list[NcclFailureGroup]:
        """The failures by (signature, host) in first-seen order: ``failure_groups``, or, for a record that
        lists ``errors`` only, the groups made from them."""
        if self.failure_groups or not self.errors:
            return self.failure_groups
        groups: dict[tuple[str | None, str | None], NcclFailureGroup] = {}
        for failure in self.errors:
            group = groups.setdefault((failure.signature, failure.host),
                                      NcclFailureGroup(failure.signature, failure.host))
            group.count += 1
            if len(group.examples) < FAILURE_EXAMPLES and failure not in group.examples:
                group.examples.append(failure)
        return list(groups.values())

    def best_busbw(self, min_bytes: int = 0) -> tuple[float, int] | None:
        """The highest out-of-place busbw at ``min_bytes`` or more, and its size (the smallest on a tie)."""
        found = [(b, s) for s, b in self.busbw_by_size.items() if s >= min_bytes]
        return max(found, key=lambda b: (b[0], -b[1])) if found else None
