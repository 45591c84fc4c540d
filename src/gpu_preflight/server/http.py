"""The HTTP side: a small, defensive ``ThreadingHTTPServer`` (stdlib, no framework).

Why stdlib: four read-only endpoints answered from memory need no framework, and the
health server must start on any node with nothing but gpu-preflight installed. What the
stdlib does not give, added here: a cap on the request head (414/431 instead of reading
64 KiB lines), refusal of request bodies and of ambiguous framing (:func:`framing_problem`:
400, then close), a cap on concurrent connections (503), idle connection timeouts, and no
tracebacks on stderr when a client goes away.

Slow clients ("slow loris"): the stdlib's socket timeout is per ``recv``, so a client
sending one header byte every few seconds holds its thread and its connection slot for as
long as the 8 KiB head budget lasts (hours). With every slot held, every probe got 503 and
a liveness probe restarted a healthy pod. So the whole request head must arrive within
``head_timeout_s`` (counted from the connection for its first request, from the first
byte for later keep-alive requests; a client that sent part of a head gets 408), and a
few slots beyond ``max_connections`` are kept for ``/healthz`` and ``/readyz`` alone:
when the pool is full, a new connection is served there under a shorter head deadline,
answered if it asks for a probe path (503 otherwise) and closed.
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

MAX_TARGET_BYTES = 2048  # request line
MAX_HEAD_BYTES = 8192  # request line + headers
IDLE_TIMEOUT_S = 10.0  # keep-alive wait for the next request, and each write
HEAD_TIMEOUT_S = 5.0  # the whole request head, however slowly it trickles in
PROBE_HEAD_TIMEOUT_S = 2.0  # the same on a reserved probe slot (kubelet sends its request at once)
PROBE_SLOTS = 8  # connections beyond max_connections, for the probe paths only
PROBE_PATHS = ("/healthz", "/readyz")
DEFAULT_MAX_CONNECTIONS = 64

# path -> handler returning (status, content type, body)
Route = Callable[[], tuple[int, str, bytes]]


class RequestTooLarge(Exception):
    """The request head exceeded its budget; ``status`` is 414 or 431."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class HeadTimeout(Exception):
    """The request head did not arrive in time; ``partial`` when some of it did (then 408)."""

    def __init__(self, partial: bool) -> None:
        super().__init__(partial)
        self.partial = partial


class _HeadReader:
    """Wraps the socket reader so one request head reads at most ``MAX_HEAD_BYTES`` by a deadline.

    Lines are assembled from ``peek``/``read`` on the buffered reader, each ``peek`` doing at
    most one ``recv`` under the time left, so the deadline holds for the whole head and not
    only for each ``recv`` (which a client sending a byte at a time would always meet).
    """

    def __init__(self, raw: Any, sock: socket.socket, accepted: float, head_timeout_s: float,
                 idle_timeout_s: float) -> None:
        self._raw, self._sock = raw, sock
        self._accepted, self._head_timeout_s, self._idle_timeout_s = accepted, head_timeout_s, idle_timeout_s
        self.remaining = MAX_HEAD_BYTES
        self.lines = 0
        self.received = 0
        self.head: list[bytes] = []  # this request's head as received, for framing_problem()
        self._requests = 0
        self._deadline = accepted + head_timeout_s

    def start_request(self) -> None:
        """The first request's head is due ``head_timeout_s`` after the connection; a later one may
        wait ``idle_timeout_s`` for its first byte, then has ``head_timeout_s`` from there."""
        self.remaining, self.lines, self.received = MAX_HEAD_BYTES, 0, 0
        self.head = []
        self._requests += 1
        if self._requests > 1:
            self._deadline = time.monotonic() + self._idle_timeout_s

    def end_head(self) -> None:
        """Writes (and anything after the head) run under the idle timeout again."""
        self._sock.settimeout(self._idle_timeout_s)

    def readline(self, limit: int = -1) -> bytes:
        budget = MAX_TARGET_BYTES if self.lines == 0 else self.remaining
        line = self._read_line(budget + 1 if limit < 0 else min(limit, budget + 1))
        self.lines += 1
        self.remaining -= len(line)
        if len(line) > budget or self.remaining < 0:
            raise RequestTooLarge(414 if self.lines == 1 else 431)
        self.head.append(bytes(line))
        return bytes(line)

    def _read_line(self, cap: int) -> bytes:
        chunks: list[bytes] = []
        got = 0
        while got < cap:
            left = self._deadline - time.monotonic()
            if left <= 0:
                raise HeadTimeout(self.received > 0)
            self._sock.settimeout(left)
            try:
                data = self._raw.peek(1)
            except TimeoutError:
                raise HeadTimeout(self.received > 0) from None
            if not data:
                break
            if self.received == 0 and self._requests > 1:
                self._deadline = time.monotonic() + self._head_timeout_s
            want = min(len(data), cap - got)
            newline = data.find(b"\n", 0, want)
            chunk = self._raw.read(newline + 1 if newline >= 0 else want)  # served from the buffer
            chunks.append(chunk)
            got += len(chunk)
            self.received += len(chunk)
            if newline >= 0:
                break
        return b"".join(chunks)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def framing_problem(head: list[bytes]) -> str | None:
    """Why a request head (request line, header lines, blank line) frames its request ambiguously, or None.

    Every endpoint here is GET/HEAD with no body, so no body is ever read; a request that
    says it has one, or says so in a way two parsers could read differently, is refused
    (400, then the connection is closed) rather than guessed at: otherwise what a proxy in
    front took for a body is read here as a second request (request smuggling). Refused:
    obsolete line folding (a line starting with white space), a header name that is not a
    token (``Transfer-Encoding :`` with a space before the colon, a line without a colon),
    any ``Transfer-Encoding``, more than one ``Content-Length``, and one that is not ``0``.
    """
    lengths: list[bytes] = []
    for line in head[1:]:
        if line in (b"\r\n", b"\n"):
            break
        if line[:1] in (b" ", b"\t"):
            return "obsolete line folding in the request head"
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name):
            return f"malformed header line {line[:40].rstrip()!r}"
        key = name.lower()
        if key == b"transfer-encoding":
            return "Transfer-Encoding in a request: requests to this server carry no body"
        if key == b"content-length":
            lengths.append(value.strip(b" \t\r\n"))
    if len(lengths) > 1:
        return "more than one Content-Length"
    if lengths and not (lengths[0].isdigit() and int(lengths[0]) == 0):
        return "requests to this server carry no body"
    return None


class Handler(BaseHTTPRequestHandler):
    """GET/HEAD on the server's routes; everything else is a 4xx and the connection lives on."""

    server: HealthHTTPServer
    protocol_version = "HTTP/1.1"
    default_request_version = "HTTP/1.0"  # not 0.9: every answer, errors included, carries a status line
    server_version = "gpu-preflight"
    sys_version = ""
    timeout = IDLE_TIMEOUT_S
    disable_nagle_algorithm = True  # headers and body go out as two writes; Nagle would hold the body ~40 ms

    def __init__(self, request: Any, client_address: Any, server: Any, *, reserved: bool = False,
                 accepted: float | None = None) -> None:
        self.reserved = reserved  # on a probe slot: one request, probe paths only
        self.accepted = time.monotonic() if accepted is None else accepted
        super().__init__(request, client_address, server)

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.idle_timeout_s)
        head = min(self.server.head_timeout_s, PROBE_HEAD_TIMEOUT_S) if self.reserved else self.server.head_timeout_s
        self.rfile = _HeadReader(self.rfile, self.connection, self.accepted, head,  # type: ignore[assignment]
                                 self.server.idle_timeout_s)

    def handle_one_request(self) -> None:
        reader: _HeadReader = self.rfile  # type: ignore[assignment]
        reader.start_request()
        try:
            super().handle_one_request()
        except RequestTooLarge as exc:
            reader.end_head()
            self.requestline, self.request_version, self.command = "", "HTTP/1.1", ""
            self.close_connection = True
            self.send_error(exc.status, "request line too long" if exc.status == 414 else "request head too large")
        except HeadTimeout as exc:
            self.close_connection = True
            log.debug("%s: request head not complete in time; closing", self.address_string())
            if exc.partial:
                reader.end_head()
                self.requestline, self.request_version, self.command = "", "HTTP/1.1", ""
                with contextlib.suppress(OSError):
                    self.send_error(408, "request head not received in time")
        if self.reserved:
            self.close_connection = True

    def parse_request(self) -> bool:
        """The standard library's parsing, then :func:`framing_problem` on the head as received:
        400 and close for a request that carries a body or frames one ambiguously."""
        if not super().parse_request():
            return False
        reader: _HeadReader = self.rfile  # type: ignore[assignment]
        problem = framing_problem(reader.head)
        if problem is None:
            return True
        reader.end_head()
        self.close_connection = True
        self.send_error(400, problem)
        return False

    def handle_expect_100(self) -> bool:
        """No ``100 Continue``: that would invite a body this server never reads (the request is refused)."""
        return True

    def do_GET(self) -> None:
        self._serve(head=False)

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def _refuse_method(self) -> None:
        self.close_connection = True  # a body may follow that we will not read
        self._reply(405, "text/plain; charset=utf-8", b"method not allowed: use GET or HEAD\n", False,
                    {"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = _refuse_method

    def _serve(self, head: bool) -> None:
        self.rfile.end_head()  # type: ignore[attr-defined]
        if self.reserved:
            self.close_connection = True
        path = urlsplit(self.path).path
        if self.reserved and path not in self.server.probe_paths:
            self._reply(503, "text/plain; charset=utf-8", b"busy: only " + ", ".join(self.server.probe_paths).encode()
                        + b" are answered now\n", head, {"Retry-After": "1"})
            return
        route = self.server.routes.get(path)
        if route is None:
            self._reply(404, "text/plain; charset=utf-8",
                        f"not found; try {', '.join(sorted(self.server.routes))}\n".encode(), head)
            return
        try:
            status, content_type, body = route()
        except Exception:
            log.exception("endpoint %s failed", self.path)
            status, content_type, body = 500, "text/plain; charset=utf-8", b"internal error (see the server log)\n"
        self._reply(status, content_type, body, head)

    def _reply(self, status: int, content_type: str, body: bytes, head: bool,
               headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)


class HealthHTTPServer(ThreadingHTTPServer):
    """One thread per connection: at most ``max_connections`` at once, plus ``probe_slots`` that
    answer only ``probe_paths`` when those are all taken; beyond both, 503 at once."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], routes: dict[str, Route],
                 max_connections: int = DEFAULT_MAX_CONNECTIONS, *, probe_paths: tuple[str, ...] = PROBE_PATHS,
                 probe_slots: int = PROBE_SLOTS, head_timeout_s: float = HEAD_TIMEOUT_S,
                 idle_timeout_s: float = IDLE_TIMEOUT_S) -> None:
        self.routes = routes
        self.probe_paths = tuple(p for p in probe_paths if p in routes)
        self.head_timeout_s, self.idle_timeout_s = head_timeout_s, idle_timeout_s
        self._slots = threading.BoundedSemaphore(max_connections)
        self._probe_slots = threading.BoundedSemaphore(probe_slots) if probe_slots and self.probe_paths else None
        self._admitted: dict[Any, tuple[threading.BoundedSemaphore, bool, float]] = {}
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        accepted = time.monotonic()
        slots, reserved = self._slots, False
        if not slots.acquire(blocking=False):
            if self._probe_slots is None or not self._probe_slots.acquire(blocking=False):
                with contextlib.suppress(OSError):
                    request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                    b"Retry-After: 1\r\nConnection: close\r\n\r\n")
                self.shutdown_request(request)
                return
            slots, reserved = self._probe_slots, True
        self._admitted[request] = (slots, reserved, accepted)
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._admitted.pop(request, None)
            slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        slots, reserved, accepted = self._admitted.pop(request)
        try:
            try:
                Handler(request, client_address, self, reserved=reserved, accepted=accepted)
            except Exception:
                self.handle_error(request, client_address)
            finally:
                self.shutdown_request(request)
        finally:
            slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that vanished mid-response is routine; log it, do not print a traceback."""
        log.debug("connection from %s ended with an error", client_address, exc_info=True)
