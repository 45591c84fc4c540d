"""The HTTP side: a small, defensive ``ThreadingHTTPServer`` (stdlib, no framework).

Why stdlib: four read-only endpoints answered from memory need no framework, and the
health server must start on any node with nothing but gpu-preflight installed. What the
stdlib does not give, added here: a cap on the request head (414/431 instead of reading
64 KiB lines), refusal of request bodies, a cap on concurrent connections (503), idle
connection timeouts, and no tracebacks on stderr when a client goes away.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

MAX_TARGET_BYTES = 2048  # request line
MAX_HEAD_BYTES = 8192  # request line + headers
IDLE_TIMEOUT_S = 10.0
DEFAULT_MAX_CONNECTIONS = 64

# path -> handler returning (status, content type, body)
Route = Callable[[], tuple[int, str, bytes]]


class RequestTooLarge(Exception):
    """The request head exceeded its budget; ``status`` is 414 or 431."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class _HeadReader:
    """Wraps the socket reader so one request head can read at most ``MAX_HEAD_BYTES``."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self.remaining = MAX_HEAD_BYTES
        self.lines = 0

    def start_request(self) -> None:
        self.remaining, self.lines = MAX_HEAD_BYTES, 0

    def readline(self, limit: int = -1) -> bytes:
        budget = MAX_TARGET_BYTES if self.lines == 0 else self.remaining
        line = self._raw.readline(budget + 1 if limit < 0 else min(limit, budget + 1))
        self.lines += 1
        self.remaining -= len(line)
        if len(line) > budget or self.remaining < 0:
            raise RequestTooLarge(414 if self.lines == 1 else 431)
        return bytes(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


class Handler(BaseHTTPRequestHandler):
    """GET/HEAD on the server's routes; everything else is a 4xx and the connection lives on."""

    server: HealthHTTPServer
    protocol_version = "HTTP/1.1"
    default_request_version = "HTTP/1.0"  # not 0.9: every answer, errors included, carries a status line
    server_version = "gpu-preflight"
    sys_version = ""
    timeout = IDLE_TIMEOUT_S
    disable_nagle_algorithm = True  # headers and body go out as two writes; Nagle would hold the body ~40 ms

    def setup(self) -> None:
        super().setup()
        self.rfile = _HeadReader(self.rfile)  # type: ignore[assignment]

    def handle_one_request(self) -> None:
        reader: _HeadReader = self.rfile  # type: ignore[assignment]
        reader.start_request()
        try:
            super().handle_one_request()
        except RequestTooLarge as exc:
            self.requestline, self.request_version, self.command = "", "HTTP/1.1", ""
            self.close_connection = True
            self.send_error(exc.status, "request line too long" if exc.status == 414 else "request head too large")

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
        if self.headers.get("Transfer-Encoding") or self.headers.get("Content-Length", "0").strip() not in ("", "0"):
            self.close_connection = True
            self._reply(413, "text/plain; charset=utf-8", b"requests to this server carry no body\n", head)
            return
        route = self.server.routes.get(urlsplit(self.path).path)
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
    """One thread per connection, at most ``max_connections`` at once (then 503)."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], routes: dict[str, Route],
                 max_connections: int = DEFAULT_MAX_CONNECTIONS) -> None:
        self.routes = routes
        self._slots = threading.BoundedSemaphore(max_connections)
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            with contextlib.suppress(OSError):
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                b"Retry-After: 1\r\nConnection: close\r\n\r\n")
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that vanished mid-response is routine; log it, do not print a traceback."""
        log.debug("connection from %s ended with an error", client_address, exc_info=True)
