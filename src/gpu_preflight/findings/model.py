"""The cluster report as typed, frozen values: what ``report.json`` holds, one class per block.

Every reader used to walk one untyped dict by string key, and a block that one reader
spelled differently from another (or that a later step mutated) made formats disagree.
These classes are the report's one layout: :mod:`~gpu_preflight.report.schema` generates
the shipped JSON Schema from them, and ``to_dict`` gives exactly the JSON the report has
always had (same keys, same order, same types), so a report read back with ``from_dict``
and written again is the same file.

They are ``msgspec.Struct``\\ s, so neither direction is written by hand: ``to_dict`` is
``msgspec.to_builtins`` (fields in declaration order: the field order *is* the JSON key
order) and ``from_dict`` is ``msgspec.convert``, which checks every value against its type
and names the bad one's path (``Expected `str`, got `int` - at `$.findings[3].status```).
A new field is one line. Three conventions carry what the hand-written code did:

- A class whose fields are *left out when None* (a node's ``operator_action``, a section's
  ``dcgm``) is declared ``omit_defaults=True`` and only those fields have a default
  (``None``); the others are required. Classes that are written whole and read leniently
  from an older or trimmed report (the top level, ``run``, ``tool``) keep defaults and
  ``omit_defaults=False``.
- An *open* block keeps the keys it does not know (a localisation block in the summary, a
  node's ``identity``, a newer version's additions) in an :data:`EXTRA` field, written in
  that field's place: the field's position is where the unknown keys go.
- A field a record may lack while a null is a value (an fi_pingpong side that never ran has
  no ``peer``; a server's ``peer`` is null) defaults to ``msgspec.UNSET``: no key when unset.

High-volume leaf records (one per GPU, one per check of a node, one per measured node pair,
one per RDMA port, one per sampled phase of a GPU under load) are ``TypedDict``\\ s; a
collective's entry and its sizes (60,000 and 240,000 at 10,000 nodes) are Structs the garbage
collector does not track, which rank 0's readers of every node's collectives skip all the same
(:meth:`NodeSections.collectives`: typing them is what costs there). Every block of a node's
section is typed but ``facts``. A 10,000-node report's node sections are typed on first read
(:class:`NodeSections`), and a reader walking one block over every node types only that block
(:meth:`NodeSections.blocks`).

What stays a JSON object (``JsonObject``) or ``Any``, and why:

- ``NodeSection.facts``: every probe's record as JSON, laid out by the probes' own record
  classes (:mod:`gpu_preflight.records`), which the checks read; above
  ``report.detail_max_nodes`` only the few facts the cluster checks read travel
  (:func:`~.canonical.summary_facts`), and the report's readers look up a key or two.
- ``ReportFinding.details``, ``observed`` and ``expected``: each check's own values (a number,
  a list of subjects, a per-GPU map, a rolled-up pass's subjects...), as many shapes as there are
  checks, owned by the rules (:class:`gpu_preflight.model.Finding` holds them so too).
- each open block's ``extra``: the keys it does not know, by design.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, NamedTuple, NotRequired, TypedDict, TypeVar

import msgspec
from msgspec import UNSET, Struct, UnsetType, field
from msgspec.structs import replace

from ..model import SavedArtifact, Status
from ..records.dcgm import DcgmDiagRecord

__all__ = ["EXTRA", "Assessment", "CheckRow", "ClusterCheck", "ClusterInfo", "ClusterReport", "ClusterSummary",
           "ClusterTopology", "CollectiveSize", "CollectiveTest", "ComponentScore", "ComponentTarget", "Connectivity",
           "ConnectivityCell", "ConnectivityPair", "CostBenefit", "CpuInfo", "DcgmParsedOutput", "DiskInfo",
           "EarlierScore", "GpuEntry", "HealthAssessment", "HealthScores", "Issue", "JsonObject", "LoadPhase",
           "LoadSeries", "LoadStats", "LoadSummary", "MemoryInfo", "MissingCore", "NodeInfo", "NodeSection",
           "NodeSections", "Number", "OverallScore", "OverallTarget", "Readiness", "ReadinessLevels",
           "Recommendation", "ReportFinding", "RunInfo", "Schedule", "ScheduleItem", "ScoreCap", "ScoreDeduction",
           "ScoreMeasurement", "ScoreSettings", "StabilityRow", "SummaryClusterInfo", "SystemSection", "Targets",
           "Tool", "Trend", "WorkPerWatt", "in_field_order", "merged_section"]

JsonObject = dict[str, Any]
# A JSON number: an integer stays one when read back and written again (``float`` alone would
# turn 45 into 45.0); the schema calls it "number", which integers are.
Number = int | float
# The encoded name of an open block's field for the keys it does not know (spliced into the
# block in its place on writing, gathered into it on reading): no report key is spelled so.
EXTRA = "__unknown_keys__"

_B = TypeVar("_B", bound="_Block")


Older = Mapping[str, Callable[[Mapping[str, Any]], Any]]  # key -> what an older report without it reads as


def _none(_: Mapping[str, Any]) -> None:
    return None


def _zero(_: Mapping[str, Any]) -> int:
    return 0


def _dict(_: Mapping[str, Any]) -> JsonObject:
    return {}


def _list(_: Mapping[str, Any]) -> list[Any]:
    return []


class _Block(Struct, frozen=True):
    """A block of the report: ``to_dict`` is its JSON object, ``from_dict`` reads one back (validated).

    ``OLDER`` names the keys a report written by an earlier version may lack and what each
    reads as (given the block's JSON object): the one place an older layout is upgraded, so
    that the types themselves say what a report holds now.
    """

    OLDER: ClassVar[Older] = {}

    @classmethod
    def upgrade(cls, data: Mapping[str, Any]) -> Mapping[str, Any]:
        """``data`` in the current layout where an older one differs in more than a missing key
        (``data`` itself where not: what most blocks do)."""
        return data

    def to_dict(self) -> JsonObject:
        """This block as its JSON object (the keys in field order, free-form values as they are)."""
        return _spliced(self, msgspec.to_builtins(self, enc_hook=_enc_hook))

    @classmethod
    def from_dict(cls: type[_B], data: Mapping[str, Any]) -> _B:
        """The block of a JSON object; ``msgspec.ValidationError`` (a ``ValueError``) naming the
        path of a missing or mistyped value."""
        return msgspec.convert(_prepared(cls, data), cls, dec_hook=_dec_hook)

    @classmethod
    def many_from_dicts(cls: type[_B], data: Sequence[Mapping[str, Any]]) -> list[_B]:
        """The blocks of a list of JSON objects, in one conversion (``from_dict`` per object would
        look the class up again for each of a 10,000-node report's findings)."""
        prepared = data if _layout(cls).plain else [_prepared(cls, d) for d in data]
        return msgspec.convert(prepared, list[cls], dec_hook=_dec_hook)  # type: ignore[valid-type]


def _enc_hook(value: Any) -> Any:
    if isinstance(value, NodeSections):
        return {}  # placed by ClusterReport.to_dict as they are: copying 10,000 sections is not needed
    raise NotImplementedError(f"no JSON form for {type(value).__name__}")


def _dec_hook(tp: type, value: Any) -> Any:
    if tp is NodeSections and isinstance(value, Mapping):
        return NodeSections(value)
    raise NotImplementedError(f"no {tp.__name__} from {type(value).__name__}")


class _Layout(NamedTuple):
    known: frozenset[str] | None  # an open block's known keys (None: a closed block)
    older: Older
    upgrades: bool  # the class has its own :meth:`_Block.upgrade`
    one: tuple[tuple[str, type], ...]  # fields holding a block that needs preparing (or splicing)
    many: tuple[tuple[str, type], ...]  # fields holding a list of such blocks

    @property
    def plain(self) -> bool:
        """Nothing to prepare or splice in this block or below it."""
        return self.known is None and not self.older and not self.upgrades and not self.one and not self.many


@functools.cache
def _layout(cls: type) -> _Layout:
    fields = msgspec.structs.fields(cls)
    known = frozenset(f.encode_name for f in fields if f.encode_name != EXTRA)
    one, many = [], []
    for f in fields:
        args = typing.get_args(f.type) if typing.get_origin(f.type) is list else ()
        block = _optional(f.type)
        if isinstance(block, type) and issubclass(block, _Block) and not _layout(block).plain:
            one.append((f.encode_name, block))
        elif args and isinstance(args[0], type) and issubclass(args[0], _Block) and not _layout(args[0]).plain:
            many.append((f.encode_name, args[0]))
    upgrades = any("upgrade" in vars(c) for c in cls.__mro__ if c is not _Block)
    return _Layout(known if len(known) < len(fields) else None, getattr(cls, "OLDER", {}), upgrades, tuple(one),
                   tuple(many))


def _optional(tp: Any) -> Any:
    """``X`` of a field typed ``X | None`` (a block left out or null when absent), else the type itself."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (types.UnionType, typing.Union) and len(args) == 2 and type(None) in args:
        return next(a for a in args if a is not type(None))
    return tp


def _spliced(block: _Block, out: JsonObject) -> JsonObject:
    """``out`` (``block``'s builtins) with each open block's unknown keys in its :data:`EXTRA` field's place."""
    layout = _layout(type(block))
    for name, _ in layout.one:
        if out.get(name) is not None:
            out[name] = _spliced(getattr(block, name), out[name])
    if layout.known is None or EXTRA not in out:
        return out
    if not out[EXTRA]:  # a block written whole (no omit_defaults) with nothing unknown
        del out[EXTRA]
        return out
    spliced: JsonObject = {}
    for key, value in out.items():
        if key == EXTRA:
            spliced.update(value)
        else:
            spliced[key] = value
    return spliced


def in_field_order(cls: type[_Block], data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` (a JSON object of block ``cls``) with its keys in the order ``cls.to_dict`` writes
    them: the fields in class order, keys the class does not know at its :data:`EXTRA` field's
    place (last where it has none). What the aggregation merges into a node section it keeps as
    a dict goes through here, so such a key lands where the field stands in the class, as a
    typed section would write it, wherever the merge added it."""
    names = _field_names(cls)
    out: dict[str, Any] = {}
    for name in names:
        if name == EXTRA:
            out.update((k, v) for k, v in data.items() if k not in names)
        elif name in data:
            out[name] = data[name]
    out.update((k, v) for k, v in data.items() if k not in out)
    return out


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.encode_name for f in msgspec.structs.fields(cls))


def _prepared(cls: type, data: Mapping[str, Any]) -> Mapping[str, Any]:
    """``data`` as ``cls`` reads it: the keys an older layout lacks filled in (:attr:`_Block.OLDER`),
    the keys an open block does not know gathered into its :data:`EXTRA` field, in this block
    and the blocks below it. The same object when there is nothing to do (a set comparison or
    two per block)."""
    layout = _layout(cls)
    if layout.plain or not isinstance(data, Mapping):
        return data  # (not a JSON object: the conversion says so, with its path)
    changed: dict[str, Any] | None = None
    if layout.upgrades:
        upgraded = cls.upgrade(data)  # type: ignore[attr-defined]
        changed, data = (None, data) if upgraded is data else (dict(upgraded), upgraded)
    if layout.older and not layout.older.keys() <= data.keys():
        changed = {**data, **{k: read(data) for k, read in layout.older.items() if k not in data}}
    for name, child in layout.one:
        value = data.get(name)
        prepared = _prepared(child, value) if value is not None else value
        if prepared is not value:
            changed = dict(data) if changed is None else changed
            changed[name] = prepared
    for name, child in layout.many:
        values = data.get(name)
        if not isinstance(values, list):
            continue
        prepared_list: list[Any] | None = None
        for i, value in enumerate(values):
            prepared = _prepared(child, value)
            if prepared is not value:
                prepared_list = list(values) if prepared_list is None else prepared_list
                prepared_list[i] = prepared
        if prepared_list is not None:
            changed = dict(data) if changed is None else changed
            changed[name] = prepared_list
    if layout.known is not None and not data.keys() <= layout.known:
        base = changed if changed is not None else data
        changed = {k: v for k, v in base.items() if k in layout.known}
        changed[EXTRA] = {k: v for k, v in data.items() if k not in layout.known}
    return data if changed is None else changed


class GpuEntry(TypedDict):
    """One GPU in a node's ``gpu`` block (``gpu_<index>``); readings a probe could not take are null."""

    name: str | None
    driver_version: str | None
    memory_total_mb: int | None
    memory_used_mb: int | None
    memory_free_mb: int | None
    temperature_c: Number | None
    utilization_percent: Number | None
    power_draw_w: Number | None
    # Reports written before these two were read lack them: read, not required (the schema says a report has them).
    power_limit_w: NotRequired[Number | None]
    slowdown_temperature_c: NotRequired[Number | None]
    uuid: str | None
    serial: str | None
    pci_bus_id: str | None
    vbios: str | None
    lost: bool | None


class ReportFinding(_Block, frozen=True, kw_only=True, omit_defaults=True):
    """A finding as the report lists it: the node key it belongs to (``node_3``, ``cluster``)
    and :class:`~gpu_preflight.model.Finding`'s fields. In ``cluster_checks`` the node is
    implied and ``node`` is ``None`` (no key)."""

    node: str | None = None
    check_id: str
    status: Status
    subject: str
    code: str
    summary: str
    observed: Any
    expected: Any
    unit: str | None
    recommendation: str | None
    details: JsonObject

    OLDER: ClassVar[Older] = {"observed": _none, "expected": _none, "unit": _none, "recommendation": _none,
                              "details": _dict}

    def per_subject(self) -> Iterator[ReportFinding]:
        """This finding, or a rolled-up pass expanded back to one finding per subject.

        The typed form of :func:`gpu_preflight.model.per_subject`: at scale a cluster check
        reports its passes as one finding whose ``details.subjects`` maps each subject to its
        observed value; a reader of per-GPU values sees no difference.
        """
        subjects = self.details.get("subjects") if self.details.get("rolled_up") else None
        if not isinstance(subjects, Mapping):
            yield self
            return
        shared = {k: v for k, v in self.details.items() if k not in ("rolled_up", "subjects")}
        for subject, observed in subjects.items():
            yield replace(self, subject=subject, observed=observed, details=shared)


class CheckRow(TypedDict):
    """A check of a node, as its section lists it: status, time and how many findings."""

    check_id: str
    title: str
    status: str
    duration_s: Number
    findings: int


class ClusterCheck(_Block, frozen=True, kw_only=True):
    """A cluster-level check (over the gathered workloads) with its findings."""

    check_id: str
    title: str
    status: Status
    duration_s: Number
    findings: list[ReportFinding]


class ClusterSummary(_Block, frozen=True, kw_only=True, omit_defaults=True):
    """``cluster_summary`` (and each node's ``summary``): the verdict, the SageMaker test
    groups, issues, recommendations and figures; on the cluster also the assessment blocks.

    ``operator_action`` (a node's summary only, and only when there is one) is the strongest
    action the node's findings call for (:func:`gpu_preflight.actions.node_action`): the one
    value a scheduler hook routes the node on (``reset_gpu``, ``isolate_node``...).

    ``unlisted`` counts the PASS/SKIP findings a large cluster's nodes kept to themselves;
    ``earlier_scores`` are the history's (trends); the health scores, recommendations by
    urgency, cost-benefit and assessment are an :class:`Assessment`'s. Blocks a run adds (a
    localisation block, the reachability matrix) sit in ``extra``, before the history's.
    """

    overall_status: Status
    exit_code: int
    test_results: dict[str, bool | None]
    test_results_notes: dict[str, str] | None = None  # why a group is false untested
    cluster_info: SummaryClusterInfo
    performance_summary: dict[str, Number]
    issues: list[str]
    recommendations: list[str]
    counts: dict[str, int]
    operator_action: str | None = None
    unlisted: dict[str, dict[str, int]] | None = None
    extra: JsonObject = field(default_factory=dict, name=EXTRA)
    earlier_scores: list[EarlierScore] | None = None
    health_scores: HealthScores | None = None
    recommendations_by_urgency: dict[str, list[Recommendation]] | None = None
    cost_benefit: CostBenefit | None = None
    assessment: HealthAssessment | None = None

    OLDER: ClassVar[Older] = {"test_results": _dict, "cluster_info": _dict, "performance_summary": _dict,
                              "issues": _list, "recommendations": _list}


class EarlierScore(_Block, frozen=True, kw_only=True):
    """One earlier run's health scores, as the history filed them (``cluster_summary.earlier_scores``,
    oldest first): what an assessment's trends compare today's scores with.

    ``components`` maps each component (and ``overall``) to its score, None where it was not
    tested; it is empty for a run filed before the history kept scores (the run happened,
    its scores are unknown)."""

    run: int
    timestamp: str
    components: dict[str, Number | None]


class SummaryClusterInfo(_Block, frozen=True, kw_only=True, omit_defaults=True):
    """``cluster_summary.cluster_info`` (and each node summary's): the SageMaker health-check
    layout keeps this key and leaves it empty (``{}``); what is known about the cluster is the
    report's top-level :class:`ClusterInfo`. Not that class: its fields are required and written
    whole (``expected_total_gpus: null``), which an empty block cannot be. Keys a report from
    elsewhere put here are kept as they are (``extra``)."""

    extra: JsonObject = field(default_factory=dict, name=EXTRA)


class NodeInfo(_Block, frozen=True, kw_only=True, omit_defaults=True):
    """``node_info``: the SageMaker layout's host ranks, plus profile and config sources.

    A distributed run adds the node's ``identity`` (in ``extra``)."""

    hostname: str
    current_host: str
    world_size: int
    rank: int
    local_rank: int
    host_rank: int
    host_count: int
    gpus_per_host: int
    profile: str | None
    config_sources: list[str]
    node_rank: int | None = None
    extra: JsonObject = field(default_factory=dict, name=EXTRA)

    OLDER: ClassVar[Older] = {"hostname": lambda d: d.get("current_host") or "",
                              "current_host": lambda d: d.get("hostname") or "", "world_size": lambda _: 1,
                              "rank": _zero, "local_rank": _zero, "host_rank": _zero, "host_count": lambda _: 1,
                              "gpus_per_host": _zero, "profile": _none, "config_sources": _list}


class ArtifactRef(_Block, frozen=True, kw_only=True):
    """``raw_output_artifact``: where a tool's raw output was saved, the artifact's ``name``, its
    ``file`` and, once the file is written, its ``path`` beside the report (None until then)."""

    name: str
    file: str | None
    path: str | None


class OfiPluginInfo(_Block, frozen=True, kw_only=True, omit_defaults=True):
    """``network.aws_ofi_nccl_plugin``: whether NCCL's net plugin was found, where, and the
    release the library names (``version``: no key where none was read, as older reports have it)."""

    installed: bool
    path: str | None
    version: str | None = None


class FiInfoRun(_Block, frozen=True, kw_only=True):
    """``network.fi_info``: the ``fi_info -p <provider>`` run, how many provider entries it listed,
    their domains and where its output was saved."""

    provider: str | None
    command: list[str] | None
    exit_code: int | None
    error_code: int | None
    provider_count: int
    domains: list[str]
    raw_output_artifact: ArtifactRef | None


class RdmaPort(TypedDict):
    """One RDMA port in ``network.rdma_ports`` (ibstat's view): its device, number, states, rate and link layer."""

    device: str | None
    port: int | None
    state: str | None
    physical_state: str | None
    rate_gbps: Number | None
    link_layer: str | None


class PingpongPair(_Block, frozen=True, kw_only=True):
    """One side of an fi_pingpong pair in ``network.efa_communication_test.pairs``, as the node leader
    recorded it (:func:`gpu_preflight.distributed.pingpong.run_pingpong_pair`, then ``pair`` and
    ``peer_node``): its role, the peer's address, the provider, endpoint and control port, the command,
    exit status, whether it timed out, the tool or the provider was missing, how many connection
    attempts, its time, success, the error, the result table both sides print (``raw_output``) and
    the pair and peer node.

    A side that never ran (its server's node published no address) records only what it knows: its
    role, pair, peer node, success, provider, ``timed_out``, ``rc``, ``raw_output`` and ``error``. The
    fields such a side (or a report's hand-made pair) may lack default to ``UNSET``: no key, while a
    recorded null (a server's ``peer``, a run's ``error``) stays a null. Closed: the leader is the only
    writer."""

    test_role: str
    peer: str | UnsetType | None = UNSET
    provider: str | None
    endpoint: str | UnsetType = UNSET
    port: int | UnsetType = UNSET
    argv: list[str] | UnsetType = UNSET
    rc: int | UnsetType | None = UNSET
    timed_out: bool | UnsetType = UNSET
    missing: bool | UnsetType = UNSET
    provider_missing: bool | UnsetType = UNSET
    attempts: int | UnsetType = UNSET
    duration_s: Number | UnsetType = UNSET
    success: bool
    error: str | UnsetType | None = UNSET
    raw_output: str
    pair: int
    peer_node: int


class PingpongTest(_Block, frozen=True, kw_only=True):
    """``network.efa_communication_test``: a node's fi_pingpong runs, as the SageMaker report shows
    them (the first pair's role, provider and table, and the rank that ran them), plus every pair
    as recorded (``pairs``, read by the latency table)."""

    success: bool
    test_role: str | None
    rank: int | None
    provider: str | None
    raw_output: str | None
    pairs: list[PingpongPair]


class NetworkSection(_Block, frozen=True, kw_only=True, omit_defaults=True):
    """``nodes.node_<i>.network``: EFA providers and devices, the aws-ofi-nccl plugin, the fi_info
    run and the fabric environment; RDMA ports where the node has any, the fi_pingpong test where
    a distributed run ran one. Keys a report from elsewhere adds are kept (``extra``)."""

    aws_ofi_nccl_plugin: OfiPluginInfo
    efa_available: bool
    efa_providers: list[str]
    efa_provider_count: int
    efa_devices: list[str]
    fi_info: FiInfoRun | None
    environment: dict[str, str]
    rdma_ports: list[RdmaPort] | None = None
    efa_communication_test: PingpongTest | None = None
    extra: JsonObject = field(default_factory=dict, name=EXTRA)


# msgspec freezes a subclass of a mutable Struct (the parser fills its record in place); mypy's dataclass rule does not
class DcgmParsedOutput(DcgmDiagRecord, frozen=True):  # type: ignore[misc]
    """``dcgm.diagnostics.<level>.parsed_output``: the dcgmi parser's record
    (:class:`~gpu_preflight.records.dcgm.DcgmDiagRecord`: its fields in its order, each test a
    :class:`~gpu_preflight.records.dcgm.DcgmTest`, so a field the parser adds is one here) with the
    SageMaker report's keys: ``gpu_device_ids`` as DCGM prints it (``"2237,2237"``, in the record's
    place), the list in ``gpu_device_id_list``, ``test_results.<category>.<test>`` (DCGM's cells,
    categories lower-case) and ``overall_status`` (``Pass``, ``Fail``, ``Mixed``, ``Error``).

    Written whole, as the record is (no ``omit_defaults``); keys a report before one of the
    parser's fields lacks read as the record's defaults, and keys the record does not know are
    not kept (the parser is the only writer)."""

    gpu_device_ids: str = ""  # type: ignore[assignment]  # the record's list, as DCGM prints it
    gpu_device_id_list: list[str] = field(default_factory=list)
    test_results: dict[str, dict[str, str]] = field(default_factory=dict)
    overall_status: str = ""


class DcgmLevel(_Block, frozen=True, kw_only=True):
    """One ``dcgmi diag`` level in ``dcgm.diagnostics``: the SageMaker report's keys (``success``,
    ``parsed_output``, ``raw_output``, ``stdout``, ``stderr``, ``exit_code_zero``) and ours.
    ``parsed_output`` is the parser's record with that report's keys beside it."""

    success: bool
    level: int | None
    command: list[str] | None
    exit_code: int | None
    exit_code_zero: bool
    duration_s: Number | None
    overall_status: str
    parsed_output: DcgmParsedOutput | None
    raw_output: str
    raw_output_truncated: bool
    stdout: str
    stderr: str
    error: str | None
    raw_output_artifact: ArtifactRef | None


class DcgmDiagnostics(_Block, frozen=True, kw_only=True, omit_defaults=True):
    """``dcgm.diagnostics``: level 1 as ``basic``, level 2 or 3 as ``extended``; a level that did
    not run has no key."""

    basic: DcgmLevel | None = None
    extended: DcgmLevel | None = None
    extra: JsonObject = field(default_factory=dict, name=EXTRA)


class DcgmSection(_Block, frozen=True, kw_only=True, omit_defaults=True):
    """``nodes.node_<i>.dcgm``: whether dcgmi is installed, each level that ran, and why one did
    not (``reason``, no key where every level ran)."""

    dcgm_available: bool
    diagnostics: DcgmDiagnostics
    reason: str | None = None
    extra: JsonObject = field(default_factory=dict, name=EXTRA)


class NcclTestsRun(_Block, frozen=True, kw_only=True):
    """One local nccl-tests binary's run in ``nccl.nccl_tests``: its command and summary figures."""

    success: bool
    gpus: int | None
    command: list[str] | None
    exit_code: int | None
    test: str | None
    nranks: int | None
    avg_busbw_gbps: Number | None
    peak_busbw_gbps: Number | None
    wrong_total: int | None
    error: str | None
    raw_output_artifact: ArtifactRef | None


class CollectiveSize(_Block, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """One message size of a collective's sweep (``communication_tests.<key>.results``), as the
    rank measured it (:meth:`~gpu_preflight.workloads.collectives.CollectiveResult.to_dict`): bytes,
    time, algorithm and bus bandwidth (``bandwidth_gbps``: the bus bandwidth under the SageMaker
    report's name), latency, wrong elements and the fastest and slowest rank's time. Only
    ``size_bytes`` and ``busbw_gbps`` (what the curves and tables read) are required; the others
    have no key in a row written without them (reports before ``time_us_min``, the tests'
    synthetic sweeps). A bandwidth that was not finite was written as null.

    Closed and untracked by the garbage collector (``gc=False``: it holds no containers), as
    :class:`CollectiveTest` is."""

    size_bytes: int
    time_us: Number | None = None
    algbw_gbps: Number | None = None
    busbw_gbps: Number | None
    bandwidth_gbps: Number | None = None
    latency_ms: Number | None = None
    wrong: int | None = None
    time_us_min: Number | None = None
    time_us_max: Number | None = None


class CollectiveTest(_Block, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """One collective in ``nccl.communication_tests`` (by ``<scope>_<op>``): the SageMaker layout's
    fields (``success``, ``test_type``, ``group``, ``processes_tested``, ``results``,
    ``peak_bandwidth_gbps``, ``error``) and the gathered entry's own (``op``, ``ranks``, ``wrong``,
    ``scope``), in the order the rank writes them. No key for ``ranks`` in the copy listed on the
    other nodes of a group (the group's rank list is on its home node only), for ``wrong`` in a
    failure's entry, and for ``group``, ``scope`` and ``test_type`` where a hand-made entry had none.

    A closed block (no ``extra``): it sits in a map by key, which the report model does not
    prepare; the runner and the aggregation are its only writers. Not tracked by the garbage
    collector (``gc=False``): a 10,000-node report types 60,000 of them (and 240,000 sizes) into
    a heap of tens of millions of objects, and they hold no reference cycles (their lists hold
    numbers and sizes).
    """

    op: str
    group: str | None = None
    ranks: list[int] | None = None
    success: bool
    processes_tested: int
    error: str | None
    wrong: int | None = None
    peak_bandwidth_gbps: Number | None
    results: list[CollectiveSize]
    scope: str | None = None
    test_type: str | None = None


class NcclSection(_Block, frozen=True, kw_only=True, omit_defaults=True):
    """``nodes.node_<i>.nccl``: whether nccl-tests is installed, each local run by binary name, and
    the collectives a distributed run measured (``communication_tests``, by ``<scope>_<op>``,
    filled by the cluster aggregation). ``reason``: why nothing ran (no key otherwise).

    The readers that walk every node's collectives on rank 0 read them as JSON objects
    (:meth:`NodeSections.collectives`: typing them is what costs there)."""

    nccl_tests_available: bool
    nccl_tests: dict[str, NcclTestsRun]
    communication_tests: dict[str, CollectiveTest]
    reason: str | None = None
    extra: JsonObject = field(default_factory=dict, name=EXTRA)

    # Reports before the local runs or the collectives were listed lack these keys; a trimmed one
    # may list only the collectives (no nccl-tests known).
    OLDER: ClassVar[Older] = {"nccl_tests_available": lambda _: False, "nccl_tests": _dict,
                              "communication_tests": _dict}


class MemoryInfo(_Block, frozen=True, kw_only=True):
    """``system.memory``: the node's memory in GB and the share in use (null where the total was 0)."""

    total_gb: Number
    available_gb: Number
    used_percent: Number | None


class DiskInfo(_Block, frozen=True, kw_only=True):
    """``system.disk``: the first checked disk path, its size and free space in GB, the share in use."""

    path: str | None
    total_gb: Number
    free_gb: Number
    used_percent: Number | None


class CpuInfo(_Block, frozen=True, kw_only=True):
    """``system.cpu``: the CPU usage, core count and 1-minute load average as the system probe read them."""

    usage_percent: Number | None
    count: Number
    load_1m: Number | None


class SystemSection(_Block, frozen=True, kw_only=True, omit_defaults=True):
    """``nodes.node_<i>.system``: memory, disk and CPU, each only where the system probe read it
    (no key otherwise: a replayed or failed probe writes ``{}``). Keys a report from elsewhere
    adds are kept (``extra``)."""

    memory: MemoryInfo | None = None
    disk: DiskInfo | None = None
    cpu: CpuInfo | None = None
    extra: JsonObject = field(default_factory=dict, name=EXTRA)


class LoadStats(TypedDict):
    """One sampled quantity over a phase in ``load.<gpu>.phases``: its min, median and max."""

    min: Number
    median: Number
    max: Number


class LoadPhase(_Block, frozen=True, kw_only=True, omit_defaults=True):
    """One workload phase of a GPU's under-load summary (``load.<gpu>.phases.<phase>``): its sample
    count, start and length, the statistics of each quantity read in it, the share of samples with
    each clock-event reason bit set and the peak power as a share of the limit (no key for a
    quantity never read, or a GPU without a power limit)."""

    n: int
    start_s: Number | None = None
    seconds: Number
    sm_mhz: LoadStats | None = None
    mem_mhz: LoadStats | None = None
    power_w: LoadStats | None = None
    temp_c: LoadStats | None = None
    mem_temp_c: LoadStats | None = None
    util_gpu: LoadStats | None = None
    reason_share: dict[str, Number]
    power_max_fraction: Number | None = None


class LoadSeries(_Block, frozen=True, kw_only=True, omit_defaults=True):
    """``load.<gpu>.series``: the downsampled samples the plots draw (time, phase index, SM clock,
    power, temperature); ``{}`` where the cluster was too large to send series."""

    t: list[Number] | None = None
    phase: list[int] | None = None
    sm_mhz: list[Number | None] | None = None
    power_w: list[Number | None] | None = None
    temp_c: list[Number | None] | None = None


class WorkPerWatt(TypedDict):
    """One GEMM precision's ``load.<gpu>.work_per_watt`` entry: TFLOP/s over the phase's median power."""

    tflops: Number
    power_w_median: Number
    tflops_per_watt: Number
    samples: int


class LoadSummary(_Block, frozen=True, kw_only=True, omit_defaults=True):
    """``nodes.node_<i>.load.<gpu>``: what a rank's under-load sampler sent (``nvml_sampler.summarize``):
    the GPU's limits (``static``), the sampling rate and count, per-phase statistics, the series,
    NVML's refusals by code, why the GPU was lost (null if not), the ECC counters' growth, and the
    work per watt where the rank ran GEMMs. ``hz``, ``samples`` and ``phase_names``: no key in a
    summary built without them (the tests' synthetic payloads).

    A closed block (no ``extra``): it sits in a map by GPU label, which the report model does not
    prepare, so a key this class does not know would be dropped on reading; the sampler is the
    only writer."""

    gpu: str
    static: dict[str, Number | None]
    hz: Number | None = None
    samples: int | None = None
    phase_names: list[str] | None = None
    phases: dict[str, LoadPhase]
    series: LoadSeries
    errors: dict[str, int]
    lost: str | None
    ecc_delta: dict[str, int]
    work_per_watt: dict[str, WorkPerWatt] | None = None


class NodeSection(_Block, frozen=True, kw_only=True, omit_defaults=True):
    """``nodes.node_<i>``: one node's info, summary, GPUs, host (``system``), diagnostics
    (``network``, ``dcgm``, ``nccl``), checks, facts and its GPUs under load (``load``, by GPU
    label). ``checks`` is a list of rows, or on clusters above ``report.detail_max_nodes`` a map
    of check id to status (and no full ``facts``)."""

    timestamp: str
    node_info: NodeInfo
    summary: ClusterSummary
    gpu: dict[str, GpuEntry]
    system: SystemSection
    network: NetworkSection | None = None
    dcgm: DcgmSection | None = None
    nccl: NcclSection | None = None
    checks: list[CheckRow] | dict[str, str]
    facts: JsonObject | None = None
    duration_s: Number
    load: dict[str, LoadSummary] | None = None
    extra: JsonObject = field(default_factory=dict, name=EXTRA)

    OLDER: ClassVar[Older] = {"system": _dict, "checks": _list, "duration_s": lambda _: 0.0}

    @classmethod
    def upgrade(cls, data: Mapping[str, Any]) -> Mapping[str, Any]:
        """Reports before the findings moved to the top level listed each check's findings in its
        row: a row now counts them. Reports before the SageMaker layout (schema 1.0) wrote
        ``network`` and ``dcgm`` (a node-only run also ``nccl``) as ``{}``: not recorded, read
        as absent (:func:`diagnostics_block`)."""
        empty = [name for name in DIAGNOSTICS if data.get(name) == {}]
        if empty:
            data = {k: v for k, v in data.items() if k not in empty}
        rows = data.get("checks")
        if not (isinstance(rows, list) and rows and isinstance(rows[0], Mapping)
                and isinstance(rows[0].get("findings"), list)):
            return data
        counted = [{**r, "findings": len(r["findings"])} if isinstance(r, Mapping)
                   and isinstance(r.get("findings"), list) else r for r in rows]
        return {**data, "checks": counted}


# NodeSection's diagnostics blocks (the SageMaker health check's layout), typed.
DIAGNOSTICS: Mapping[str, type[NetworkSection | DcgmSection | NcclSection]] = {
    "network": NetworkSection, "dcgm": DcgmSection, "nccl": NcclSection}


def diagnostics_block(name: str, data: Mapping[str, Any] | None) -> NetworkSection | DcgmSection | NcclSection | None:
    """A section's diagnostics block ``name`` (``network``, ``dcgm``, ``nccl``) typed from its JSON
    object, as :class:`NodeSection` reads it: None where there is none, or an empty one (written
    so before the SageMaker layout)."""
    return DIAGNOSTICS[name].from_dict(data) if data else None


def _load_block(data: Mapping[str, Any] | None) -> dict[str, LoadSummary] | None:
    """A section's ``load`` block (GPU label to its under-load summary) typed, None where there is none."""
    return None if data is None else msgspec.convert(data, dict[str, LoadSummary])


# NodeSection's typed blocks a reader walks over every node, each typed from its JSON object (or None) as
# NodeSection reads it.
TYPED_BLOCKS: Mapping[str, Callable[[Mapping[str, Any] | None], Any]] = {
    **{name: functools.partial(diagnostics_block, name) for name in DIAGNOSTICS},
    "system": lambda data: SystemSection.from_dict(data or {}), "load": _load_block}

# NodeSection's free-form blocks a reader walks over every node, and what an absent one reads as (None: stays None).
BLOCKS: Mapping[str, Callable[[], Any] | None] = {"gpu": dict, "facts": None}


def _rooted(exc: msgspec.ValidationError, at: str) -> msgspec.ValidationError:
    """``exc`` with its path from the report's root (``at``), not from the block it was read from."""
    return msgspec.ValidationError(str(exc).replace("`$", f"`{at}"))


def merged_section(section: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """A node section's JSON object with what the aggregation adds to it (``nccl.communication_tests``,
    ``network.efa_communication_test``, ``load``, the summary's figures): a block the node wrote is
    added to key by key, never wiped, and every key lands where :class:`NodeSection` and its blocks
    have the field (:func:`in_field_order`), as a typed section would write it."""
    out = dict(section)
    added = False  # only a key the section lacked can be out of place (10,000 sections: reorder none needlessly)
    for name, value in extra.items():
        current = out.get(name)
        if isinstance(current, dict) and isinstance(value, dict):
            merged = {**current, **value}
            block = _blocks_of(NodeSection).get(name)
            value = in_field_order(block, merged) if block is not None and len(merged) > len(current) else merged
        added = added or name not in out
        out[name] = value
    return in_field_order(NodeSection, out) if added else out


@functools.cache
def _blocks_of(cls: type) -> dict[str, type[_Block]]:
    """``cls``'s fields that hold one block (``X`` or ``X | None``), by key."""
    out = {}
    for f in msgspec.structs.fields(cls):
        tp = _optional(f.type)
        if isinstance(tp, type) and issubclass(tp, _Block):
            out[f.encode_name] = tp
    return out


class NodeSections(Mapping[str, NodeSection]):
    """``nodes``: node key to :class:`NodeSection`, read from the report's dicts on first use.

    A renderer that reads the findings and the summary of a 10,000-node report should not
    pay for typing ten thousand node sections it never looks at; ``to_dict`` gives back the
    very dicts it was read from (``to_dict(from_dict(d)) == d`` holds for each section).
    """

    __slots__ = ("_blocks", "_raw", "_typed")

    def __init__(self, sections: Mapping[str, Mapping[str, Any] | NodeSection]) -> None:
        self._raw = sections
        self._typed: dict[str, NodeSection] = {}
        self._blocks: dict[str, list[Any]] = {}  # diagnostics block name -> every node's, typed once

    def __getitem__(self, key: str) -> NodeSection:
        typed = self._typed.get(key)
        if typed is None:
            value = self._raw[key]
            try:
                typed = value if isinstance(value, NodeSection) else NodeSection.from_dict(value)
            except msgspec.ValidationError as exc:  # the path from the report's root, not the section's
                raise _rooted(exc, f"$.nodes.{key}") from None
            self._typed[key] = typed
        return typed

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __repr__(self) -> str:
        return f"NodeSections({len(self)} nodes)"

    def to_dict(self) -> dict[str, Mapping[str, Any]]:
        return {k: v.to_dict() if isinstance(v, NodeSection) else v for k, v in self._raw.items()}

    def raw(self, key: str) -> Mapping[str, Any]:
        """Node ``key``'s section as its JSON object (the very dict it was read from, if untyped)."""
        value = self._raw[key]
        return value.to_dict() if isinstance(value, NodeSection) else value

    @typing.overload
    def blocks(self, name: typing.Literal["network"]) -> Iterator[NetworkSection | None]: ...
    @typing.overload
    def blocks(self, name: typing.Literal["dcgm"]) -> Iterator[DcgmSection | None]: ...
    @typing.overload
    def blocks(self, name: typing.Literal["nccl"]) -> Iterator[NcclSection | None]: ...
    @typing.overload
    def blocks(self, name: typing.Literal["system"]) -> Iterator[SystemSection]: ...
    @typing.overload
    def blocks(self, name: typing.Literal["load"]) -> Iterator[dict[str, LoadSummary] | None]: ...
    @typing.overload
    def blocks(self, name: str) -> Iterator[Any]: ...

    def blocks(self, name: str) -> Iterator[Any]:
        """Every node's block ``name`` (one of :data:`TYPED_BLOCKS` or :data:`BLOCKS`: ``gpu``,
        ``nccl``, ``network``, ``load``, ...) in node order, as :class:`NodeSection` holds it
        (``{}`` for an absent ``gpu``, an empty :class:`SystemSection` for an absent ``system``,
        None for the others), without typing the sections: the readers that walk all 10,000
        nodes of a report for one block each (scores, plots) need no more."""
        if name in TYPED_BLOCKS:
            yield from self._typed_blocks(name)
            return
        default = BLOCKS[name]
        typed = self._typed
        for key, value in self._raw.items():
            section = typed.get(key, value)
            if isinstance(section, NodeSection):
                yield getattr(section, name)
            else:
                found = section.get(name)
                yield found if found is not None or default is None else default()

    def _typed_blocks(self, name: str) -> list[Any]:
        """Every node's typed block ``name``, typed on the first call and kept: three readers walk
        ``network`` over 10,000 nodes (those of ``nccl``'s collectives read :meth:`collectives`)."""
        done = self._blocks.get(name)
        if done is not None:
            return done
        out = []
        for key, value in self._raw.items():
            section = self._typed.get(key, value)
            if isinstance(section, NodeSection):
                out.append(getattr(section, name))
                continue
            try:
                out.append(TYPED_BLOCKS[name](section.get(name)))
            except msgspec.ValidationError as exc:
                raise _rooted(exc, f"$.nodes.{key}.{name}") from None
        self._blocks[name] = out
        return out

    def collectives(self) -> Iterator[Mapping[str, Mapping[str, Any]]]:
        """Every node's ``nccl.communication_tests`` as its JSON objects (key to entry), in node order,
        typing nothing (``{}`` for a node without one).

        The faster path for the readers that walk every entry of a report on rank 0 (the node
        fabric score, a large cluster's bandwidth band, the history's bus bandwidth) and read a few
        keys of each: typed (:class:`CollectiveTest`, as ``blocks("nccl")`` reads them), a
        10,000-node report's 60,000 entries and 240,000 sizes took 0.30 to 0.45 s to read against
        0.06 s as JSON objects, and made rank 0's aggregation 0.29 s slower and 45 MB bigger
        (bench/bench_aggregate.py, 2 shared cores). A section already typed gives its entries' JSON.
        """
        for value in self._raw.values():
            if isinstance(value, NodeSection):
                tests = value.nccl.communication_tests if value.nccl is not None else {}
                yield {key: entry.to_dict() for key, entry in tests.items()}
            else:
                yield ((value.get("nccl") or {}).get("communication_tests") or {})

    def node_infos(self) -> Iterator[tuple[str, NodeInfo]]:
        """Each node's key and typed ``node_info``, in node order, typing only that block of a
        section not yet typed (Slurm and Kubernetes map a 10,000-node report's findings to
        nodes by name and read nothing else of the sections)."""
        for key, value in self._raw.items():
            section = self._typed.get(key, value)
            if isinstance(section, NodeSection):
                yield key, section.node_info
                continue
            try:
                yield key, NodeInfo.from_dict(section.get("node_info") or {})
            except msgspec.ValidationError as exc:
                raise _rooted(exc, f"$.nodes.{key}.node_info") from None

    def host_names(self) -> list[str]:
        """Each node's name as findings' subjects use it (:attr:`NodeInfo.current_host`, else
        ``?``), in node order, without typing the sections."""
        out = []
        for key, value in self._raw.items():
            section = self._typed.get(key, value)
            if isinstance(section, NodeSection):
                out.append(section.node_info.current_host or "?")
            else:
                info = section.get("node_info") or {}
                out.append(info.get("current_host") or info.get("hostname") or "?")
        return out

    def replaced(self, sections: Mapping[str, Mapping[str, Any] | NodeSection]) -> NodeSections:
        """These sections with some replaced (a new value; the others are shared, typed or not)."""
        if not sections:
            return self
        out = NodeSections({**self._raw, **sections})
        out._typed = {k: v for k, v in self._typed.items() if k not in sections}
        return out



class ClusterTopology(_Block, frozen=True, kw_only=True):
    """``cluster_info.cluster_topology``: the job's shape and launcher."""

    total_nodes: int
    gpus_per_node: int
    processes_per_node: int
    world_size: int
    launcher: str


class ClusterInfo(_Block, frozen=True, kw_only=True):
    """``cluster_info``: how complete the data is, the expected GPUs, the topology and the
    nodes that never reported.

    A distributed run adds the collectives' ``test_parameters`` (in ``extra``)."""

    data_completeness: str
    note: str
    expected_total_gpus: int | None
    cluster_topology: ClusterTopology
    missing_nodes: list[str]
    extra: JsonObject = field(default_factory=dict, name=EXTRA)

    @classmethod
    def empty(cls) -> ClusterInfo:
        """What a report without ``cluster_info`` (an older or trimmed one) says: nothing known."""
        return cls(data_completeness="unknown", note="", expected_total_gpus=None,
                   cluster_topology=ClusterTopology(total_nodes=0, gpus_per_node=0, processes_per_node=1,
                                                    world_size=1, launcher="none"), missing_nodes=[])


class Tool(_Block, frozen=True, kw_only=True):
    """``tool``: which program wrote the report."""

    name: str = "gpu-preflight"
    version: str = ""


class RunInfo(_Block, frozen=True, kw_only=True):
    """``run``: the ``--fail-on`` policy the verdict was gated by and the run's duration.

    The CLI adds the run's whole wall time, ``wall_s`` (in ``extra``)."""

    fail_on: str = "fail"
    duration_s: Number = 0.0
    extra: JsonObject = field(default_factory=dict, name=EXTRA)


class CostBenefit(_Block, frozen=True, kw_only=True):
    """``cluster_summary.cost_benefit``: what the checks cost in GPU-hours (and money, with a
    price) against what the gating findings they caught, or the slowest member's lag, would
    have cost a training job; ``line`` says it in one sentence."""

    gpus: int
    check_duration_s: Number
    duration_source: str
    check_gpu_hours: Number
    check_cost: Number | None
    job_hours: Number
    job_gpu_hours: Number
    basis: str
    gating_findings: int
    failure_loss_fraction: Number
    slowdown_fraction: Number
    averted_gpu_hours: Number
    averted_cost: Number | None
    benefit_cost_ratio: Number | None
    gpu_hour_price: Number | None
    currency: str
    line: str


class ScoreDeduction(_Block, frozen=True, kw_only=True, omit_defaults=True):
    """What took a component's points: a group of findings sharing check, code and status
    (``check_id``, ``code``, ``status``, ``count``, ``subjects``, ``summary``) or, in performance
    consistency, a measurement family's spread (``family``, ``series``, ``slowest``,
    ``dispersion``). One class for both, each key left out where it does not apply, so that
    either is written in its order (a union of two classes would need a tag key)."""

    check_id: str | None = None
    code: str | None = None
    status: str | None = None
    count: int | None = None
    family: str | None = None
    series: str | None = None
    points: Number
    subjects: list[str] | None = None
    summary: str | None = None
    slowest: str | None = None
    dispersion: Number | None = None

    @property
    def cause(self) -> str:
        """The check that took the points, or the measured series (what a target fixes)."""
        return self.check_id or self.series or ""


class ScoreMeasurement(_Block, frozen=True, kw_only=True):
    """A measured series' spread (performance consistency): its statistics (rounded to 4
    places), the points its spread costs and whether it is its family's counted worst."""

    family: str
    series: str
    slowest: str
    n: int
    mean: Number
    median: Number
    min: Number
    max: Number
    cv: Number
    straggler_gap: Number
    spread: Number
    dispersion: Number
    points: Number
    counted: bool


class ComponentScore(_Block, frozen=True, kw_only=True, omit_defaults=True):
    """``health_scores.components.<name>``: a component's score (None: not scored), rating,
    whether it was tested, its findings by status, what took its points and why it was not
    tested; performance consistency also lists its ``measurements``."""

    title: str
    score: Number | None
    rating: str | None
    tested: bool
    counts: dict[str, int]
    deductions: list[ScoreDeduction]
    measurements: list[ScoreMeasurement] | None = None
    reason: str | None


class ScoreCap(_Block, frozen=True, kw_only=True):
    """Why the overall score is capped: the cap, the weighted mean it replaced, and why."""

    at: Number
    mean: Number
    why: str


class MissingCore(_Block, frozen=True, kw_only=True):
    """A core component that was not measured, and what measuring it needs."""

    component: str
    title: str
    missing: str


class OverallScore(_Block, frozen=True, kw_only=True, omit_defaults=True):
    """``health_scores.overall``: the weighted mean of the tested components (capped when the
    verdict gates), its rating, the components counted and the unmeasured core components
    (``incomplete``: reports before it was written lack it)."""

    score: Number | None
    rating: str | None
    cap: ScoreCap | None
    components_counted: list[str]
    incomplete: list[MissingCore] | None = None


class ConnectivityPair(TypedDict):
    """One measured node pair: the two node names, the speed (None: not measured) and its status."""

    a: str
    b: str
    gbps: Number | None
    status: str


class ConnectivityCell(TypedDict):
    """A measured cell of the node-pair grid."""

    gbps: Number | None
    status: str


class Connectivity(_Block, frozen=True, kw_only=True):
    """``health_scores.connectivity``: the node-pair matrix, from a matrix handed in, the
    localisation rounds or ``network.node_links``; ``cells`` is None above the grid's size."""

    source: str
    nodes: list[str]
    pairs: list[ConnectivityPair]
    cells: list[list[ConnectivityCell | None]] | None
    truncated: bool


class ScoreSettings(_Block, frozen=True, kw_only=True):
    """``health_scores.settings``: the ``[report]`` settings the scores were computed with."""

    fail_points: Number
    error_points: Number
    warn_points: Number
    repeat_fraction: Number
    repeat_max_multiple: Number
    consistency_ok: Number
    consistency_bad: Number
    consistency_max_points: Number
    bands: dict[str, Number]
    weights: dict[str, Number]


class HealthScores(_Block, frozen=True, kw_only=True):
    """``cluster_summary.health_scores``: 0-100 per component and overall, with what lowered
    each (:mod:`gpu_preflight.report.scores`)."""

    overall: OverallScore
    components: dict[str, ComponentScore]
    connectivity: Connectivity | None
    settings: ScoreSettings
    formula: str

    @property
    def consistency(self) -> ComponentScore | None:
        """The performance consistency component (None in a report that lacks it)."""
        return self.components.get("performance_consistency")

    def by_name(self) -> dict[str, Number | None]:
        """Each component's score, then ``overall`` (None: not scored): what the history keeps
        of a run and what later runs' trends compare with."""
        return {**{name: comp.score for name, comp in self.components.items()}, "overall": self.overall.score}

    @property
    def measurements(self) -> list[ScoreMeasurement]:
        """The measured series' spreads (performance consistency's; none where it has none)."""
        perf = self.consistency
        return (perf.measurements or []) if perf is not None else []


class Readiness(_Block, frozen=True, kw_only=True):
    """One readiness level: READY, READY WITH CAVEATS or NEEDS FIXES, and why."""

    status: str
    reasons: list[str]


class ReadinessLevels(_Block, frozen=True, kw_only=True):
    """``assessment.readiness``: for development/testing and for production."""

    development: Readiness
    production: Readiness


class Trend(_Block, frozen=True, kw_only=True):
    """A component's (or the overall) score against the median of its earlier runs' scores."""

    trend: str
    baseline: Number | None
    change: Number | None
    runs: int


class ComponentTarget(_Block, frozen=True, kw_only=True):
    """A component's target score and what reaching it takes (None: the component was not scored)."""

    component: str
    title: str
    score: Number | None
    target: Number | None
    change: Number | None
    by: list[str]


class OverallTarget(_Block, frozen=True, kw_only=True):
    """The overall score the component targets reach, and its rating."""

    score: Number | None
    target: Number | None
    rating: str | None
    change: Number | None


class Targets(_Block, frozen=True, kw_only=True):
    """``assessment.targets``: the scores to reach within ``days``."""

    days: Number
    target_score: Number
    components: list[ComponentTarget]
    overall: OverallTarget


class Recommendation(_Block, frozen=True, kw_only=True):
    """One entry of ``recommendations_by_urgency``: the findings (or an untested component, or a
    measurement spread that cost points) that call for the same action, with every subject.

    ``check_id`` is None where no check stands behind the entry (``not_tested``, ``spread_*``);
    ``count`` is how many findings it groups (0 for an untested component). One field order
    for every entry: reports written before this class listed a spread entry's
    ``recommendation`` last, and read back the same (a JSON object is read by key)."""

    check_id: str | None
    code: str
    component: str
    status: Status
    recommendation: str
    subjects: list[str]
    count: int
    summary: str


class Issue(_Block, frozen=True, kw_only=True):
    """An immediate (HIGH) or short-term (MEDIUM) recommendation as an issue with its impact."""

    priority: str
    status: str
    check_id: str | None
    code: str | None
    component: str
    title: str
    impact: str
    summary: str
    subjects: list[str]
    count: int
    recommendation: str | None


class StabilityRow(_Block, frozen=True, kw_only=True):
    """A measured series' spread as the stability table shows it (the consistency score's
    series, and the node-pair latencies, shown but not scored)."""

    series: str
    family: str
    unit: str
    n: int
    mean: Number
    min: Number
    max: Number
    std_dev: Number
    cv: Number
    slowest: str
    points: Number
    counted: bool


class ScheduleItem(_Block, frozen=True, kw_only=True):
    """When to check what, and the command that does it."""

    when: str
    what: str
    command: str


class Schedule(_Block, frozen=True, kw_only=True):
    """``assessment.schedule``: the monitoring schedule and the date of the next full assessment
    (None: the run has no readable timestamp), ``days`` after the run by ``setting``."""

    items: list[ScheduleItem]
    next_assessment: str | None
    days: Number
    setting: str


class HealthAssessment(_Block, frozen=True, kw_only=True):
    """``cluster_summary.assessment``: readiness, trends, targets, issues, stability and the
    monitoring schedule (:mod:`gpu_preflight.report.assessment`)."""

    readiness: ReadinessLevels
    trends: dict[str, Trend]
    targets: Targets
    issues: list[Issue]
    stability: list[StabilityRow]
    schedule: Schedule


class Assessment(Struct, frozen=True):
    """What scoring and advice conclude about a report, as a value (nothing is mutated):
    the health scores, recommendations by urgency, cost-benefit and the health assessment
    (readiness, trends, targets, schedule)."""

    health_scores: HealthScores
    recommendations_by_urgency: dict[str, list[Recommendation]] | None = None
    cost_benefit: CostBenefit | None = None
    assessment: HealthAssessment | None = None


class ClusterReport(_Block, frozen=True, kw_only=True):
    """The whole report (``report.json``): every format renders from this.

    Reading one back requires the verdict (``cluster_summary`` with its status, exit code and
    counts); blocks an older or trimmed report lacks read as empty, so it can still be
    rendered (``to_dict`` then writes them; the schema says what a complete report holds).
    """

    schema_version: str = ""
    tool: Tool = field(default_factory=Tool)
    timestamp: str = ""
    cluster_info: ClusterInfo = field(default_factory=ClusterInfo.empty)
    cluster_summary: ClusterSummary
    cluster_checks: list[ClusterCheck] = field(default_factory=list)
    nodes: NodeSections = field(default_factory=lambda: NodeSections({}))
    findings: list[ReportFinding] = field(default_factory=list)
    artifacts: list[SavedArtifact] = field(default_factory=list)
    run: RunInfo = field(default_factory=RunInfo)
    extra: JsonObject = field(default_factory=dict, name=EXTRA)

    def to_dict(self) -> JsonObject:
        """The report's JSON object; node sections read from a dict and never typed are that very dict."""
        out = super().to_dict()
        out["nodes"] = self.nodes.to_dict()
        return out

    @classmethod
    def of(cls, report: ClusterReport | Mapping[str, Any]) -> ClusterReport:
        """``report`` typed: itself, or read from its JSON dict."""
        return report if isinstance(report, ClusterReport) else cls.from_dict(report)

    def with_assessment(self, assessment: Assessment) -> ClusterReport:
        """This report with ``assessment``'s blocks in its summary (a new value)."""
        summary = replace(
            self.cluster_summary, health_scores=assessment.health_scores,
            recommendations_by_urgency=assessment.recommendations_by_urgency or
            self.cluster_summary.recommendations_by_urgency,
            cost_benefit=assessment.cost_benefit or self.cluster_summary.cost_benefit,
            assessment=assessment.assessment or self.cluster_summary.assessment)
        return replace(self, cluster_summary=summary)

    def with_summary(self, **blocks: Any) -> ClusterReport:
        """This report with ``cluster_summary`` blocks added or replaced (``earlier_scores``,
        a localisation block: names the summary does not know go to its ``extra``)."""
        names = ClusterSummary.__struct_fields__
        known = {k: v for k, v in blocks.items() if k in names and k != "extra"}
        extra = {k: v for k, v in blocks.items() if k not in known}
        summary = replace(self.cluster_summary, **known, extra={**self.cluster_summary.extra, **extra})
        return replace(self, cluster_summary=summary)

    def with_run(self, **blocks: Any) -> ClusterReport:
        """This report with ``run`` blocks added or replaced (``wall_s``, the run's whole wall time)."""
        return replace(self, run=replace(self.run, extra={**self.run.extra, **blocks}))

    def with_artifacts(self, artifacts: Sequence[SavedArtifact],
                       sections: Mapping[str, Mapping[str, Any] | NodeSection] | None = None) -> ClusterReport:
        """This report listing ``artifacts``, with node ``sections`` replaced (the ones whose
        ``raw_output_artifact`` paths were filled once the files were written): a new value."""
        return replace(self, artifacts=list(artifacts), nodes=self.nodes.replaced(sections or {}))

    @property
    def fail_on(self) -> str:
        return self.run.fail_on
