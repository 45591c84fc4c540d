"""A real ``gpu-preflight run`` (two CPU workers over gloo) through the history, the textfile and
baseline capture: the shapes these read are the ones a run really writes."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gpu_preflight.config.profiles import load_profile_file
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.history import HistoryStore, extract, history_findings
from gpu_preflight.history.baseline import capture, render_toml
from gpu_preflight.outputs.textfile import render_textfile

from .report_data import self_launched_report
from .test_textfile import promtool


def test_a_real_cpu_run_is_filed_rendered_and_captured(tmp_path: Path) -> None:
    report = self_launched_report()
    run = extract(ClusterReport.of(report))
    host = run.nodes[0]
    metrics = {(m.metric, m.subject) for m in run.measurements}
    assert {("gemm.fp32", f"{host}/rank0"), ("gemm.fp32", f"{host}/rank1")} <= metrics
    assert ("busbw.intra_node.all_reduce@2", host) in metrics  # one node: the world group is node-local
    assert run.gpus == [] and all(m.model is None for m in run.measurements)
    with HistoryStore(tmp_path / "h.sqlite") as store:
        store.record(run, "laptop")
        codes = {f.check_id: f.code for f in history_findings(ClusterReport.of(report), store, None, "laptop")}
    assert codes == {"history.regression": "cpu_only", "history.repeat_offender": "no_gpu_identity"}
    text = render_textfile(ClusterReport.of(report))
    check = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f'gpu_preflight_gemm_flops_per_second{{node="{host}",gpu="rank0",uuid="",dtype="fp32"}}' in text
    path = tmp_path / "cpu.toml"
    path.write_text(render_toml(capture(run.measurements, source="cpu run")))
    profile = load_profile_file(path)
    assert profile.name == "baseline-cpu" and profile.patterns == ()
    assert set(profile.layer.data["perf"]) >= {"gemm_fp32_tflops", "allreduce_busbw_min_gbps"}
