"""The long hostile-input fuzz run: every fixture cut at every line, garbled many times.

Prints ``tried / survived / false PASS / hang / crash / memory / wrong`` overall and per
fixture, then the first cases of each bad outcome. Every command that takes a file path is
also fed a FIFO, ``/dev/zero``, a directory and a 1 GiB sparse file (``tests/path_cases.py``):
``wrong`` counts an exit other than 3 or an error line that does not name the path. A live run on the
NVML stub is sent SIGINT or SIGTERM at ``--signals`` random moments (``tests/signal_cases.py``):
``wrong`` counts a traceback, an exit other than 0-3 or 128 + the signal, a staged ``.*.tmp``
left, or a report whose listed artifacts are not the files beside it. ``survived`` counts cases that ended
without crash, hang or memory blow-up; ``false PASS`` counts failing fixtures judged PASS
after a cut or damage (formats without an end marker — dmesg, lspci, ``nvlink -s``,
``ibstatus`` — can do this by nature: a log cut before its Xid line is a clean log).

    .venv/bin/python bench/bench_fuzz.py [--seed 1] [--any-damage 40] [--time-s 10] [--memory-mib 256] \\
        [--signals 60]
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _selfcheck import require


def main() -> int:
    require("bench_fuzz", "gpu_preflight", "tests.fuzz_engine", "tests.path_cases", "tests.signal_cases")
    from tests.fuzz_engine import config_cases, evidence_cases, replay_cases, run_case, run_config, run_replay

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--any-damage", type=int, default=40, help="garbles anywhere in a line (labels too), per fixture")
    ap.add_argument("--time-s", type=float, default=10.0, help="per-case time budget")
    ap.add_argument("--memory-mib", type=float, default=256.0, help="per-case peak allocation budget (plus 40x input)")
    ap.add_argument("--signals", type=int, default=60, help="signals sent to a live run on the NVML stub (0: none)")
    args = ap.parse_args()
    rng = random.Random(args.seed)  # noqa: S311 - reproducible fuzzing, not cryptography
    started = time.perf_counter()
    totals: collections.Counter[str] = collections.Counter()
    per_source: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    examples: dict[str, list[str]] = collections.defaultdict(list)
    for case in evidence_cases(rng, any_damage=args.any_damage):
        outcome, detail = run_case(case, time_s=args.time_s, memory_mib=args.memory_mib)
        totals[outcome] += 1
        per_source[case.source][outcome] += 1
        examples[outcome].append(f"{case.source}: {case.mutation}: {detail}")
    with tempfile.TemporaryDirectory() as tmp:
        for what, text in replay_cases(rng, 20):
            outcome, detail = run_replay(text, Path(tmp), time_s=args.time_s, memory_mib=args.memory_mib)
            totals[outcome] += 1
            per_source["--replay snapshot"][outcome] += 1
            examples[outcome].append(f"replay {what}: {detail}")
        for what, data in config_cases(rng, 40):
            outcome, detail = run_config(data, Path(tmp), time_s=args.time_s, memory_mib=args.memory_mib)
            totals[outcome] += 1
            per_source["--config site.toml"][outcome] += 1
            examples[outcome].append(f"config {what}: {detail}")
        for name, kind, outcome, detail in path_outcomes(Path(tmp)):
            totals[outcome] += 1
            per_source[f"path: {name}"][outcome] += 1
            examples[outcome].append(f"{name} on {kind}: {detail}")
        for outcome, detail in signal_outcomes(Path(tmp), rng, args.signals):
            totals[outcome] += 1
            per_source["signal: run --report-dir"][outcome] += 1
            examples[outcome].append(f"signal: {detail}")
    print(_line("total", totals))
    for source, counts in sorted(per_source.items()):
        print(_line(source, counts))
    for outcome in ("false_pass", "hang", "crash", "memory", "wrong"):
        for example in examples[outcome][:10]:
            print(f"  {outcome}: {example}")
    print(f"elapsed {time.perf_counter() - started:.1f} s")
    return 1 if totals["crash"] or totals["hang"] or totals["memory"] or totals["wrong"] else 0


def path_outcomes(tmp: Path) -> list[tuple[str, str, str, str]]:
    """Every command that takes a path, on a FIFO, /dev/zero, a directory and a 1 GiB sparse file
    (``tests/path_cases.py``): (command, kind, outcome, detail); ``wrong`` is an exit other than 3
    or an error that does not name the path."""
    from tests.path_cases import COMMANDS, KINDS, hostile_path, run_command

    out = []
    for name in sorted(COMMANDS):
        for kind in KINDS:
            where = tmp / f"paths-{len(out)}"
            where.mkdir()
            with hostile_path(kind, where) as path:
                outcome, detail = run_command(name, path, where)
            out.append((name, kind, outcome, detail))
    return out


def signal_outcomes(tmp: Path, rng: random.Random, count: int) -> list[tuple[str, str]]:
    """SIGINT/SIGTERM at ``count`` random moments of a live run on the 8-GPU NVML stub (built here
    with gcc): (outcome, detail), outcome ``stopped``, ``finished``, ``wrong`` or ``hang``."""
    if count <= 0:
        return []
    import json

    from tests.conftest import H200_DUMP
    from tests.nvml_stub.gpus import widen
    from tests.nvml_stub.stub import build_stub, stub_env, write_stub_data
    from tests.signal_cases import cases, finished_lines, kill_during_run

    lib = build_stub(tmp / "stub")
    write_stub_data(widen(json.loads(H200_DUMP.read_text())), tmp / "stub" / "nvml.txt")
    env = {k: v for k, v in stub_env(lib, tmp / "stub" / "nvml.txt").items() if not k.startswith("GPU_PREFLIGHT_")}
    reports = tmp / "signal-reports"
    normal, run_s = finished_lines(env, reports)
    return [kill_during_run(env, reports, signum, delay, normal) for signum, delay in cases(rng, count, run_s)]


def _line(name: str, counts: collections.Counter[str]) -> str:
    tried = sum(counts.values())
    survived = tried - counts["crash"] - counts["hang"] - counts["memory"] - counts["wrong"]
    return (f"{name:48} tried {tried:5}  survived {survived:5}  false PASS {counts['false_pass']:4}  "
            f"hang {counts['hang']:3}  crash {counts['crash']:3}  memory {counts['memory']:3}  "
            f"wrong {counts['wrong']:3}")


if __name__ == "__main__":
    sys.exit(main())
