"""Benchmark: wall time of a quick replayed node run against importing psutil + pynvml.

Both commands run alternately in the same script on the same machine, so the ratio is
robust to a noisy host. Target (issue #2): ratio < 3. Also verifies that the run does
not import torch.

With ``--against REV`` it also times the same run from another revision of this
repository (checked out with ``git archive`` into a temporary directory), alternated with
this tree's, and prints both medians with their CPU time (user + system of the child):
the house's start-up is held to the tree before it (issue 15), and on a loaded machine
the CPU time is the steadier figure. Bytecode is cached per tree, as for an installed
package.

    python bench/bench_node_run.py [--repeat 15] [--against bf76d45]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from _selfcheck import Ran, checkout_src, child_env, on_src, require, timed

DUMP = Path(__file__).resolve().parents[1] / "tests/fixtures/captured/h200-580.159.04/nvml_capture.json"
BASELINE = [sys.executable, "-c", "import psutil, pynvml"]
RUN = [sys.executable, "-m", "gpu_preflight", "run", "--quick", "--replay", str(DUMP)]
NO_TORCH = ("import sys; sys.argv=['gpu-preflight','run','--quick','--replay',%r,'--format','json'];"
            "\nfrom gpu_preflight.cli.main import main\nmain()\n"  # the program's work, before it leaves
            "print('torch imported' if 'torch' in sys.modules else 'no torch', file=sys.stderr)")


def judged(ran: Ran) -> bool:
    """The run reached a verdict: exit 0-2 and its ``[RESULT]`` line last (exit 1 alone is also
    what a Python without the package gives)."""
    lines = ran.stderr.strip().splitlines()
    return ran.returncode in (0, 1, 2) and bool(lines) and lines[-1].startswith("[RESULT] ")


def baseline(env: dict[str, str]) -> float:
    return _timed_env(BASELINE, env, what="the baseline import", ok=None).seconds


def run(env: dict[str, str]) -> float:
    return _timed_env(RUN, env).seconds


def _cpu_timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the child) of one replayed run with ``env``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    ran = _timed_env(cmd, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ran.seconds, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def _timed_env(cmd: list[str], env: dict[str, str], *, what: str = "the replayed node run",
               ok: Callable[[Ran], bool] | None = judged) -> Ran:
    """:func:`timed` in ``env`` (bytecode cached: :func:`child_env`)."""
    return timed("bench_node_run", cmd, what=what, ok=ok, env=env)


def against(rev: str, repeat: int) -> None:
    """This tree's replayed run alternated with ``rev``'s; prints both and their ratio."""
    with tempfile.TemporaryDirectory(prefix="bench-node-run-") as tmp:
        old = checkout_src("bench_node_run", rev, Path(tmp) / "old")
        envs = {"this tree": child_env(Path(tmp) / "new"), rev: on_src(child_env(Path(tmp) / "rev"), old)}
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name in envs}
        for env in envs.values():
            _cpu_timed(RUN, env)  # bytecode compiled, page cache warm
        for _ in range(repeat):
            for name, env in envs.items():
                figures[name].append(_cpu_timed(RUN, env))
    medians = {name: (statistics.median(w for w, _ in f), statistics.median(c for _, c in f))
               for name, f in figures.items()}
    for name, (wall, cpu) in medians.items():
        print(f"{name:10s}  replayed run  median {wall * 1000:7.1f} ms  CPU {cpu * 1000:7.1f} ms  (n={repeat})")
    (nw, nc), (ow, oc) = medians["this tree"], medians[rev]
    print(f"this tree / {rev}: {nw / ow:.2f}x wall, {nc / oc:.2f}x CPU (alternated)")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--against", metavar="REV", help="also time the run from this git revision, alternated")
    args = parser.parse_args()
    require("bench_node_run", "gpu_preflight", "psutil", "pynvml")
    if args.against:
        against(args.against, args.repeat)
    with tempfile.TemporaryDirectory(prefix="bench-node-run-") as tmp:
        env = child_env(Path(tmp))  # bytecode cached, as for an installed package
        baseline(env), run(env)  # compiled, page cache warm
        base, runs = [], []
        for _ in range(args.repeat):
            base.append(baseline(env))
            runs.append(run(env))
    b, r = statistics.median(base), statistics.median(runs)
    torch = timed("bench_node_run", [sys.executable, "-c", NO_TORCH % str(DUMP)], what="the torch-import check",
                  ok=lambda ran: ran.stderr.strip().endswith(("no torch", "torch imported"))).stderr
    print(f"baseline  python -c 'import psutil, pynvml'   median {b * 1000:7.1f} ms  (n={args.repeat})")
    print(f"run       gpu-preflight run --quick --replay   median {r * 1000:7.1f} ms")
    print(f"ratio     {r / b:.2f}x  (target < 3x)   torch check: {torch.strip().splitlines()[-1]}")
    return 0 if r / b < 3 and "no torch" in torch else 1


if __name__ == "__main__":
    raise SystemExit(main())
