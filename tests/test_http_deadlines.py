"""The health server's request-head deadline and idle timeout, with real sockets and short limits.

The stdlib's socket timeout is per ``recv``: a client that sends one byte just inside it
holds a connection for as long as the head budget lasts. These tests time when the server
drops each kind of slow client, against a :class:`HealthHTTPServer` with limits of a
fraction of a second so the whole file runs in a few seconds.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from gpu_preflight.server.http import HealthHTTPServer

HEAD_S = 0.6
IDLE_S = 1.0
SLACK_S = 0.35  # thread scheduling on a busy 2-core machine


def ok() -> tuple[int, str, bytes]:
    return 200, "text/plain", b"ok\n"


@pytest.fixture
def port() -> Iterator[int]:
    server = HealthHTTPServer(("127.0.0.1", 0), {"/healthz": ok, "/readyz": ok, "/other": ok}, 2,
                              head_timeout_s=HEAD_S, idle_timeout_s=IDLE_S)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def until_closed(sock: socket.socket, started: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes, and when it closed (seconds after ``started``)."""
    chunks = []
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return b"".join(chunks), time.monotonic() - started
        chunks.append(chunk)


def one_answer(sock: socket.socket) -> bytes:
    """One complete keep-alive answer (head and its Content-Length body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += sock.recv(65536)
    assert len(body) == length
    return head + b"\r\n\r\n" + body


def connect(port: int) -> tuple[socket.socket, float]:
    started = time.monotonic()
    return socket.create_connection(("127.0.0.1", port), timeout=10), started


def test_silent_connection_is_closed_at_the_head_deadline_without_an_answer(port: int) -> None:
    sock, started = connect(port)
    with sock:
        data, closed = until_closed(sock, started)
    assert data == b"" and HEAD_S - 0.05 < closed < HEAD_S + SLACK_S


def test_trickled_head_is_cut_off_with_408_although_every_byte_came_in_time(port: int) -> None:
    sock, started = connect(port)
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
    with sock:
        for i in range(int(HEAD_S / 0.1) + 5):
            try:
                sock.send(head[i:i + 1])
            except OSError:
                break
            time.sleep(0.1)  # far inside any per-recv timeout
            if time.monotonic() - started > HEAD_S + 0.1:
                break
        data, closed = until_closed(sock, started)
    assert data.startswith(b"HTTP/1.1 408 ") and b"Connection: close" in data, data
    assert HEAD_S - 0.05 < closed < HEAD_S + SLACK_S + 0.1


def test_complete_heads_are_answered_and_pipelined_ones_too(port: int) -> None:
    sock, started = connect(port)
    with sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /readyz HTTP/1.1\r\nHost: x\r\n"
                     b"Connection: close\r\n\r\n")
        data, closed = until_closed(sock, started)
    assert data.count(b"HTTP/1.1 200 OK") == 2 and closed < SLACK_S


def test_idle_keep_alive_connection_is_closed_quietly_after_the_idle_timeout(port: int) -> None:
    sock, started = connect(port)
    with sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        first = one_answer(sock)
        answered = time.monotonic()
        assert first.startswith(b"HTTP/1.1 200 OK")
        data, _ = until_closed(sock, started)
    idle_for = time.monotonic() - answered
    assert data == b"" and IDLE_S - 0.05 < idle_for < IDLE_S + SLACK_S


def test_a_later_keep_alive_request_gets_its_own_head_deadline_from_its_first_byte(port: int) -> None:
    sock, started = connect(port)
    with sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert one_answer(sock).startswith(b"HTTP/1.1 200 OK")
        time.sleep(IDLE_S * 0.7)  # idle, but within the idle timeout: longer than a head deadline
        first_byte = time.monotonic()
        sock.sendall(b"GET /read")
        data, _ = until_closed(sock, started)
    assert data.startswith(b"HTTP/1.1 408 "), data
    assert HEAD_S - 0.05 < time.monotonic() - first_byte < HEAD_S + SLACK_S


def test_probe_slots_answer_only_probes_and_one_request_each(port: int) -> None:
    hold = [connect(port)[0] for _ in range(2)]  # max_connections=2: the pool is full
    time.sleep(0.1)
    try:
        sock, started = connect(port)
        with sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            data, closed = until_closed(sock, started)
        assert data.count(b"HTTP/1.1 200 OK") == 1 and b"Connection: close" in data and closed < SLACK_S
        sock, started = connect(port)
        with sock:
            sock.sendall(b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n")
            data, _ = until_closed(sock, started)
        assert data.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 1" in data
    finally:
        for s in hold:
            s.close()
