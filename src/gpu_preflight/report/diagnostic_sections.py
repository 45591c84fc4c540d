"""The node report's ``network``, ``dcgm`` and ``nccl`` sections, in the SageMaker health check's layout.

Filled from the JSON facts of the diagnostic probes (a node report's ``facts``, which
also travel in rank payloads), so a report can be rebuilt from a saved one. The layout
keeps the keys users of that tool read — ``network.efa_available``, ``efa_providers``,
``efa_provider_count``, ``aws_ofi_nccl_plugin{installed,path}``; ``dcgm.dcgm_available``,
``dcgm.diagnostics.basic|extended`` with ``parsed_output`` and ``overall_status``;
``nccl.nccl_tests_available`` — with one deliberate change: raw tool output is not
inlined (``raw_output``) but referenced (``raw_output_artifact``: the artifact's name,
file and, once saved, its path beside the report).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["communication_test", "dcgm_section", "diagnostic_sections", "nccl_section", "network_section"]


def _artifact(run: Mapping[str, Any] | None, paths: Mapping[str, str]) -> dict[str, Any] | None:
    if not run or not run.get("artifact"):
        return None
    return {"name": run["artifact"], "file": run.get("artifact_file"), "path": paths.get(run["artifact"])}


def _paths(artifacts: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    return {str(a["name"]): str(a["path"]) for a in artifacts if a.get("name") and a.get("path")}


def network_section(facts: Mapping[str, Any], paths: Mapping[str, str] | None = None,
                    pingpong: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """``network``: EFA providers and devices, the aws-ofi-nccl plugin, RDMA ports, fi_pingpong."""
    fabric = facts.get("fabric") or {}
    record = fabric.get("fi_info_record") or {}
    providers = [p for p in record.get("providers") or [] if isinstance(p, Mapping)]
    plugin = fabric.get("plugin") or {}
    provider = fabric.get("provider")
    section: dict[str, Any] = {
        "aws_ofi_nccl_plugin": {"installed": bool(plugin.get("installed")), "path": plugin.get("path")},
        "efa_available": bool(providers) if provider == "efa" else bool(fabric.get("efa_devices")),
        "efa_providers": [f"provider: {p.get('provider')}" for p in providers] if provider == "efa" else [],
        "efa_provider_count": len(providers) if provider == "efa" else 0,
        "efa_devices": list(fabric.get("efa_devices") or []),
        "fi_info": None,
        "environment": dict(fabric.get("env") or {}),
    }
    run = fabric.get("fi_info")
    if run:
        section["fi_info"] = {"provider": provider, "command": run.get("argv"), "exit_code": run.get("rc"),
                              "error_code": record.get("error_code"), "provider_count": len(providers),
                              "domains": sorted({str(p.get("domain")) for p in providers if p.get("domain")}),
                              "raw_output_artifact": _artifact(run, paths or {})}
    ib = facts.get("infiniband") or {}
    if ib.get("devices"):
        section["rdma_ports"] = [{"device": d.get("name"), **{k: p.get(k) for k in (
            "port", "state", "physical_state", "rate_gbps", "link_layer")}}
            for d in (ib.get("ports") or {}).get("devices", []) for p in d.get("ports", [])]
    if pingpong:
        section["efa_communication_test"] = communication_test(pingpong)
    return section


def communication_test(pingpong: list[dict[str, Any]]) -> dict[str, Any]:
    """``network.efa_communication_test`` from one node's fi_pingpong records (the rank payload's ``pingpong``).

    The first pair's role and table, as the SageMaker report shows them, plus every pair.
    """
    first = pingpong[0]
    return {"success": all(p.get("success") for p in pingpong), "test_role": first.get("test_role"),
            "provider": first.get("provider"), "raw_output": first.get("raw_output"), "pairs": pingpong}


def dcgm_section(facts: Mapping[str, Any], paths: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``dcgm``: whether dcgmi is installed, and the level-1 (basic) or level-2/3 (extended) result."""
    dcgm = facts.get("dcgm") or {}
    section: dict[str, Any] = {"dcgm_available": bool(dcgm.get("available")), "diagnostics": {}}
    run = dcgm.get("run")
    if not run:
        section["reason"] = dcgm.get("reason")
        return section
    record = dcgm.get("record")
    overall = record.get("overall") if isinstance(record, Mapping) else None
    key = "basic" if dcgm.get("level") == 1 else "extended"
    section["diagnostics"][key] = {
        "success": isinstance(record, Mapping) and overall != "error",
        "level": dcgm.get("level"),
        "command": run.get("argv"),
        "exit_code": run.get("rc"),
        "exit_code_zero": run.get("rc") == 0,
        "duration_s": run.get("duration_s"),
        "overall_status": str(overall).capitalize() if overall else "Error",
        "parsed_output": record,
        "error": run.get("problem") or dcgm.get("parse_error"),
        "raw_output_artifact": _artifact(run, paths or {}),
    }
    return section


def nccl_section(facts: Mapping[str, Any], paths: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``nccl``: whether nccl-tests is installed, and each local run's summary."""
    nccl = facts.get("nccl_tests") or {}
    section: dict[str, Any] = {"nccl_tests_available": bool(nccl.get("available")), "nccl_tests": {}}
    if not nccl.get("runs") and nccl.get("reason"):
        section["reason"] = nccl.get("reason")
    for entry in nccl.get("runs") or []:
        record = entry.get("record") if isinstance(entry.get("record"), Mapping) else {}
        run = entry.get("run") or {}
        section["nccl_tests"][entry.get("name")] = {
            "success": bool(record) and not record.get("errors") and not record.get("wrong_total"),
            "gpus": nccl.get("gpus"), "command": run.get("argv"), "exit_code": run.get("rc"),
            "test": record.get("test"), "nranks": record.get("nranks"),
            "avg_busbw_gbps": record.get("avg_busbw_gbps"), "peak_busbw_gbps": record.get("peak_busbw_gbps"),
            "wrong_total": record.get("wrong_total"),
            "error": run.get("problem") or entry.get("parse_error"),
            "raw_output_artifact": _artifact(run, paths or {}),
        }
    return section


def diagnostic_sections(facts: Mapping[str, Any], artifacts: Iterable[Mapping[str, Any]] = (),
                        pingpong: list[dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """``{"network": ..., "dcgm": ..., "nccl": ...}`` for one node's JSON facts and saved artifacts."""
    paths = _paths(artifacts)
    return {"network": network_section(facts, paths, pingpong), "dcgm": dcgm_section(facts, paths),
            "nccl": nccl_section(facts, paths)}
