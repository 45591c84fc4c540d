"""``serve``'s HTTP framing, with raw sockets against the real server: no body, no ambiguity, 400 then close.

The endpoints are GET/HEAD without a body. Issue 28 found the server accepting a
duplicate ``Content-Length`` (``0`` then ``N``) and a ``Transfer-Encoding`` header
written with a space before the colon or folded onto the next line, and then reading
the "body" as a second request: the request smuggling a proxy in front would not see.
Every such request is now answered 400 with ``Connection: close``, and nothing after
its head is ever served.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from gpu_preflight.server.http import HealthHTTPServer, framing_problem

SMUGGLED = b"GET /status HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.fixture
def port() -> Iterator[int]:
    routes = {"/healthz": lambda: (200, "text/plain", b"ok\n"), "/status": lambda: (200, "text/plain", b"secret\n")}
    server = HealthHTTPServer(("127.0.0.1", 0), routes, 8)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def exchange(port: int, data: bytes) -> bytes:
    """Send ``data`` at once and read until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


HOSTILE = {
    "duplicate Content-Length 0 then N": b"Content-Length: 0\r\nContent-Length: 34\r\n",
    "conflicting Content-Length": b"Content-Length: 34\r\nContent-Length: 35\r\n",
    "same Content-Length twice": b"Content-Length: 0\r\nContent-Length: 0\r\n",
    "a body": b"Content-Length: 34\r\n",
    "a Content-Length that is no number": b"Content-Length: +0\r\n",
    "Transfer-Encoding": b"Transfer-Encoding: chunked\r\n",
    "Transfer-Encoding, space before the colon": b"Transfer-Encoding : chunked\r\n",
    "Transfer-Encoding, tab before the colon": b"Transfer-Encoding\t: chunked\r\n",
    "Transfer-Encoding folded": b"X-Note: a\r\n Transfer-Encoding: chunked\r\n",
    "Transfer-Encoding value folded": b"Transfer-Encoding:\r\n chunked\r\n",
    "obsolete line folding": b"X-Note: a\r\n\tcontinued\r\n",
    "a header line without a colon": b"Transfer-Encoding chunked\r\n",
    "Transfer-Encoding identity": b"Transfer-Encoding: identity\r\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.parametrize("method", [b"GET", b"HEAD", b"POST"])
def test_a_request_with_a_body_or_ambiguous_framing_gets_400_and_the_connection_closes(
        port: int, name: str, method: bytes) -> None:
    head = method + b" /healthz HTTP/1.1\r\nHost: x\r\n" + HOSTILE[name] + b"\r\n"
    answer = exchange(port, head + SMUGGLED)
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert b"Connection: close" in answer.split(b"\r\n\r\n", 1)[0]
    assert answer.count(b"HTTP/1.1 ") == 1 and b"secret" not in answer  # the "body" was never served


def test_well_framed_requests_are_still_served_on_one_connection(port: int) -> None:
    first = b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
    last = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    answer = exchange(port, first + last)
    assert answer.count(b"HTTP/1.1 200 ") == 2, answer


def test_expect_100_continue_invites_no_body(port: int) -> None:
    answer = exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
    assert b"100 Continue" not in answer and answer.startswith(b"HTTP/1.1 400 ")


def test_framing_rules_on_their_own() -> None:
    line = b"GET / HTTP/1.1\r\n"
    assert framing_problem([line, b"Host: x\r\n", b"\r\n"]) is None
    assert framing_problem([line, b"Content-Length: 0\r\n", b"\r\n"]) is None
    assert framing_problem([line, b"Content-Length: 1\r\n", b"\r\n"]) == "requests to this server carry no body"
    assert framing_problem([line, b"content-length: 0\r\n", b"CONTENT-LENGTH: 0\r\n", b"\r\n"]) == (
        "more than one Content-Length")
    assert "Transfer-Encoding" in str(framing_problem([line, b"transfer-encoding: gzip\r\n", b"\r\n"]))
    assert framing_problem([line, b" folded\r\n", b"\r\n"]) == "obsolete line folding in the request head"
