"""The health server: real HTTP against a started server, promtool, a real Prometheus,
fault injection through the replayed snapshot, hostile clients, a hung NVML, SIGTERM.

``gpu-preflight serve`` is started through :mod:`gpu_preflight.cli.serve_cmd` (its own
parser), so these tests do not depend on how the main CLI wires it in.
"""

from __future__ import annotations

import contextlib
import copy
import http.client
import json
import os
import queue
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.engine import RunOptions
from gpu_preflight.server import GPUHealthCheckServer, create_gpu_healthcheck_server
from gpu_preflight.server.http import HEAD_TIMEOUT_S, PROBE_HEAD_TIMEOUT_S, PROBE_SLOTS

from .nvml_stub.stub import stub_env, write_stub_data
from .test_health_api import add_gpu, old_driver, set_action, write_dump

SERVE = ("import argparse, sys\n"
         "from gpu_preflight.cli import serve_cmd\n"
         "p = argparse.ArgumentParser(prog='gpu-preflight')\n"
         "serve_cmd.add_commands(p.add_subparsers(dest='command', required=True))\n"
         "sys.exit(serve_cmd.run(p.parse_args(sys.argv[1:])))\n")
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def request(port: int, path: str, method: str = "GET", timeout: float = 5.0) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def get_json(port: int, path: str) -> tuple[int, Any]:
    status, _, body = request(port, path)
    return status, json.loads(body)


def raw(port: int, data: bytes, timeout: float = 5.0) -> bytes:
    """Send raw bytes, return everything the server answers until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def parse_metrics(text: str) -> Samples:
    samples: Samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)", line)
        assert match, line
        labels = frozenset(re.findall(r'([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"', match.group(2) or ""))
        samples[(match.group(1), labels)] = float(match.group(3))
    return samples


def sample(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool not found: install Debian's prometheus package "
                    "(apt-get install -y --no-install-recommends prometheus); CI installs it")
    return path


def eventually(condition: Callable[[], bool], timeout_s: float = 10.0, what: str = "condition") -> None:
    """Poll an outside observation (another process, a socket) until true or the deadline."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


class Replay:
    """A replay file a test can rewrite while the server reads it."""

    def __init__(self, path: Path, dump: dict[str, Any]) -> None:
        self.path = path
        self.write(dump)

    def write(self, dump: dict[str, Any]) -> None:
        write_dump(self.path, dump)


@pytest.fixture
def replay(tmp_path: Path, h200_dump: dict[str, Any]) -> Replay:
    return Replay(tmp_path / "dump.json", h200_dump)


@pytest.fixture
def serve(replay: Replay) -> Iterator[Callable[..., GPUHealthCheckServer]]:
    """Start servers on free ports (replaying ``replay``); every one is stopped afterwards."""
    started: list[GPUHealthCheckServer] = []

    def start(alive: Callable[[], float] = time.time, timeout: float = 30, interval: float = 60,
              **kwargs: Any) -> GPUHealthCheckServer:
        options = kwargs.pop("options", RunOptions(replay=str(replay.path)))
        server = create_gpu_healthcheck_server(alive, 0, timeout, gpu_check_interval=interval, options=options,
                                               **kwargs)
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def next_tick(server: GPUHealthCheckServer) -> None:
    """Wait for a tick that started after now (the one in progress may have read old data)."""
    snap = server.monitor.snapshot
    seen = snap.tick if snap else 0
    assert server.wait_for_tick(seen + 1, 30), "monitor did not tick"


def test_endpoints_answer_from_the_last_verdict(serve: Callable[..., GPUHealthCheckServer]) -> None:
    server = serve()
    assert server.url.startswith("http://127.0.0.1:")  # loopback by default
    assert server.wait_for_tick(0, 30)
    port = server.port
    assert get_json(port, "/healthz") == (200, {"alive": True, "reasons": [
        "monitor loop running; agent progress within timeout"]})
    code, ready = get_json(port, "/readyz")
    assert code == 200 and ready["ready"] is True
    code, status = get_json(port, "/status")
    assert code == 200 and status["overall_healthy"] is True
    assert status["gpu_health"]["status"] == "healthy" and status["gpu_health"]["is_healthy"] is True
    assert status["report"]["nodes"]["node_0"]["gpu"]["gpu_0"]["name"] == "NVIDIA H200"
    code, headers, body = request(port, "/metrics")
    assert code == 200 and headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    code, headers, body = request(port, "/metrics", method="HEAD")
    assert code == 200 and body == b"" and int(headers["content-length"]) > 1000
    assert request(port, "/healthz?probe=k8s")[0] == 200
    assert request(port, "/nope")[0] == 404
    code, headers, _ = request(port, "/readyz", method="POST")
    assert code == 405 and headers["allow"] == "GET, HEAD"
    assert server.get_health_summary()["overall_healthy"] is True
    with pytest.raises(RuntimeError):
        server.start()


def test_metrics_pass_promtool_and_carry_the_readings(serve: Callable[..., GPUHealthCheckServer], replay: Replay,
                                                      h200_dump: dict[str, Any]) -> None:
    dump = set_action(add_gpu(copy.deepcopy(h200_dump)), 1, gpu=1)
    gpu1 = dump["devices"][1]
    gpu1["nvmlDeviceGetTemperature"] = {"error": "NVMLError_NotSupported", "value": 3, "str": "Not Supported"}
    gpu1["ecc_total"]["volatile_corrected"] = {"ok": 3}
    gpu1["nvmlDeviceGetRemappedRows"] = {"ok": [2, 1, 1, 0]}
    gpu1["nvmlDeviceGetCurrentClocksEventReasons"] = {"ok": 0x48}
    replay.write(dump)
    server = serve()
    assert server.wait_for_tick(0, 30)
    text = request(server.port, "/metrics")[2].decode()
    check = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True)
    assert (check.returncode, check.stdout, check.stderr) == (0, "", "")

    m = parse_metrics(text)
    uuid0 = h200_dump["devices"][0]["nvmlDeviceGetUUID"]["ok"]
    uuid1 = "GPU-00000000-0000-0000-0000-000000000001"
    assert sample(m, "gpu_preflight_gpu_temperature_celsius", gpu="0", uuid=uuid0) == 31
    assert not [k for k in m if k[0] == "gpu_preflight_gpu_temperature_celsius" and ("gpu", "1") in k[1]]
    assert sample(m, "gpu_preflight_gpu_power_draw_watts", gpu="0", uuid=uuid0) == pytest.approx(76.424)
    assert sample(m, "gpu_preflight_gpu_ecc_errors_total", gpu="1", uuid=uuid1, severity="corrected",
                  scope="volatile") == 3
    assert sample(m, "gpu_preflight_gpu_remapped_rows_total", gpu="1", uuid=uuid1, severity="uncorrectable") == 1
    assert sample(m, "gpu_preflight_gpu_row_remap_pending", gpu="1", uuid=uuid1) == 1
    assert sample(m, "gpu_preflight_gpu_recovery_action", gpu="1", uuid=uuid1) == 1
    assert sample(m, "gpu_preflight_gpu_recovery_action", gpu="0", uuid=uuid0) == 0
    assert sample(m, "gpu_preflight_gpu_clock_event_reason_active", gpu="1", uuid=uuid1,
                  reason="hw_thermal_slowdown") == 1
    assert sample(m, "gpu_preflight_gpu_clock_event_reason_active", gpu="1", uuid=uuid1, reason="gpu_idle") == 0
    assert sample(m, "gpu_preflight_gpu_health", gpu="1", uuid=uuid1, state="unhealthy") == 1
    assert sample(m, "gpu_preflight_gpu_health_status", state="unhealthy") == 1
    assert sample(m, "gpu_preflight_check_status", check="gpu.recovery_action", status="fail") == 1
    per_check: dict[str, float] = {}
    for (name, labels), value in m.items():
        if name == "gpu_preflight_check_status":
            check_id = dict(labels)["check"]
            per_check[check_id] = per_check.get(check_id, 0) + value
    assert per_check and set(per_check.values()) == {1}  # exactly one status per check
    assert sample(m, "gpu_preflight_ready") == 0 and sample(m, "gpu_preflight_alive") == 1
    assert sample(m, "gpu_preflight_runs_total") == 1


def test_recovery_action_flips_readiness_and_calls_on_failure_once(
        serve: Callable[..., GPUHealthCheckServer], replay: Replay, h200_dump: dict[str, Any]) -> None:
    failures: list[int] = []
    server = serve(interval=0.05, on_gpu_failure=lambda: failures.append(1))
    assert server.wait_for_tick(0, 30)
    assert request(server.port, "/readyz")[0] == 200
    replay.write(set_action(copy.deepcopy(h200_dump), 1))
    next_tick(server)
    code, ready = get_json(server.port, "/readyz")
    assert code == 503 and any("GPU_RESET" in r for r in ready["reasons"])
    gpu = get_json(server.port, "/status")[1]["gpu_health"]
    assert gpu["status"] == "unhealthy" and gpu["is_healthy"] is False
    assert gpu["gpus"][0]["recovery_action"] == "GPU_RESET" and "reset" in gpu["gpus"][0]["recommendation"]
    for _ in range(3):
        next_tick(server)
    assert failures == [1]
    replay.write(h200_dump)
    next_tick(server)
    assert request(server.port, "/readyz")[0] == 200 and failures == [1]


def test_unknown_gpu_health_is_never_ready_unless_asked(serve: Callable[..., GPUHealthCheckServer],
                                                       replay: Replay, h200_dump: dict[str, Any]) -> None:
    replay.write(old_driver(h200_dump))
    strict = serve()
    lenient = serve(healthy_when_unknown=True)
    unmonitored = serve(enable_gpu_monitoring=False)
    for server in (strict, lenient, unmonitored):
        assert server.wait_for_tick(0, 30)
    code, ready = get_json(strict.port, "/readyz")
    assert code == 503 and any("GPU health unknown" in r and "r570" in r for r in ready["reasons"])
    assert strict.get_gpu_health_status()["is_healthy"] is False
    assert request(lenient.port, "/readyz")[0] == 200
    assert request(unmonitored.port, "/readyz")[0] == 200
    assert unmonitored.get_gpu_health_status()["status"] == "disabled"
    assert "gpu_preflight_gpu_health_status" not in request(unmonitored.port, "/metrics")[2].decode()


def test_liveness_follows_the_alive_callback(serve: Callable[..., GPUHealthCheckServer]) -> None:
    progress = [time.time()]
    mode = ["ok"]
    calls = threading.Condition()
    count = [0]
    release = threading.Event()

    def alive() -> float:
        with calls:
            count[0] += 1
            calls.notify_all()
        if mode[0] == "raise":
            raise RuntimeError("agent state unreadable")
        if mode[0] == "hang":
            release.wait(30)
        return progress[0]

    def sampled_twice() -> None:
        """Two more calls: the first call after a change has then been recorded."""
        with calls:
            target = count[0] + 2
            assert calls.wait_for(lambda: count[0] >= target, 10)

    server = serve(alive=alive, timeout=1.0)
    try:
        assert request(server.port, "/healthz")[0] == 200
        progress[0] = time.time() - 60
        sampled_twice()
        code, body = get_json(server.port, "/healthz")
        assert code == 503 and "no progress" in body["reasons"][0]
        mode[0] = "raise"
        sampled_twice()
        code, body = get_json(server.port, "/healthz")
        assert code == 503 and "agent state unreadable" in body["reasons"][0]
        mode[0], progress[0] = "hang", time.time()

        def hang_seen() -> bool:
            started = time.monotonic()
            code, body = get_json(server.port, "/healthz")
            assert time.monotonic() - started < 1.0  # a hung callback never delays the answer
            return code == 503 and ("did not answer" in body["reasons"][0] or "has not returned" in body["reasons"][0])

        eventually(hang_seen, what="/healthz to report the hung callback")
    finally:
        release.set()
    mode[0] = "ok"
    eventually(lambda: request(server.port, "/healthz")[0] == 200, what="/healthz to recover")


BAD_REQUESTS = [
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET /healthz HTTP/1.x\r\n\r\n", 400),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400),  # a TLS ClientHello
    (b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\n\r\n", 414),
    (b"GET /healthz HTTP/1.1\r\nX-Big: " + b"b" * 9000 + b"\r\n\r\n", 431),
    (b"GET /healthz HTTP/1.1\r\n" + b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 60) for i in range(200)) + b"\r\n",
     431),
    (b"GET /healthz HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n", 400),  # a body: refused (issue 28)
    (b"GET /healthz HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    (b"POST /readyz HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 400),
    (b"POST /readyz HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405),
]


def test_malformed_and_oversized_requests_get_4xx_and_serving_continues(
        serve: Callable[..., GPUHealthCheckServer]) -> None:
    server = serve()
    for data, expected in BAD_REQUESTS:
        response = raw(server.port, data)
        assert status_of(response) == expected, (data[:40], response[:200])
        assert request(server.port, "/healthz")[0] == 200
    # a request line cut off mid-way by a client that then goes away
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"GET /heal")
    assert request(server.port, "/healthz")[0] == 200


def held(port: int, count: int) -> list[socket.socket]:
    """``count`` connections that have sent nothing, each accepted by the server (it answered nothing yet)."""
    socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(count)]
    time.sleep(0.3)  # the accept loop takes them in order, before any later connection
    return socks


def test_connection_cap_keeps_probe_slots_then_503_and_recovers(serve: Callable[..., GPUHealthCheckServer]) -> None:
    server = serve(max_connections=4)
    assert server.wait_for_tick(0, 30)
    idle = held(server.port, 4)
    try:
        for path in (b"/healthz", b"/readyz"):  # the pool is full: a reserved slot answers the probes
            answer = raw(server.port, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            assert status_of(answer) == 200 and b"Connection: close" in answer
        busy = raw(server.port, b"GET /status HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status_of(busy) == 503 and b"busy: only /healthz, /readyz are answered now" in busy
        idle += held(server.port, PROBE_SLOTS)
        assert status_of(raw(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")) == 503
    finally:
        for sock in idle:
            sock.close()
    eventually(lambda: request(server.port, "/status")[0] == 200, what="slots to be released")


def test_slow_loris_connections_never_starve_the_probes(serve: Callable[..., GPUHealthCheckServer]) -> None:
    """70 connections trickling one header byte every 0.5 s (more than --max-connections 64): /healthz
    and /readyz keep answering 200 within a bound, and every slow connection is dropped with 408
    once its head deadline passes (PROBE_HEAD_TIMEOUT_S on a reserved slot, HEAD_TIMEOUT_S otherwise)."""
    server = serve()
    assert server.wait_for_tick(0, 30)
    port = server.port
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4000
    started = time.monotonic()  # the head deadlines count from the connection
    slow = held(port, 70)
    answers: dict[socket.socket, bytes] = {s: b"" for s in slow}
    closed_at: dict[socket.socket, float] = {}
    latencies: list[float] = []
    busy_status = None
    sent = 0
    next_send = next_probe = started
    while len(closed_at) < len(slow) and time.monotonic() - started < HEAD_TIMEOUT_S + 5:
        open_ = [s for s in slow if s not in closed_at]
        readable, _, _ = select.select(open_, [], [], 0.02)
        for sock in readable:
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                data = b""
            answers[sock] += data
            if not data:
                closed_at[sock] = time.monotonic() - started
        now = time.monotonic()
        if now >= next_send:  # one more byte on every connection the server has not answered
            for sock in open_:
                if not answers[sock]:
                    with contextlib.suppress(OSError):
                        sock.send(head[sent:sent + 1])
            sent += 1
            next_send += 0.5
        if now >= next_probe and now - started < HEAD_TIMEOUT_S - 0.5:
            for path in ("/healthz", "/readyz"):
                t0 = time.monotonic()
                code, _, _ = request(port, path, timeout=5)
                latencies.append(time.monotonic() - t0)
                assert code == 200, (path, now - started)
            if busy_status is None:
                busy_status = request(port, "/status", timeout=5)[0]
            next_probe = now + 0.25
    for sock in slow:
        sock.close()
    assert busy_status == 503  # the pool really was full: the probes were answered on reserved slots
    assert len(latencies) >= 20 and max(latencies) < 1.0, sorted(latencies)[-5:]
    assert len(closed_at) == len(slow), f"{len(slow) - len(closed_at)} slow connections still open"
    assert all(status_of(answer) == 408 for answer in answers.values())
    on_pool = sorted(closed_at.values())[-64:]
    assert on_pool[0] > HEAD_TIMEOUT_S - 0.2 and on_pool[-1] < HEAD_TIMEOUT_S + 2.0, on_pool
    assert all(t > PROBE_HEAD_TIMEOUT_S - 0.2 for t in closed_at.values())
    assert request(port, "/status")[0] == 200


def test_many_clients_at_once(serve: Callable[..., GPUHealthCheckServer]) -> None:
    server = serve(interval=0.05)
    assert server.wait_for_tick(0, 30)
    barrier = threading.Barrier(32)
    results: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    paths = ["/healthz", "/readyz", "/metrics", "/status"]

    def client(n: int) -> None:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            barrier.wait()
            for i in range(20):  # keep-alive: many requests on one connection
                conn.request("GET", paths[(n + i) % 4])
                resp = conn.getresponse()
                resp.read()
                with lock:
                    results.append(resp.status)
            conn.close()
        except BaseException as exc:
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert results == [200] * 640
    assert server.wait_for_tick(1, 30)  # the monitor kept ticking through the burst (no timing bet)


def test_keep_alive_answers_are_not_held_back(serve: Callable[..., GPUHealthCheckServer]) -> None:
    """Headers and body leave in two writes; without TCP_NODELAY, Nagle and the client's
    delayed ACK hold every keep-alive answer back by ~40 ms."""
    server = serve()
    assert server.wait_for_tick(0, 30)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    took = []
    for _ in range(25):
        started = time.perf_counter()
        conn.request("GET", "/metrics")
        conn.getresponse().read()
        took.append(time.perf_counter() - started)
    conn.close()
    steady = sorted(took[5:])  # the first answers are quick-ACKed either way
    assert steady[5] < 0.03, steady


def test_stuck_node_checks_never_block_the_server(serve: Callable[..., GPUHealthCheckServer],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    entered = threading.Event()

    def hung_run_checks(options: RunOptions) -> Any:
        entered.set()
        release.wait(60)
        raise RuntimeError("released")

    monkeypatch.setattr("gpu_preflight.health.reader.run_checks", hung_run_checks)
    try:
        server = serve(check_timeout_s=0.3, interval=0.05)
        assert entered.wait(10)
        started = time.monotonic()
        assert request(server.port, "/healthz")[0] == 200  # the loop is within its deadline
        code, ready = get_json(server.port, "/readyz")
        assert code == 503 and "no verdict yet" in ready["reasons"][0]
        assert time.monotonic() - started < 1.0
        assert server.wait_for_tick(0, 10)
        code, ready = get_json(server.port, "/readyz")
        assert code == 503 and "did not finish" in ready["reasons"][0]
        assert server.wait_for_tick(1, 10)  # the next tick does not start a second hung call
        assert "has not returned" in get_json(server.port, "/readyz")[1]["reasons"][0]
        assert server.get_gpu_health_status()["status"] == "unknown"
    finally:
        release.set()


def test_prometheus_scrapes_the_server(serve: Callable[..., GPUHealthCheckServer], tmp_path: Path) -> None:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus not found: apt-get install -y --no-install-recommends prometheus (CI installs it)")
    server = serve(interval=1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        prom_port = s.getsockname()[1]
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
                      "  - job_name: gpu-preflight\n    static_configs:\n"
                      f"      - targets: ['127.0.0.1:{server.port}']\n")
    prom = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{prom_port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    found: dict[str, Any] = {}

    def scraped() -> bool:
        query = urllib.parse.urlencode({"query": "gpu_preflight_gpu_temperature_celsius"})
        try:
            code, _, body = request(prom_port, f"/api/v1/query?{query}", timeout=2)
        except OSError:
            return False
        result = json.loads(body)["data"]["result"] if code == 200 else []
        if result:
            found.update(result[0])
        return bool(result)

    try:
        eventually(scraped, 60, "Prometheus to scrape /metrics")
        up = json.loads(request(prom_port, "/api/v1/query?query=up")[2])["data"]["result"]
    finally:
        prom.terminate()
        prom.wait(30)
    assert found["metric"]["gpu"] == "0" and float(found["value"][1]) == 31
    assert [(r["metric"]["job"], r["value"][1]) for r in up] == [("gpu-preflight", "1")]


@dataclass
class Served:
    """A ``serve`` subprocess, its URL and the stderr lines it has printed."""

    proc: subprocess.Popen[str]
    url: str
    lines: queue.Queue[str]

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def stop(self) -> list[str]:
        """SIGTERM; the server must exit 0. Returns what it printed on stderr."""
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(15) == 0
        out: list[str] = []
        while not self.lines.empty():
            out.append(self.lines.get())
        return out


def start_cli(*args: str, env: dict[str, str] | None = None) -> Served:
    """Start ``serve`` in a subprocess and return once it listens."""
    proc = subprocess.Popen([sys.executable, "-c", SERVE, "serve", "--port", "0", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    stderr = proc.stderr
    assert stderr is not None
    threading.Thread(target=lambda: [lines.put(line) for line in stderr], daemon=True).start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            assert proc.poll() is None, "serve exited early"
            continue
        if "serving on" in line:
            return Served(proc, line.split("serving on ")[1].split()[0], lines)
    proc.kill()
    pytest.fail("serve did not start listening")


def query_cli(port: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SERVE, "serve", "--query", "--port", str(port)],
                          capture_output=True, text=True)


def test_hung_nvml_never_blocks_the_server(stub_lib: Path, tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    """GPU 0 hangs in nvmlDeviceGetTemperature on every read. The server keeps answering at
    once, reports the GPU lost, then stops reading NVML instead of leaking threads; SIGTERM
    still stops it cleanly."""
    write_stub_data(h200_dump, tmp_path / "nvml.txt")
    env = stub_env(stub_lib, tmp_path / "nvml.txt", FAKE_NVML_HANG="0:nvmlDeviceGetTemperature:600")
    served = start_cli("--interval", "0.2", "--check-timeout-s", "1", "--timeout", "10", env=env)
    port = served.port
    try:
        latencies = []

        def suspended() -> bool:
            started = time.monotonic()
            code, ready = get_json(port, "/readyz")
            alive = request(port, "/healthz")[0]
            latencies.append(time.monotonic() - started)
            assert (code, alive) == (503, 200)  # never ready, always alive and answering
            return any("suspended" in r for r in ready["reasons"])

        eventually(suspended, 60, "NVML reads to be suspended")
        assert sorted(latencies)[len(latencies) // 2] < 0.5  # while NVML calls hang in the driver
        status = get_json(port, "/status")[1]
        assert status["gpu_health"]["status"] == "unhealthy"
        threads = status["monitor"]["threads"]
        ticks = status["monitor"]["ticks"]
        eventually(lambda: get_json(port, "/status")[1]["monitor"]["ticks"] >= ticks + 10, 30, "more ticks")
        # a leak would add a blocked thread per tick; allow for a request thread still closing
        assert get_json(port, "/status")[1]["monitor"]["threads"] <= threads + 2
        assert query_cli(port).returncode == 2
    finally:
        out = served.stop()
    assert any("stopped" in line for line in out)


def test_cli_once_query_and_sigterm(tmp_path: Path, h200_dump: dict[str, Any]) -> None:
    healthy = write_dump(tmp_path / "ok.json", h200_dump)
    bad = write_dump(tmp_path / "bad.json", set_action(copy.deepcopy(h200_dump), 2))
    once = subprocess.run([sys.executable, "-c", SERVE, "serve", "--once", "--replay", healthy],
                          capture_output=True, text=True)
    assert once.returncode == 0, once.stderr
    doc = json.loads(once.stdout)
    assert doc["ready"] is True and doc["report"]["schema_version"]
    failed = subprocess.run([sys.executable, "-c", SERVE, "serve", "--once", "--replay", bad],
                            capture_output=True, text=True)
    assert failed.returncode == 2 and json.loads(failed.stdout)["gpu_health"]["gpus"][0]["recovery_action"] == \
        "NODE_REBOOT"
    usage = subprocess.run([sys.executable, "-c", SERVE, "serve", "--replay", str(tmp_path / "missing.json")],
                           capture_output=True, text=True)
    assert usage.returncode == 3 and "cannot read replay file" in usage.stderr

    served = start_cli("--replay", healthy, "--interval", "0.2")
    try:
        eventually(lambda: query_cli(served.port).returncode == 0, 30, "the server to be ready")
        assert query_cli(served.port).stdout.startswith("ready: ")
        os.replace(bad, healthy)
        eventually(lambda: query_cli(served.port).returncode == 2, 30, "the server to see the recovery action")
        assert "NODE_REBOOT" in query_cli(served.port).stdout
    finally:
        out = served.stop()
    assert any("SIGTERM: stopping" in line for line in out)
    closed = query_cli(served.port)
    assert closed.returncode == 3 and "no answer" in closed.stdout


def test_stop_is_idempotent_and_frees_the_port(serve: Callable[..., GPUHealthCheckServer]) -> None:
    server = serve()
    port = server.port
    server.stop()
    server.stop()
    with pytest.raises(OSError):
        request(port, "/healthz", timeout=1)
    assert isinstance(server, GPUHealthCheckServer)


@pytest.mark.parametrize("interval", [0.0, -1.0, float("nan"), float("inf")])
def test_a_monitor_interval_that_would_spin_or_never_tick_is_refused(interval: float) -> None:
    with pytest.raises(ValueError, match="monitor interval must be a finite number of seconds above 0"):
        create_gpu_healthcheck_server(time.time, 0, 30, gpu_check_interval=interval, enable_gpu_monitoring=False)


def test_readiness_and_liveness_rules_fail_closed() -> None:
    from gpu_preflight.model import CheckResult, Finding, NodeReport, Status
    from gpu_preflight.server.state import AliveSample, Snapshot, liveness, readiness

    passed = [CheckResult("system.cpu", "CPU", [Finding("system.cpu", Status.PASS, "h", "ok", "ok")], 0.0)]

    def snap(**changes: Any) -> Snapshot:
        fields: dict[str, Any] = {
            "tick": 1, "finished_at": 0.0, "finished_mono": 100.0, "duration_s": 0.1,
            "report": NodeReport(hostname="h", timestamp="t", results=passed), "error": None, "gpu": None,
            "runs_total": 1, "run_failures_total": 0}
        return Snapshot(**{**fields, **changes})

    rule = {"stale_after_s": 10.0, "fail_on": "fail", "healthy_when_unknown": False}
    assert readiness(snap(), now_mono=105.0, **rule)[0] is True
    assert "no verdict yet" in readiness(None, now_mono=105.0, **rule)[1][0]
    assert "old" in readiness(snap(), now_mono=111.0, **rule)[1][0]
    assert readiness(snap(report=None, error="node checks did not finish"), now_mono=101.0,
                     **rule)[1] == ["node checks did not finish"]

    fine = AliveSample(progress=1000.0, sampled_mono=100.0, progress_mono=99.0)
    live = {"now_mono": 100.5, "timeout_s": 5.0, "sampler_alive": True, "loop_alive": True,
            "loop_busy_for": None, "tick_deadline_s": 3.0}
    assert liveness(fine, **live)[0] is True
    assert "not running" in liveness(fine, **{**live, "loop_alive": False})[1][0]
    assert "in one tick" in liveness(fine, **{**live, "loop_busy_for": 10.0})[1][0]
    assert liveness(fine, **{**live, "loop_busy_for": 2.0})[0] is True
    assert "no longer sampled" in liveness(fine, **{**live, "sampler_alive": False})[1][0]
    assert "no longer sampled" in liveness(fine, **{**live, "now_mono": 110.0})[1][0]
    silent = AliveSample(1000.0, 104.0, None, 99.0)  # progress made at 99.0 on the monotonic clock
    assert "no progress for 5.5 s" in liveness(silent, **{**live, "now_mono": 104.5})[1][0]
