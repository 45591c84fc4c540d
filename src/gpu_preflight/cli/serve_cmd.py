"""``gpu-preflight serve``: the health server, one monitor tick, or an instant query.

* ``serve`` — run the monitor loop and HTTP endpoints until SIGTERM/SIGINT (exit 0).
* ``serve --once`` — run the quick node checks and GPU health once, print the
  ``/status``-like JSON, exit 0 when fit for work, 2 when not.
* ``serve --query`` — ask a running server's ``/readyz`` and exit at once: 0 ready,
  2 not ready, 3 no answer (cannot tell). Never runs a check: this is the form for
  Slurm's HealthCheckProgram, which must not block.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from ..config import ConfigError, build_config, find_profile
from .argtypes import count, gpu_index, host, port, seconds
from .exits import EXIT_USAGE

if TYPE_CHECKING:
    from ..server import GPUHealthCheckServer

EXIT_OK = 0
EXIT_NOT_READY = 2
EXIT_NO_ANSWER = 3
DEFAULT_PORT = 9470
MAX_CONNECTIONS = 1024  # one thread each


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``serve`` on the CLI's subparsers."""
    p = sub.add_parser("serve", help="health server: /healthz /readyz /status /metrics",
                       description="Run the quick node checks every --interval seconds and serve the verdict over "
                                   "HTTP. --once: one run, exit 0 ready / 2 not ready. --query: ask a running "
                                   "server, exit 0 ready / 2 not ready / 3 no answer.")
    p.add_argument("--host", type=host, default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; 0.0.0.0 or :: to expose it to scrapers/probes)")
    p.add_argument("--port", type=port, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 picks a free one)")
    p.add_argument("--interval", type=seconds(), default=60.0, help="seconds between node check runs (default 60)")
    p.add_argument("--timeout", type=seconds(), default=30.0,
                   help="liveness timeout: /healthz fails when the monitor is stuck this long (default 30)")
    p.add_argument("--check-timeout-s", type=seconds(3600), default=10.0,
                   help="time limit per probe and check, e.g. a hung NVML call (default 10)")
    p.add_argument("--replay", metavar="FILE", help="judge an NVML snapshot instead of the live GPUs (re-read "
                                                    "every run)")
    p.add_argument("--config", metavar="FILE", help="site config file (TOML or YAML)")
    p.add_argument("--profile", default="auto", help="GPU-model profile name or .toml file (default: auto)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override one setting")
    p.add_argument("--fail-on", choices=("warn", "fail"), default="fail",
                   help="'warn' makes node-check warnings not ready")
    p.add_argument("--gpu-index", type=gpu_index, metavar="N", help="monitor the health of this GPU only")
    p.add_argument("--no-gpu-monitoring", action="store_true",
                   help="readiness from the node checks alone (no recovery-action verdict)")
    p.add_argument("--healthy-when-unknown", action="store_true",
                   help="count GPU health that could not be read (no driver r570+, no pynvml) as ready: "
                        "the spec's behaviour, off by default (fail closed)")
    p.add_argument("--max-connections", type=count(1, MAX_CONNECTIONS), default=64,
                   help="concurrent HTTP connections (default 64; /healthz and /readyz have reserved slots beyond)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="run once, print the status JSON and exit")
    mode.add_argument("--query", action="store_true", help="ask a running server at --host/--port and exit")
    p.add_argument("--query-timeout-s", type=seconds(3600), default=2.0, help="how long --query waits (default 2)")


def run(args: argparse.Namespace) -> int:
    """Run the ``serve`` command; returns the process exit code."""
    if args.query:
        return query(args.host, args.port, args.query_timeout_s)
    problem = _validate(args)
    if problem:
        print(f"gpu-preflight: {problem}", file=sys.stderr)
        return EXIT_USAGE
    server = _server(args)
    if args.once:
        return _once(server)
    return _serve(server)


def query(host: str, port: int, timeout_s: float) -> int:
    """One ``GET /readyz``; prints ``ready: ...`` or ``not ready: ...`` on stdout."""
    # start-up: --help/--version import every command module; this command's work loads when it runs
    import http.client
    import urllib.request

    if host in ("0.0.0.0", "::", ""):  # noqa: S104 (a bind-all address; the server is also on loopback)
        host = "127.0.0.1"
    target = f"[{host}]" if ":" in host else host
    url = f"http://{target}:{port}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            code, body = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        code, body = exc.code, exc.read()
    except (OSError, ValueError, http.client.HTTPException) as exc:  # InvalidURL, BadStatusLine: no HTTP answer
        print(f"no answer from {url}: {exc}")
        return EXIT_NO_ANSWER
    try:
        reasons = "; ".join(json.loads(body)["reasons"])
    except (ValueError, KeyError, TypeError):
        reasons = body.decode("utf-8", "replace").strip()[:200]
    if code == 200:
        print(f"ready: {reasons}")
        return EXIT_OK
    if code == 503:
        print(f"not ready: {reasons}")
        return EXIT_NOT_READY
    print(f"unexpected answer {code} from {url}: {reasons}")
    return EXIT_NO_ANSWER


def _validate(args: argparse.Namespace) -> str | None:
    """A usage problem, found before anything starts (a typo must not serve 'not ready' forever)."""
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..snapshots import ReplayError, load_dump

    try:
        if args.replay:
            load_dump(args.replay)
        profile = find_profile(args.profile) if args.profile != "auto" else None
        build_config(profile=profile, config_file=args.config, overrides=args.set)
    except ReplayError as exc:
        return str(exc)
    except ConfigError as exc:
        return f"configuration error: {exc}"
    return None


def _server(args: argparse.Namespace) -> GPUHealthCheckServer:
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..engine import RunOptions
    from ..server import GPUHealthCheckServer

    options = RunOptions(profile=args.profile, config_file=args.config, overrides=args.set, replay=args.replay,
                         fail_on=args.fail_on)
    return GPUHealthCheckServer(
        time.time, args.port, args.timeout, args.gpu_index, args.interval, not args.no_gpu_monitoring,
        host=args.host, options=options, healthy_when_unknown=args.healthy_when_unknown,
        check_timeout_s=args.check_timeout_s, max_connections=args.max_connections)


def _once(server: Any) -> int:
    snap = server.monitor.tick()
    ready, reasons = server.ready()
    status = {"ready": ready, "reasons": reasons, "gpu_health": server.get_gpu_health_status(),
              "report": json.loads(snap.report_json)}
    print(json.dumps(status, indent=1))
    return EXIT_OK if ready else EXIT_NOT_READY


STOP_POLL_S = 0.25
"""How often the main thread wakes while it serves: a process-directed signal may be handled (at C level)
on any of serve's threads, and Python runs its handler only when the main thread next runs bytecode, so
a main thread asleep in an unbounded wait slept through SIGTERM (1 in 15-20 stops on a loaded VM)."""


def _serve(server: Any) -> int:
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        print(f"gpu-preflight: {signal.Signals(signum).name}: stopping", file=sys.stderr, flush=True)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            server.start()
        except OSError as exc:
            print(f"gpu-preflight: cannot listen on {server.url}: {exc}", file=sys.stderr)
            return EXIT_NO_ANSWER
        print(f"gpu-preflight: serving on {server.url} (/healthz /readyz /status /metrics)", file=sys.stderr,
              flush=True)
        while not stop.wait(STOP_POLL_S):
            pass
        server.stop()
        print("gpu-preflight: stopped", file=sys.stderr, flush=True)
        return EXIT_OK
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
