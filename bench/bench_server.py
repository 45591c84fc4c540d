"""Benchmark: health-server latency under load, and the CPU cost of its monitor loop.

Starts ``GPUHealthCheckServer`` on the real H200 replay in a child process twice: with a
1 s monitor interval and with the loop effectively idle (interval 1 h) as the baseline.
Reports /healthz and /metrics latency (median, p99) at a paced 200 requests/s from a
local keep-alive client, and the monitor's CPU share of one core. Targets (issue #5):
p99 < 10 ms at 200 req/s; monitor loop < 1 % of a core.

    python bench/bench_server.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _selfcheck import fail, require

DUMP = Path(__file__).resolve().parents[1] / "tests/fixtures/captured/h200-580.159.04/nvml_capture.json"
SERVER = """
import sys, time
from gpu_preflight.engine import RunOptions
from gpu_preflight.server import create_gpu_healthcheck_server
s = create_gpu_healthcheck_server(lambda: time.time(), 0, 30, gpu_check_interval=float(sys.argv[1]),
                                  options=RunOptions(replay=sys.argv[2]))
s.start()
print(s.port, flush=True)
time.sleep(3600)
"""


def start(interval: float) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(interval), str(DUMP)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.strip().isdigit():
        proc.kill()
        proc.wait()
        fail("bench_server", f"the health server did not start (exit {proc.returncode}; its stderr is above)")
    return proc, int(line)


def stop(proc: subprocess.Popen[str], what: str) -> None:
    """Stop a server that must still be serving: one that died measured nothing."""
    if proc.poll() is not None:
        fail("bench_server", f"the health server died during the {what} (exit {proc.returncode})")
    proc.kill()
    proc.wait()


def cpu_seconds(pid: int) -> float:
    import psutil

    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


def loop_cost(interval: float, seconds: float) -> float:
    proc, _ = start(interval)
    time.sleep(2)  # start-up and the first tick are not the steady state
    c0, t0 = cpu_seconds(proc.pid), time.monotonic()
    time.sleep(seconds)
    share = (cpu_seconds(proc.pid) - c0) / (time.monotonic() - t0)
    stop(proc, f"monitor-loop measurement at {interval:g} s")
    return share


def latency(port: int, path: str, rate: float, seconds: float) -> list[float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    out, period = [], 1.0 / rate
    next_at = time.perf_counter()
    end = next_at + seconds
    while next_at < end:
        now = time.perf_counter()
        if now < next_at:
            time.sleep(next_at - now)
        t0 = time.perf_counter()
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        if resp.status not in (200, 503):  # ready or not ready are both answers; anything else is not
            fail("bench_server", f"GET {path} answered HTTP {resp.status}")
        out.append((time.perf_counter() - t0) * 1000)
        next_at += period
    conn.close()
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=10)
    a = p.parse_args()
    require("bench_server", "gpu_preflight.server", "psutil")
    idle = loop_cost(3600, a.seconds)
    busy = loop_cost(1.0, a.seconds)
    proc, port = start(1.0)
    time.sleep(2)
    try:
        for path in ("/healthz", "/metrics"):
            lat = sorted(latency(port, path, 200, a.seconds / 2))
            p99 = lat[int(len(lat) * 0.99) - 1]
            print(f"{path:9} 200 req/s x {len(lat)}: median {statistics.median(lat):.2f} ms, p99 {p99:.2f} ms "
                  f"(target p99 < 10 ms)")
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    stop(proc, "latency measurement")
    print(f"monitor loop at 1 s: {busy * 100:.2f} % of a core; idle server {idle * 100:.2f} %; "
          f"loop share {(busy - idle) * 100:.2f} % (target < 1 %)")


if __name__ == "__main__":
    main()
