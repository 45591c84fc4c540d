"""The node report's ``network``, ``dcgm`` and ``nccl`` sections, in the SageMaker health check's layout.

Filled from the JSON facts of the diagnostic probes (a node report's ``facts``, which
also travel in rank payloads), so a report can be rebuilt from a saved one. The layout
keeps the keys users of that tool read — ``network.efa_available``, ``efa_providers``,
``efa_provider_count``, ``aws_ofi_nccl_plugin{installed,path}`` (and ``version`` where the
library names one); ``dcgm.dcgm_available``,
``dcgm.diagnostics.basic|extended`` with ``parsed_output`` and ``overall_status``;
``nccl.nccl_tests_available``, ``nccl.communication_tests``. Raw tool output is saved as
an artifact and referenced (``raw_output_artifact``: the artifact's name, file and, once
saved, its path beside the report); DCGM's is also inlined (``raw_output``, ``stdout``,
``stderr``) up to a size limit, as that report has it.

The sections are built typed (:class:`~.model.NetworkSection`, :class:`~.model.DcgmSection`,
:class:`~.model.NcclSection`): their fields are the keys, in the order the report writes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, TypeVar

import msgspec
from msgspec.structs import replace

from ..records.dcgm import DcgmDiagRecord, DcgmTest
from .model import (
    ArtifactRef,
    DcgmDiagnostics,
    DcgmLevel,
    DcgmParsedOutput,
    DcgmSection,
    FiInfoRun,
    JsonObject,
    NcclSection,
    NcclTestsRun,
    NetworkSection,
    NodeSection,
    NodeSections,
    OfiPluginInfo,
    PingpongPair,
    PingpongTest,
    RdmaPort,
)

__all__ = [
    "Diagnostics",
    "communication_test",
    "dcgm_section",
    "diagnostic_sections",
    "fill_artifact_paths",
    "nccl_section",
    "network_section",
    "result_cell",
    "seed_parsed_output",
    "with_artifact_paths",
]


def _artifact(run: Mapping[str, Any] | None, paths: Mapping[str, str]) -> ArtifactRef | None:
    if not run or not run.get("artifact"):
        return None
    return ArtifactRef(name=run["artifact"], file=run.get("artifact_file"), path=paths.get(run["artifact"]))


def _paths(artifacts: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    return {str(a["name"]): str(a["path"]) for a in artifacts if a.get("name") and a.get("path")}


def network_section(facts: Mapping[str, Any], paths: Mapping[str, str] | None = None,
                    pingpong: list[dict[str, Any]] | None = None) -> NetworkSection:
    """``network``: EFA providers and devices, the aws-ofi-nccl plugin, RDMA ports, fi_pingpong."""
    fabric = facts.get("fabric") or {}
    record = fabric.get("fi_info_record") or {}
    providers = [p for p in record.get("providers") or [] if isinstance(p, Mapping)]
    plugin = fabric.get("plugin") or {}
    provider = fabric.get("provider")
    run = fabric.get("fi_info")
    ib = facts.get("infiniband") or {}
    return NetworkSection(
        # the release the library names (no key where none was read: older reports)
        aws_ofi_nccl_plugin=OfiPluginInfo(installed=bool(plugin.get("installed")), path=plugin.get("path"),
                                          version=plugin.get("version") or None),
        efa_available=bool(providers) if provider == "efa" else bool(fabric.get("efa_devices")),
        efa_providers=[f"provider: {p.get('provider')}" for p in providers] if provider == "efa" else [],
        efa_provider_count=len(providers) if provider == "efa" else 0,
        efa_devices=list(fabric.get("efa_devices") or []),
        fi_info=FiInfoRun(provider=provider, command=run.get("argv"), exit_code=run.get("rc"),
                          error_code=record.get("error_code"), provider_count=len(providers),
                          domains=sorted({str(p.get("domain")) for p in providers if p.get("domain")}),
                          raw_output_artifact=_artifact(run, paths or {})) if run else None,
        environment=dict(fabric.get("env") or {}),
        rdma_ports=[RdmaPort(device=d.get("name"), port=p.get("port"), state=p.get("state"),
                             physical_state=p.get("physical_state"), rate_gbps=p.get("rate_gbps"),
                             link_layer=p.get("link_layer"))
                    for d in (ib.get("ports") or {}).get("devices", []) for p in d.get("ports", [])]
        if ib.get("devices") else None,
        efa_communication_test=communication_test(pingpong) if pingpong else None)


def communication_test(pingpong: list[dict[str, Any]], rank: int | None = None) -> PingpongTest:
    """``network.efa_communication_test`` from one node's fi_pingpong records (the rank payload's ``pingpong``).

    The first pair's role and table, and the rank that ran them (the node's local rank 0),
    as the SageMaker report shows them, plus every pair (typed: ``msgspec.ValidationError``
    names a record that is not one).
    """
    pairs = msgspec.convert(pingpong, list[PingpongPair])
    first = pairs[0]
    return PingpongTest(success=all(p.success for p in pairs), test_role=first.test_role, rank=rank,
                        provider=first.provider, raw_output=first.raw_output, pairs=pairs)


_CELL_WORDS = {"pass": "Pass", "fail": "Fail", "warn": "Warn", "skip": "Skip"}
_SEVERITY = ("pass", "skip", "warn", "fail")
Raw = Mapping[str, tuple[str, str]]  # artifact name -> (file name, content): a node report's raw outputs


def result_cell(test: DcgmTest) -> str:
    """A test's cell in DCGM's own words: ``Pass``, ``Pass - All``, ``Pass - GPUs: 0, 2, 3; Fail - GPU: 1``.

    What the SageMaker report's ``test_results.<category>.<test>`` holds, rebuilt from the
    parsed status and per-GPU statuses (its parser kept only a cell's first line; we keep
    every GPU's outcome, worst last, as DCGM's table lists them).
    """
    status = test.status
    word = _CELL_WORDS.get(status, status.capitalize())
    if not test.gpu_status:
        return word
    groups: dict[str, list[str]] = {}
    for gpu, value in test.gpu_status.items():
        groups.setdefault(value, []).append(gpu)
    if len(groups) == 1 and next(iter(groups)) == status:
        return f"{word} - All"
    order = sorted(groups, key=lambda s: _SEVERITY.index(s) if s in _SEVERITY else len(_SEVERITY))
    return "; ".join(f"{_CELL_WORDS.get(s, s.capitalize())} - GPU{'s' if len(groups[s]) > 1 else ''}: "
                     f"{', '.join(groups[s])}" for s in order)


def seed_parsed_output(record: DcgmDiagRecord) -> DcgmParsedOutput:
    """The parser's record with the SageMaker report's keys beside it.

    ``test_results.<category>.<test>`` (categories lower-case, as that report has them) =
    :func:`result_cell`; ``overall_status`` capitalised; ``gpu_device_ids`` as DCGM prints
    it (``"2237,2237"``), the list in ``gpu_device_id_list``. Our per-test detail (GPUs,
    per-GPU statuses, DCGM's messages) stays in ``tests``.
    """
    results: dict[str, dict[str, str]] = {}
    tests = [t for t in record.tests if t.name]
    for test in tests:
        cells = results.setdefault((test.category or "other").lower(), {})
        if test.rows:  # DCGM's table: its own rows and words, a later row of one label replacing an earlier
            cells.update({label: text for label, text in test.rows})
        else:
            cells.setdefault(test.name, result_cell(test))
    fields = {name: getattr(record, name) for name in record.__struct_fields__}
    return DcgmParsedOutput(**{**fields, "gpu_device_ids": ",".join(record.gpu_device_ids),
                               "gpu_device_id_list": list(record.gpu_device_ids), "test_results": results,
                               "overall_status": overall_word(record.overall, tests)})


def overall_word(overall: str, tests: list[DcgmTest]) -> str:
    """``overall_status`` as the SageMaker report words it: ``Pass``, ``Fail``, ``Mixed`` (some GPUs or
    tests passed and some failed or warned), ``Error`` (DCGM could not run, or nothing was parsed)."""
    if not overall or overall == "error":
        return "Error"
    outcomes = {s for t in tests for s in [t.status, *t.gpu_status.values()] if s}
    if "pass" in outcomes and outcomes & {"fail", "warn"}:
        return "Mixed"
    return overall.capitalize()


def _inline(raw: Raw, name: str | None, limit: int) -> tuple[str, bool]:
    """Up to ``limit`` characters of a saved raw output, and whether it was cut."""
    text = raw[name][1] if name and name in raw else ""
    return (text, False) if len(text) <= limit else (text[:limit], True)


def _dcgm_level(dcgm: Mapping[str, Any], paths: Mapping[str, str], raw: Raw, inline: bool) -> DcgmLevel:
    """One level's entry: the SageMaker report's keys (``success``, ``parsed_output``,
    ``raw_output``, ``stdout``, ``stderr``, ``exit_code_zero``) and ours."""
    run = dcgm["run"]
    found = dcgm.get("record")
    record = msgspec.convert(found, DcgmDiagRecord) if isinstance(found, Mapping) else None
    overall = record.overall if record is not None else None
    limit = int(dcgm.get("inline_max_bytes") or 0) if inline else 0
    stdout, cut = _inline(raw, run.get("artifact"), limit)
    stderr, _ = _inline(raw, f"{run['artifact']}_stderr" if run.get("artifact") else None, limit)
    if not stderr and limit:
        stderr = str(run.get("stderr_tail") or "")[:limit]
    return DcgmLevel(
        success=record is not None and overall != "error",
        level=dcgm.get("level"),
        command=run.get("argv"),
        exit_code=run.get("rc"),
        exit_code_zero=run.get("rc") == 0,
        duration_s=run.get("duration_s"),
        overall_status=str(overall).capitalize() if overall else "Error",
        parsed_output=seed_parsed_output(record) if record is not None else None,
        raw_output=stdout,
        raw_output_truncated=cut,
        stdout=stdout,
        stderr=stderr,
        error=run.get("problem") or dcgm.get("parse_error"),
        raw_output_artifact=_artifact(run, paths),
    )


def dcgm_section(facts: Mapping[str, Any], paths: Mapping[str, str] | None = None, raw: Raw | None = None,
                 *, inline: bool = True) -> DcgmSection:
    """``dcgm``: whether dcgmi is installed, and each level that ran: level 1 as ``basic``,
    level 2 or 3 as ``extended`` (a full run has both).

    ``raw`` (a node report's raw outputs) fills ``raw_output``/``stdout``/``stderr`` up to
    ``diagnostics.dcgm_raw_output_inline_max_bytes``; ``inline=False`` (clusters above
    ``report.detail_max_nodes``) leaves them empty: the artifact on the node has them.
    A level that did not run is left out, with its reason in ``reason``.
    """
    dcgm = facts.get("dcgm") or {}
    basic = dcgm.get("basic")
    reasons = []
    levels: dict[str, DcgmLevel] = {}
    for level in ([basic] if isinstance(basic, Mapping) else []) + [dcgm]:
        if not level.get("run"):
            if level.get("reason"):
                reasons.append(str(level["reason"]))
            continue
        levels["basic" if level.get("level") == 1 else "extended"] = _dcgm_level(level, paths or {}, raw or {}, inline)
    return DcgmSection(dcgm_available=bool(dcgm.get("available")), diagnostics=DcgmDiagnostics(
                           basic=levels.get("basic"), extended=levels.get("extended")),
                       reason="; ".join(reasons) if reasons else None)


def nccl_section(facts: Mapping[str, Any], paths: Mapping[str, str] | None = None) -> NcclSection:
    """``nccl``: whether nccl-tests is installed, and each local run's summary.

    ``communication_tests`` (the collectives a distributed run measured with torch) is
    filled by the cluster aggregation; a node-only run has none.
    """
    nccl = facts.get("nccl_tests") or {}
    runs: dict[str, NcclTestsRun] = {}
    for entry in nccl.get("runs") or []:
        record = entry.get("record") if isinstance(entry.get("record"), Mapping) else {}
        run = entry.get("run") or {}
        runs[str(entry.get("name"))] = NcclTestsRun(
            success=bool(record) and not record.get("errors") and not record.get("wrong_total"),
            gpus=nccl.get("gpus"), command=run.get("argv"), exit_code=run.get("rc"),
            test=record.get("test"), nranks=record.get("nranks"),
            avg_busbw_gbps=record.get("avg_busbw_gbps"), peak_busbw_gbps=record.get("peak_busbw_gbps"),
            wrong_total=record.get("wrong_total"),
            error=run.get("problem") or entry.get("parse_error"),
            raw_output_artifact=_artifact(run, paths or {}))
    return NcclSection(nccl_tests_available=bool(nccl.get("available")), nccl_tests=runs, communication_tests={},
                       reason=nccl.get("reason") if not nccl.get("runs") and nccl.get("reason") else None)


class Diagnostics(NamedTuple):
    """A node's three diagnostics blocks, typed."""

    network: NetworkSection
    dcgm: DcgmSection
    nccl: NcclSection

    def to_dict(self) -> dict[str, JsonObject]:
        """``{"network": ..., "dcgm": ..., "nccl": ...}``: each block's JSON object."""
        return {"network": self.network.to_dict(), "dcgm": self.dcgm.to_dict(), "nccl": self.nccl.to_dict()}


def diagnostic_sections(facts: Mapping[str, Any], artifacts: Iterable[Mapping[str, Any]] = (),
                        pingpong: list[dict[str, Any]] | None = None, raw: Raw | None = None, *,
                        inline: bool = True) -> Diagnostics:
    """The ``network``, ``dcgm`` and ``nccl`` blocks for one node's JSON facts, saved artifacts and
    raw outputs (``raw``: a node report's ``raw_artifacts``, inlined in ``dcgm`` up to its limit)."""
    paths = _paths(artifacts)
    return Diagnostics(network_section(facts, paths, pingpong), dcgm_section(facts, paths, raw, inline=inline),
                       nccl_section(facts, paths))


def _refs(section: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    """Every ``raw_output_artifact`` reference in a node section's network, dcgm and nccl blocks, read
    from its JSON object: which of a 10,000-node report's sections need filling is found without
    typing them (their nodes saved their raw outputs before building them, so usually none do)."""
    fi_info = (section.get("network") or {}).get("fi_info")
    levels = ((section.get("dcgm") or {}).get("diagnostics") or {}).values()
    runs = ((section.get("nccl") or {}).get("nccl_tests") or {}).values()
    for holder in [fi_info, *levels, *runs]:
        ref = holder.get("raw_output_artifact") if isinstance(holder, Mapping) else None
        if isinstance(ref, Mapping):
            yield ref


_Run = TypeVar("_Run", FiInfoRun, DcgmLevel, NcclTestsRun)


def _with_path(run: _Run, paths: Mapping[str, str]) -> _Run:
    """``run`` with its ``raw_output_artifact`` given the saved path ``paths`` names for it (``run``
    itself where it has a path already, or ``paths`` does not name it)."""
    ref = run.raw_output_artifact
    if ref is None or ref.path is not None or ref.name not in paths:
        return run
    return replace(run, raw_output_artifact=replace(ref, path=paths[ref.name]))


def with_artifact_paths(section: NodeSection, paths: Mapping[str, str]) -> NodeSection:
    """``section`` with each ``raw_output_artifact`` that ``paths`` (artifact name to its path beside
    the report) names and that has no path yet given that path: a new value, the unchanged
    blocks shared (``section`` itself where nothing changes)."""
    network, dcgm, nccl = section.network, section.dcgm, section.nccl
    if network is not None and network.fi_info is not None \
            and (fi_info := _with_path(network.fi_info, paths)) is not network.fi_info:
        network = replace(network, fi_info=fi_info)
    if dcgm is not None:
        levels = dcgm.diagnostics
        basic = None if levels.basic is None else _with_path(levels.basic, paths)
        extended = None if levels.extended is None else _with_path(levels.extended, paths)
        if basic is not levels.basic or extended is not levels.extended:
            dcgm = replace(dcgm, diagnostics=replace(levels, basic=basic, extended=extended))
    if nccl is not None:
        runs = {name: _with_path(run, paths) for name, run in nccl.nccl_tests.items()}
        if any(run is not nccl.nccl_tests[name] for name, run in runs.items()):
            nccl = replace(nccl, nccl_tests=runs)
    if network is section.network and dcgm is section.dcgm and nccl is section.nccl:
        return section
    return replace(section, network=network, dcgm=dcgm, nccl=nccl)


def fill_artifact_paths(nodes: NodeSections, artifacts: Iterable[Mapping[str, Any]]) -> dict[str, NodeSection]:
    """The node sections whose ``raw_output_artifact.path`` the artifacts just written
    (``{"name", "node", "path"}``) fill, by node key, as new values (usually one node's, the
    run's own: a cluster's nodes saved theirs before building their sections); only those
    sections are typed."""
    by_node: dict[str, dict[str, str]] = {}
    for a in artifacts:
        if a.get("name") and a.get("path") and a.get("node"):
            by_node.setdefault(str(a["node"]), {})[str(a["name"])] = str(a["path"])
    return {key: with_artifact_paths(nodes[key], paths) for key, paths in by_node.items()
            if key in nodes and any(ref.get("path") is None and ref.get("name") in paths
                                    for ref in _refs(nodes.raw(key)))}
