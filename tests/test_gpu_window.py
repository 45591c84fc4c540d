"""Issue 29 item 1: DCGM's extended level runs in every distributed ``--full`` run, in the node's
GPU window: the node leader runs ``dcgmi diag -r 2`` before any rank touches CUDA, and the
other ranks wait on the job's store until it is done (real gloo ranks, a stand-in dcgmi)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.backends.launcher.topology import Launcher, Topology
from gpu_preflight.config import Config
from gpu_preflight.diagnostics.window import GpuWindow
from gpu_preflight.distributed import gpu_window
from gpu_preflight.distributed.plan import Plan, steps_for
from gpu_preflight.engine import RunOptions
from gpu_preflight.probes.dcgm import dcgm_probe

from .conftest import REPO
from .diag_tools import check, config, probe_ctx, replay, tool
from .stage_trace import HOOKS_REF, STAGE_LOG, read
from .test_diag_dcgm import SPEC, TORCHRUN_ENV
from .torch_extra import torch_or_skip

BASE_ENV = {k: v for k, v in os.environ.items() if not k.startswith(("GPU_PREFLIGHT_", "RANK", "LOCAL_RANK",
                                                                       "WORLD_SIZE", "MASTER_", "SLURM_", "OMPI_",
                                                                       "SM_", "TORCHELASTIC_"))}
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))


def timed_dcgmi(bindir: Path, log: Path, stage_log: Path) -> Path:
    """A ``dcgmi`` that writes ``start|end <level> <unix time>`` around replaying SPEC. Level 2
    lasts until rank 1 is seen waiting in the window (at most a minute) and a second more, so
    that rank 1 has been waiting, and must go on waiting, however slowly its torch starts."""
    q = shlex.quote
    waiting = f"grep -q '^1 dcgm ' {q(str(stage_log))} 2>/dev/null"
    return tool(bindir, "dcgmi", "\n".join([
        f'echo "start $3 $(date +%s.%N)" >> {q(str(log))}',
        f'if [ "$3" != 1 ]; then i=0; while ! {waiting} && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; '
        "sleep 1; fi",
        f"cat {q(str(SPEC))}",
        f'echo "end $3 $(date +%s.%N)" >> {q(str(log))}',
        "exit 226"]))


def tool_times(log: Path) -> dict[tuple[str, int], float]:
    out = {}
    for line in log.read_text().splitlines():
        what, level, when = line.split()
        out[(what, int(level))] = float(when)
    return out


def _assert_window_held(report: dict, tool_log: Path, stage_log: Path) -> None:
    levels = report["nodes"]["node_0"]["dcgm"]["diagnostics"]
    assert list(levels) == ["basic", "extended"]
    assert (levels["basic"]["level"], levels["extended"]["level"]) == (1, 2)
    assert levels["extended"]["parsed_output"]["test_results"]  # level 2 ran and was read, not refused
    findings = [f for f in report["findings"] if f["check_id"] == "dcgm.diag"]
    assert not [f for f in findings if "stresses the GPUs" in f["summary"]]
    assert {f["details"].get("level") for f in findings if f["status"] == "FAIL"} == {1, 2}
    times = tool_times(tool_log)
    assert times[("start", 2)] >= times[("end", 1)]
    level_2_end = times[("end", 2)]
    stages = read(stage_log)
    first = {(rank, name): when for rank, name, when in reversed(stages)}
    assert first[(1, "dcgm")] < level_2_end  # rank 1 reached the window while level 2 ran ...
    for rank in (0, 1):  # ... and no rank started a workload before it ended
        assert first[(rank, "stack")] > level_2_end, (rank, first, times)
        assert first[(rank, "gemm")] > level_2_end


@pytest.fixture
def bindir(tmp_path: Path) -> Path:
    path = tmp_path / "bin"
    path.mkdir()
    return path


def _env(bindir: Path, stage_log: Path) -> dict[str, str]:
    return {**BASE_ENV, "PATH": f"{bindir}:{BASE_ENV['PATH']}", "GPU_PREFLIGHT_RANK_HOOKS": HOOKS_REF,
            STAGE_LOG: str(stage_log), "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), BASE_ENV.get("PYTHONPATH")) if p)}


RUN = ["run", "--full", "--no-history", "--skip", "system.*", "--format", "json", "--quiet", "--timeout-s", "60",
       "--iters", "1", "--numel", "1024", "--steps", "5"]


def test_self_launched_full_run_holds_rank_1_until_level_2_is_done(bindir: Path, tmp_path: Path) -> None:
    torch_or_skip()
    tool_log, stage_log, out = tmp_path / "dcgmi.log", tmp_path / "stages.log", tmp_path / "report"
    timed_dcgmi(bindir, tool_log, stage_log)
    proc = subprocess.run([sys.executable, "-m", "gpu_preflight", *RUN, "--report-dir", str(out)],
                          capture_output=True, text=True, env=_env(bindir, stage_log), cwd=REPO, timeout=400)
    assert proc.returncode == 2, proc.stderr[-3000:]  # the SPEC output FAILs GPU 1 at both levels
    _assert_window_held(json.loads((out / "report.json").read_text()), tool_log, stage_log)
    assert (out / "artifacts" / "node_0" / "dcgmi_diag_r2.txt").read_text() == SPEC.read_text()


def test_torchrun_full_run_holds_rank_1_until_level_2_is_done(bindir: Path, tmp_path: Path) -> None:
    torch_or_skip()
    tool_log, stage_log, out = tmp_path / "dcgmi.log", tmp_path / "stages.log", tmp_path / "report"
    timed_dcgmi(bindir, tool_log, stage_log)
    proc = subprocess.run([TORCHRUN, "--standalone", "--nproc_per_node", "2", "-m", "gpu_preflight", *RUN,
                           "--report-dir", str(out)],
                          capture_output=True, text=True, env=_env(bindir, stage_log), cwd=REPO, timeout=400)
    assert (out / "report.json").exists(), proc.stderr[-3000:]
    _assert_window_held(json.loads((out / "report.json").read_text()), tool_log, stage_log)


def _opts(**kw: Any) -> RunOptions:
    return RunOptions(**{"suite": "full", **kw})


def _cfg(**diagnostics: Any) -> Config:
    return config(**diagnostics)


@pytest.mark.parametrize(("opts", "settings", "expected"), [
    (_opts(), {}, 120 + 600 + 10),  # level 1, then level 2, and the probes' margin
    (_opts(), {"dcgm_level_full": 3}, 120 + 2700 + 10),
    (_opts(), {"dcgm_full_runs_basic": False}, 600 + 10),
    (_opts(suite="quick"), {}, 0),  # level 1 only reads the deployment: it runs beside the workloads
    (_opts(), {"dcgm_enabled": False}, 0),
    (_opts(exclude=["dcgm.*"]), {}, 0),  # no check needs DCGM: no window to wait for
    (_opts(include=["gpu.*", "load.*"]), {}, 0),
    (_opts(include=["dcgm.*", "load.*"]), {}, 730),
    (_opts(replay="node.json"), {}, 0),
])
def test_window_length_follows_the_dcgm_levels_and_the_checks_chosen(opts: RunOptions, settings: dict[str, Any],
                                                                     expected: float) -> None:
    assert gpu_window.window_s(opts, _cfg(**settings)) == expected


def test_the_leaders_probe_runs_level_2_inside_a_launched_job_and_closes_the_window(
        bindir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "argv"
    replay(bindir, "dcgmi", SPEC, argv_log=log)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    for key, value in TORCHRUN_ENV.items():
        monkeypatch.setenv(key, value)
    window = GpuWindow()
    facts = dcgm_probe(probe_ctx(suite="full", gpu_window=window))
    assert window.closed and window.closed_after_s is not None
    assert log.read_text().splitlines() == ["diag -r 1 -j", "diag -r 2 -j"]
    assert [f.level for f in facts.levels()] == [1, 2] and all(f.record is not None for f in facts.levels())
    assert "torchrun job" not in " ".join(f.summary for f in check("dcgm.diag", "dcgm", facts))


def test_the_window_closes_whatever_the_probe_decides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no dcgmi at all
    window = GpuWindow()
    facts = dcgm_probe(probe_ctx(suite="full", gpu_window=window))
    assert window.closed and not facts.available and "dcgmi not found" in (facts.reason or "")


def test_window_wait_ends_when_closed_or_when_its_holder_is_gone() -> None:
    window = GpuWindow()
    threading.Timer(0.3, window.close).start()
    t0 = time.monotonic()
    assert window.wait(30.0) and 0.2 < time.monotonic() - t0 < 10
    gone = GpuWindow()
    t0 = time.monotonic()
    assert not gone.wait(30.0, alive=lambda: False) and time.monotonic() - t0 < 5
    assert not GpuWindow().wait(0.3)


def _topo(rank: int, nodes: int = 2, per_node: int = 2) -> Topology:
    return Topology(launcher=Launcher.TORCHRUN, world_size=nodes * per_node, rank=rank, local_rank=rank % per_node,
                    local_world_size=per_node, node_rank=rank // per_node, num_nodes=nodes,
                    hostname=f"h{rank // per_node}")


def test_every_rank_waits_for_every_nodes_window() -> None:
    dist = torch_or_skip("torch.distributed")
    store = dist.HashStore()
    windows = {0: GpuWindow(), 2: GpuWindow()}  # the two node leaders'
    done: dict[int, float] = {}
    held: dict[int, bool] = {}

    def rank(r: int) -> None:
        held[r] = gpu_window.hold(store, _topo(r), windows.get(r), 30.0)
        done[r] = time.monotonic()

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    windows[0].close()
    time.sleep(0.5)
    assert not done and all(t.is_alive() for t in threads)  # node 1's window is open: nobody goes on
    closed = time.monotonic()
    windows[2].close()
    for t in threads:
        t.join(30)
    assert held == dict.fromkeys(range(4), True) and min(done.values()) >= closed


def test_a_window_left_open_is_waited_for_only_as_long_as_its_bound() -> None:
    dist = torch_or_skip("torch.distributed")
    store = dist.HashStore()
    t0 = time.monotonic()
    assert not gpu_window.hold(store, _topo(0, nodes=1), GpuWindow(), 0.5)  # the leader gives up at its bound
    assert gpu_window.hold(store, _topo(1, nodes=1), None, 0.5)  # and still lets its node go on
    assert time.monotonic() - t0 < 10


def test_the_progress_steps_show_the_window_only_when_there_is_one() -> None:
    plan = Plan(sizes=[1024], iters=1, warmup=0, gemm_dtypes=["fp32"], gemm_n=64, gemm_iters=1, gemm_seconds=None,
                memory=False, train_steps=1)
    topo = _topo(1, nodes=1)
    assert steps_for(plan, topo)[:3] == ["arrive", "stack", "gemm"]
    plan.gpu_window = True
    assert steps_for(plan, topo)[:3] == ["arrive", "dcgm", "stack"]
