"""A ``dcgmi diag`` run as read from its JSON (``-j``) or its text table: tests and outcome."""

from __future__ import annotations

import msgspec


class DcgmTest(msgspec.Struct):
    """One diagnostic test (``PCIe``, ``Targeted Power``, 4.x ``memory``...) and its outcome.

    ``gpus`` lists the GPU ids that failed or warned; ``gpu_status`` every per-GPU status
    the output gave; ``messages`` the warnings/errors, ``info`` the informational lines;
    ``error_severities`` the severity level DCGM printed beside each code (4.x ``-j``).
    ``rows`` are DCGM's own labelled table rows for the test, as printed (label, first line of
    the cell: ``["Targeted Power", "Pass - GPUs: 0, 2, 3"]``, ``["Warning", "GPU 1 Max power..."]``),
    which the SageMaker report quotes verbatim; empty for ``-j`` JSON, which has no table.
    """

    category: str | None
    name: str
    status: str
    gpus: list[int] = []
    gpu_status: dict[str, str] = {}
    messages: list[str] = []
    info: list[str] = []
    error_ids: list[int] = []
    rows: list[list[str]] = []
    error_severities: dict[str, int] = {}  # -j 4.x: error_id -> DCGM's error_severity


class DcgmDiagRecord(msgspec.Struct):
    """A whole diagnostic run: versions, tests and the overall outcome.

    ``overall`` is the worst test status, or ``"error"`` when DCGM reported that the run
    itself failed (``errors`` then holds DCGM's lines and ``return_code`` its code).
    ``fragment`` is the number of tests shown when the text is rows pasted without the
    table's ``Diagnostic | Result`` header: the tests it does not show are not assumed.
    ``mig_gpus`` are the GPUs the diagnostic refused to test because of their MIG configuration
    (its "GPU N's MIG configuration is incompatible" answer): DCGM states the GPU is in MIG mode.
    """

    format: str
    dcgm_version: str | None = None
    driver_version: str | None = None
    gpu_device_ids: list[str] = []
    tests: list[DcgmTest] = []
    overall: str = "pass"
    errors: list[str] = []
    return_code: int | None = None
    incomplete: list[str] = []
    fragment: int | None = None
    mig_gpus: list[int] = []


class DcgmHealthIncident(msgspec.Struct):
    """One watched system of one entity in ``dcgmi health -c``: ``GPU 0``, ``NVLINK system``, its health
    (``Healthy``/``Warning``/``Failure``/``Internal error``, as DCGM prints it) and DCGM's messages."""

    entity: str
    system: str
    health: str
    messages: list[str] = []


class DcgmHealthRecord(msgspec.Struct):
    """``dcgmi health -c`` (table or ``-j``): the overall health DCGM's watches report and each incident;
    ``errors`` are dcgmi's own answers when it could not check (``overall`` is then ``None``)."""

    overall: str | None
    incidents: list[DcgmHealthIncident] = []
    errors: list[str] = []


class DcgmDmonSample(msgspec.Struct):
    """One row of ``dcgmi dmon``: the entity (``GPU``, ``GPU-I``, ``GPU-CI``, ``Switch``, ``LINK``, ``CPU``...), its
    id, and each field's value by the short name dmon's header gives it (``TMPTR``, ``POWER``, ``GRACT``...);
    ``N/A`` and a blank cell (a field the entity does not have) read as ``None``."""

    entity: str
    index: int
    values: dict[str, float | None] = {}


class DcgmDmonRecord(msgspec.Struct):
    """``dcgmi dmon``: the fields its header names, one sample per entity row, and dmon's own error lines
    (``Error setting watches. Result: -6: Feature not supported``) when it could not sample them."""

    fields: list[str] = []
    samples: list[DcgmDmonSample] = []
    errors: list[str] = []


class DcgmStatsGpu(msgspec.Struct):
    """One ``GPU ID: <n>`` (or ``Summary``) box of ``dcgmi stats``: each row's label and value as printed, by
    label (``Double Bit ECC Errors``, ``Critical XID Errors``, ``Overall Health``...)."""

    gpu: int | None
    rows: dict[str, str] = {}
    fragment: bool = False  # rows pasted without their box's header: which GPU (or the summary) is not shown


class DcgmStatsRecord(msgspec.Struct):
    """``dcgmi stats -j <job>`` / ``-p <pid>``: DCGM's statistics of a job or process, one box per GPU;
    ``incomplete`` names each box that ends before its ``Overall Health`` row (a cut paste)."""

    gpus: list[DcgmStatsGpu] = []
    incomplete: list[str] = []
