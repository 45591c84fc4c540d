"""Benchmark: what the monitor loop costs a node, children included, live against the 8-GPU NVML stub.

Starts two ``gpu-preflight serve`` processes on the stub ``libnvidia-ml.so.1`` (built here
with gcc, fed the recorded H200 dump widened to 8 GPUs): one ticking every ``--interval``
seconds, and as the baseline an idle one (interval one hour: the HTTP server alone).
Windows alternate between the two; in each, the process's CPU time is read from
``/proc/<pid>/stat`` as utime + stime + cutime + cstime, so tools it starts (``fi_info``,
``dmesg``, ``lspci``) count as much as its own Python. Ticks in the window come from its
``/metrics`` (``runs_total``). Medians over the windows are printed: the share of one
core, the part spent in children, and the CPU per tick. Target (issue 16): below 1 % of
a core at ``--interval 1``, children included.

On a GPU machine ``--live`` watches the real GPUs instead of the stub. ``--compare SRC``
adds a third server, the same monitor run from another checkout's ``src`` (an earlier
commit, say: ``git archive <commit> | tar -x -C /tmp/base``), to the alternation, so a
change is measured against its baseline under the same load.

``--ticks N`` measures the loop alone instead, in one process with no server around it: a
child builds the monitor (``Monitor(RunOptions(), interval)``), ticks it 5 times to warm
up, then ``N`` times back to back, and prints the CPU (``os.times()``, user + system) per
tick; ``--windows`` such children alternate with ``--compare``'s. Finer-grained than the
server windows (which resolve 1/100 s of CPU), and it counts no HTTP or sampler thread.

    python bench/bench_monitor.py [--windows 5] [--seconds 10] [--interval 1] [--live] [--compare SRC]
    python bench/bench_monitor.py --ticks 60 [--windows 5] [--compare SRC]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _selfcheck import child_env, fail, require

BENCH = "bench_monitor"
REPO = Path(__file__).resolve().parents[1]
DUMP = REPO / "tests/fixtures/captured/h200-580.159.04/nvml_capture.json"
TARGET = 0.01
TICKS = re.compile(r"^gpu_preflight_runs_total\s+(\d+)", re.MULTILINE)
IN_PROCESS = """
import json, os, sys
from gpu_preflight.engine import RunOptions
from gpu_preflight.server.monitor import Monitor
interval, count = float(sys.argv[1]), int(sys.argv[2])
monitor = Monitor(RunOptions(), interval)
for _ in range(5):
    snap = monitor.tick()
t0 = os.times()
for _ in range(count):
    snap = monitor.tick()
t1 = os.times()
monitor.stop()
print(json.dumps({"cpu_per_tick_ms": 1000 * (t1.user - t0.user + t1.system - t0.system) / count,
                  "error": snap.error, "checks": len(snap.report.results) if snap.report else 0}))
"""


def cpu(pid: int) -> tuple[float, float]:
    """(own, children) CPU seconds of ``pid`` so far, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime) / tick, (cutime + cstime) / tick


def serve(interval: float, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    argv = [sys.executable, "-m", "gpu_preflight", "serve", "--port", "0", "--interval", str(interval)]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if m := re.search(r"serving on (http://\S+)", line):
            return proc, m.group(1)
    fail(BENCH, f"gpu-preflight serve exited (exit {proc.wait()}) before serving", proc.stderr.read())


def ticks(url: str) -> int:
    host, port = url.removeprefix("http://").rstrip("/").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("GET", "/metrics")
        m = TICKS.search(conn.getresponse().read().decode())
    finally:
        conn.close()
    return int(m.group(1)) if m else 0


def window(proc: subprocess.Popen[str], url: str, seconds: float) -> dict[str, float]:
    (own0, kids0), n0, t0 = cpu(proc.pid), ticks(url), time.monotonic()
    time.sleep(seconds)
    (own1, kids1), n1, t1 = cpu(proc.pid), ticks(url), time.monotonic()
    span = t1 - t0
    return {"share": (own1 - own0 + kids1 - kids0) / span, "children": (kids1 - kids0) / span,
            "ticks": n1 - n0, "cpu_per_tick_ms": 1000 * (own1 - own0 + kids1 - kids0) / max(1, n1 - n0)}


def in_process(args: argparse.Namespace, env: dict[str, str]) -> int:
    """``--ticks``: CPU per tick of the bare loop, alternated with ``--compare``'s (medians)."""
    trees = {"monitor": env}
    if args.compare is not None:
        trees["baseline"] = {**env, "PYTHONPATH": str(args.compare.resolve())}
    per_tick: dict[str, list[float]] = {name: [] for name in trees}
    load0 = os.getloadavg()[0]
    for _ in range(args.windows):
        for name, tree_env in trees.items():
            proc = subprocess.run([sys.executable, "-c", IN_PROCESS, str(args.interval), str(args.ticks)],
                                  env=tree_env, capture_output=True, text=True, timeout=600, check=False)
            if proc.returncode != 0:
                fail(BENCH, f"the {name} monitor did not tick (exit {proc.returncode})", proc.stderr)
            out = json.loads(proc.stdout)
            if out["error"] or not out["checks"]:
                fail(BENCH, f"the {name} monitor's ticks failed: {out['error'] or 'no checks ran'}")
            per_tick[name].append(out["cpu_per_tick_ms"])
    load1 = os.getloadavg()[0]
    med = {name: statistics.median(v) for name, v in per_tick.items()}
    print(f"machine: {os.cpu_count()} CPUs, load average {load0:.1f} -> {load1:.1f}; "
          f"{'live GPUs' if args.live else 'stub: 8 GPUs'}; in one process, {args.windows} alternated rounds of "
          f"{args.ticks} ticks back to back, medians")
    print(f"monitor tick: {med['monitor']:.2f} ms CPU "
          f"(rounds {' '.join(f'{v:.2f}' for v in per_tick['monitor'])})")
    if "baseline" in med:
        print(f"baseline ({args.compare}): {med['baseline']:.2f} ms CPU "
              f"(rounds {' '.join(f'{v:.2f}' for v in per_tick['baseline'])}); "
              f"ratio now/baseline {med['monitor'] / med['baseline']:.2f}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--live", action="store_true", help="watch this machine's GPUs, not the stub")
    ap.add_argument("--compare", type=Path, metavar="SRC",
                    help="also run the monitor from this source directory (a baseline checkout's src)")
    ap.add_argument("--ticks", type=int, metavar="N",
                    help="measure the loop in one process, N ticks back to back per round (no server)")
    args = ap.parse_args()
    if args.ticks is not None and args.ticks < 1:
        fail(BENCH, f"--ticks must be at least 1, got {args.ticks}")
    if args.compare is not None and not (args.compare / "gpu_preflight" / "__init__.py").is_file():
        fail(BENCH, f"--compare {args.compare}: no gpu_preflight package there (give a checkout's src directory)")
    require(BENCH, "gpu_preflight", "pynvml", "psutil")
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        env = child_env(tmp)
        if not args.live:
            sys.path.insert(0, str(REPO))
            from tests.nvml_stub.gpus import widen
            from tests.nvml_stub.stub import build_stub, write_stub_data

            build_stub(tmp)
            write_stub_data(widen(json.loads(DUMP.read_text()), 8), tmp / "nvml.txt")
            env.update(LD_LIBRARY_PATH=f"{tmp}:{env.get('LD_LIBRARY_PATH', '')}".rstrip(":"),
                       FAKE_NVML_DATA=str(tmp / "nvml.txt"))
        if args.ticks is not None:
            return in_process(args, env)
        servers = {"monitor": serve(args.interval, env), "idle": serve(3600.0, env)}
        if args.compare is not None:
            servers["baseline"] = serve(args.interval, {**env, "PYTHONPATH": str(args.compare.resolve())})
        try:
            time.sleep(max(5.0, 3 * args.interval))  # start-up and the first ticks (whole kernel log) are not steady
            runs: dict[str, list[dict[str, float]]] = {name: [] for name in servers}
            load0 = os.getloadavg()[0]
            for _ in range(args.windows):
                for name, (proc, url) in servers.items():
                    runs[name].append(window(proc, url, args.seconds))
            load1 = os.getloadavg()[0]
        finally:
            for proc, _url in servers.values():
                proc.terminate()
                proc.wait(10)
    for name in ("monitor", "baseline"):
        if name in runs and not all(w["ticks"] for w in runs[name]):
            fail(BENCH, f"the {name} did not tick in every window: {[w['ticks'] for w in runs[name]]}")
    med = {name: {k: statistics.median(w[k] for w in ws) for k in ws[0]} for name, ws in runs.items()}
    mon, base = med["monitor"], med["idle"]
    print(f"machine: {os.cpu_count()} CPUs, load average {load0:.1f} -> {load1:.1f}; "
          f"{'live GPUs' if args.live else 'stub: 8 GPUs'}; "
          f"{args.windows} alternated windows of {args.seconds:g} s, medians")
    print(f"monitor --interval {args.interval:g}: {100 * mon['share']:.2f} % of a core "
          f"(children {100 * mon['children']:.2f} %), {mon['ticks']:.0f} ticks/window, "
          f"{mon['cpu_per_tick_ms']:.1f} ms CPU per tick")
    if "baseline" in med:
        old = med["baseline"]
        print(f"baseline ({args.compare}): {100 * old['share']:.2f} % of a core "
              f"(children {100 * old['children']:.2f} %), {old['ticks']:.0f} ticks/window, "
              f"{old['cpu_per_tick_ms']:.1f} ms CPU per tick; ratio now/baseline "
              f"{mon['share'] / old['share']:.2f}" if old["share"] else "baseline used no CPU")
    print(f"idle server (HTTP only): {100 * base['share']:.2f} % of a core (children {100 * base['children']:.2f} %)")
    loop = mon["share"] - base["share"]
    print(f"loop alone: {100 * loop:.2f} % of a core (target < {100 * TARGET:g} % including children: "
          f"{'met' if mon['share'] < TARGET else 'missed'})")
    return 0 if mon["share"] < TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
