"""``baseline capture``: a profile from a known-good report or the history, loaded back with the
profile loader and used to judge a later run."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import msgspec
import pytest

from gpu_preflight.cli import history_cmd
from gpu_preflight.config import build_config
from gpu_preflight.config.profiles import load_profile_file
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.history import HistoryStore, extract
from gpu_preflight.history.baseline import CaptureError, capture, render_toml
from gpu_preflight.model import Status

from .history_data import cluster_run, gpus


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    history_cmd.add_commands(parser.add_subparsers(dest="command", required=True))
    return history_cmd.run(parser.parse_args(list(argv)))


def known_good() -> dict:
    fast, slower = gpus("aa", tflops=700.0), gpus("bb", tflops=680.0)
    return cluster_run({"h0": fast, "h1": slower}, node_fabric={"h0": 460.0, "h1": 440.0}, world_busbw=42.0)


def test_capture_from_a_report_round_trips_through_the_profile_loader(tmp_path: Path) -> None:
    report = tmp_path / "good.json"
    report.write_text(json.dumps(known_good()))
    out = tmp_path / "site-h200.toml"
    assert cli("baseline", "capture", str(report), "--name", "site-h200", "-o", str(out)) == 0
    profile = load_profile_file(out)
    perf = profile.layer.data["perf"]
    assert profile.name == "site-h200" and profile.match_length("NVIDIA H200") == len("NVIDIA H200")
    assert perf["gemm_bf16_tflops"] == 690.0  # 1.0 x median of 700, 700, 680, 680
    assert perf["allreduce_busbw_min_gbps"] == pytest.approx(0.9 * 450.0)  # median of the two nodes
    assert perf["network_busbw_min_gbps"] == pytest.approx(0.9 * 42.0)
    assert perf["device_copy_min_gbps"] == pytest.approx(3600.0)
    assert perf["host_transfer_min_gbps"] == pytest.approx(0.9 * 52.0)  # the slower direction
    assert profile.layer.data["gpu"]["min_driver_version"]  # carried over from the shipped h200 profile
    assert "0.9 x median 450 GB/s of busbw.intra_node.all_reduce@2" in out.read_text()


def test_the_captured_floors_judge_a_later_run(tmp_path: Path) -> None:
    captured = capture(extract(ClusterReport.of(known_good())).measurements, source="test", floor_fraction=0.9,
                       gemm_fraction=1.0)
    path = tmp_path / "p.toml"
    path.write_text(render_toml(captured))
    config, sources = build_config(profile=load_profile_file(path))
    assert config.perf.gemm_bf16_tflops == 690.0 and any("baseline-nvidia-h200" in s for s in sources)
    later = {"h0": gpus("aa", tflops=610.0), "h1": gpus("bb")}
    shipped = {(f["check_id"], f["subject"]): f["status"]
               for f in cluster_run(later, node_fabric={"h0": 400.0})["findings"]}
    assert shipped[("compute.gemm", "h0/gpu0")] == "PASS"  # the shipped profile's 670: 610 >= 603
    assert shipped[("nccl.collectives", "group node0")] == "PASS"  # no floor shipped for H200
    site = {(f["check_id"], f["subject"]): f["status"]
            for f in cluster_run(later, node_fabric={"h0": 400.0}, config=config)["findings"]}
    assert site[("compute.gemm", "h0/gpu0")] == Status.WARN.value  # 610 < 0.9 x 690 = 621
    assert site[("nccl.collectives", "group node0")] == Status.FAIL.value  # 400 < 0.9 x 450 = 405


def test_capture_from_history_of_one_known_good_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    with HistoryStore(db) as store:
        for tflops in (700.0, 710.0, 690.0):
            store.record(extract(ClusterReport.of(cluster_run({"h0": gpus("aa", tflops=tflops), "h1": gpus("bb",
                                                                                                           tflops=500.0)}))),
                         "c1")
    assert cli("baseline", "capture", "--from-history", "--db", str(db), "--node", "h0", "--fraction", "0.8",
               "--no-inherit") == 0
    written = tmp_path / "out.toml"
    written.write_text(capsys.readouterr().out)
    perf = load_profile_file(written).layer.data
    assert perf["perf"]["gemm_bf16_tflops"] == 700.0  # median over h0's GPUs in three runs
    assert perf["perf"]["allreduce_busbw_min_gbps"] == pytest.approx(0.8 * 450.0)
    assert "network_busbw_min_gbps" not in perf["perf"]  # a node alone has no cluster-wide numbers
    assert set(perf) == {"perf"}  # --no-inherit
    assert cli("baseline", "capture", "--from-history", "--db", str(db), "--run", "1", "--gemm-fraction",
               "0.95") == 0
    assert "gemm_bf16_tflops = 570.0" in capsys.readouterr().out  # 0.95 x median(700, 700, 500, 500)


def test_nothing_to_capture_and_mixed_models_are_errors(tmp_path: Path) -> None:
    node_only = cluster_run({"h0": gpus("aa")})
    node_only["findings"] = [f for f in node_only["findings"] if f["check_id"].startswith("gpu.")]
    for section in node_only["nodes"].values():
        section["nccl"] = {}
    with pytest.raises(CaptureError, match="no GEMM"):
        capture(extract(ClusterReport.of(node_only)).measurements, source="t")
    mixed = extract(ClusterReport.of(known_good())).measurements
    mixed = [m if m.node != "h1" else msgspec.structs.replace(m, model="NVIDIA H100 80GB HBM3") for m in mixed]
    with pytest.raises(CaptureError, match="several GPU models"):
        capture(mixed, source="t")
    h100 = capture(mixed, source="t", model="NVIDIA H100 80GB HBM3")
    assert h100.perf["gemm_bf16_tflops"] == 680.0 and h100.inherited_from == "h100-sxm"
    report = tmp_path / "r.json"
    report.write_text(json.dumps(node_only))
    assert cli("baseline", "capture", str(report)) == 3
