"""Run one bench and file what it printed in docs/performance.md, dated, with the machine it ran on.

Why: bench figures used to be copied by hand into the README, which became a diary of dated
numbers that nobody re-measured. The README now keeps one line per target; the figures live in
docs/performance.md, one block per bench between ``<!-- bench:NAME -->`` and
``<!-- /bench:NAME -->`` markers, and only this script writes them, from a real run.

A bench that cannot measure exits 2 (``_selfcheck.fail``), and one that crashes exits 1 with a
traceback: nothing is filed for either and the old figure stays. Exit 0 (target met) and 1
(target missed) are both measurements and are filed, with the exit code, so a missed target is
on record too.

    .venv/bin/python bench/record.py bench_node_live.py --rounds 21
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

from _selfcheck import EXIT, REPO

DOCS = REPO / "docs" / "performance.md"
CANNOT_MEASURE = EXIT
CRASHED = "Traceback (most recent call last)"


def machine() -> str:
    """What the figures were measured on: CPU count and model, and the load when the run ended."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs ({model}), load average {os.getloadavg()[0]:.1f}"


def block(name: str, command: list[str], output: str, code: int, when: dt.date) -> str:
    """The text filed for one run: date, machine, command, exit code and the bench's own output."""
    return (f"<!-- bench:{name} -->\n"
            f"{when.isoformat()}, {machine()}, exit {code}: `{' '.join(command)}`\n\n"
            f"```\n{output.rstrip()}\n```\n"
            f"<!-- /bench:{name} -->")


def file_result(docs: Path, name: str, text: str) -> None:
    """Replace the bench's block in ``docs`` (append a new block when the bench has none yet)."""
    body = docs.read_text(encoding="utf-8")
    pattern = re.compile(rf"<!-- bench:{re.escape(name)} -->.*?<!-- /bench:{re.escape(name)} -->", re.S)
    if pattern.search(body):
        body = pattern.sub(lambda _m: text, body, count=1)
    else:
        body = body.rstrip("\n") + f"\n\n## {name}\n\n{text}\n"
    docs.write_text(body if body.endswith("\n") else body + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench", help="the bench script, e.g. bench_node_live.py")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    ap.add_argument("--docs", type=Path, default=DOCS, help="the page to file into (default docs/performance.md)")
    opts = ap.parse_args(argv)
    script = Path(opts.bench)
    if not script.is_file():
        script = Path(__file__).resolve().parent / opts.bench
    if not script.is_file():
        print(f"record: no bench {opts.bench!r}", file=sys.stderr)
        return CANNOT_MEASURE
    command = [f"bench/{script.name}", *opts.args]
    ran = subprocess.run([sys.executable, str(script), *opts.args], capture_output=True, text=True, check=False)
    sys.stdout.write(ran.stdout)
    sys.stderr.write(ran.stderr)
    if ran.returncode not in (0, 1) or CRASHED in ran.stderr:  # Python exits 1 on an uncaught exception too
        print(f"record: {script.name} exited {ran.returncode}{' with a traceback' if CRASHED in ran.stderr else ''}"
              ": nothing filed", file=sys.stderr)
        return ran.returncode or CANNOT_MEASURE
    name = script.stem
    file_result(opts.docs, name, block(name, command, ran.stdout, ran.returncode, dt.date.today()))
    print(f"record: filed in {opts.docs}", file=sys.stderr)
    return ran.returncode


if __name__ == "__main__":
    raise SystemExit(main())
