"""``gpu-preflight snapshot``: this node's NVML readings as JSON, for ``run --replay`` anywhere."""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys

from ..config import build_config
from ..safeio import describe_error, write_text
from .argtypes import seconds
from .exits import EXIT_ERROR


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    snap = sub.add_parser("snapshot", help="record the raw NVML readings of this node as JSON (stdout or --output)",
                          description="Record this node's NVML readings, host facts and kernel-log Xid lines as "
                                      "JSON on stdout (or --output FILE), for 'run --replay' on any machine. Exit 3 "
                                      "when NVML cannot be read (no library, no driver): nothing is written.")
    snap.add_argument("--output", "-o", metavar="FILE",
                      help="write the snapshot to FILE, complete or not at all (a shell redirection leaves an "
                           "empty file when the snapshot fails)")
    snap.add_argument("--timeout-s", type=seconds(3600), default=30.0,
                      help="time limit for reading all GPUs (s, default 30); a GPU that does not answer in time "
                           "is recorded as such")


def run(args: argparse.Namespace) -> int:
    """NVML readings plus the host facts and kernel-log Xid lines, so a replay judges this node only."""
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..backends.nvml import NvmlUnavailable, collect
    from ..model import jsonable
    from ..snapshots import snapshot_host

    try:
        dump = collect(device_timeout_s=args.timeout_s)
    except NvmlUnavailable as exc:
        print(f"gpu-preflight: cannot snapshot: {exc.message} ({exc.name}); nothing written"
              f"{_redirect_hint(args.output)}", file=sys.stderr)
        return EXIT_ERROR
    dump["host"] = snapshot_host(build_config()[0])
    text = json.dumps(jsonable(dump), indent=1) + "\n"
    if not args.output:
        sys.stdout.write(text)
        return 0

    try:
        write_text(args.output, text)
    except (OSError, ValueError) as exc:
        print(f"gpu-preflight: cannot write the snapshot to {args.output}: {describe_error(exc, args.output)}",
              file=sys.stderr)
        return EXIT_ERROR
    print(f"gpu-preflight: snapshot written to {args.output}", file=sys.stderr)
    return 0


def _redirect_hint(output: str | None) -> str:
    """Where stdout is a file the shell just created (``snapshot > node.json``), that file is left
    empty and a later ``--replay`` of it fails: say so, and what writes only complete snapshots."""
    if output:
        return ""
    try:
        fd = sys.stdout.fileno()
        st = os.fstat(fd)
    except (OSError, ValueError, AttributeError):
        return ""
    if not stat.S_ISREG(st.st_mode) or st.st_size:
        return ""
    try:
        name = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        name = "the file stdout goes to"
    return (f" ({name} is left empty by the shell's redirection: use --output FILE, which writes only a "
            "complete snapshot)")
