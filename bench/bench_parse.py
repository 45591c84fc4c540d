"""Big logs: ``parse``/``judge``/``run --kernel-log`` on 100 MB logs against a plain-regex floor.

Builds, in a temporary directory, a kernel log and an nccl-tests log of ``--size-mb`` each
from the project's own fixtures (``tests/fixtures/evidence/dmesg-xid-h100-node.txt`` and
``nccl-tests-all_reduce-8xh100.txt``) and realistic filler: kernel lines of a busy GPU node
with the fixture's Xid lines re-stamped among them (about 2 % of lines, and 0.1 % segfaults), and a soak loop's
nccl-tests output, each run preceded by the ``NCCL_DEBUG=INFO`` lines of 8 ranks and its
figures a little off the fixture's, as a real soak loop's runs are; and a log of nccl-tests runs
that all aborted, ``Test NCCL failure`` lines only (one per rank and run, the `` .. pid`` line after each), whose
count and groups the record must keep exactly in flat memory.

Each command runs as a subprocess, alternated with the others, ``--repeat`` times; wall
time, CPU time and peak RSS come from ``os.wait4`` for that child alone (CPU time too,
because on a shared machine wall time measures the neighbours as much as the command). The floor is a plain Python
regex extractor doing the same extraction (Xid number, GPU and message per Xid line; every
result row's numbers) over the file read whole. Prints medians: MB/s, our time over the
floor's, peak RSS; and checks that ``parse`` found as many Xid events / rows as the floor.
``run --replay <H200 snapshot> --kernel-log`` is timed with a ``--kernel-log-mb`` log and
with the 1 KB fixture log, alternated, to show what a big saved log adds to a run.
``--against REF`` runs each of our commands a second time, right after ours, on the tree of a
git ref (its ``src/`` exported by ``git archive``): before/after figures from one run, on one machine.
``--only`` runs some of the four parts (kernel, nccl, failures, run).

    .venv/bin/python bench/bench_parse.py [--size-mb 100] [--repeat 3] [--kernel-log-mb 10] [--against REF]
                                          [--only failures ...]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _selfcheck import checkout_src, on_src

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "evidence"
SNAPSHOT = ROOT / "tests" / "fixtures" / "captured" / "h200-580.159.04" / "nvml_capture.json"
CLI = [sys.executable, "-m", "gpu_preflight"]

SEGFAULT = ("python3[{pid}]: segfault at 0 ip 00007f3a1c2d4e5f sp 00007ffd8e9c1a20 error 4 "
            "in libc.so.6[7f3a1c200000+195000]")
KERNEL_FILLER = (
    "mlx5_core 0000:{bus:02x}:00.0: mlx5_fw_tracer_handle_traces:742:(pid {pid}): FWTracer: Events were lost",
    "audit: type=1400 audit({sec}.{ms:03d}:{n}): apparmor=\"DENIED\" operation=\"open\" "
    "profile=\"snap.amazon-ssm-agent\" name=\"/proc/{pid}/environ\" pid={pid} comm=\"ssm-agent-worke\" "
    "requested_mask=\"r\" denied_mask=\"r\"",
    "IPv6: ADDRCONF(NETDEV_CHANGE): eth{n1}: link becomes ready",
    "EXT4-fs (nvme{n1}n1): mounted filesystem with ordered data mode. Opts: (null). Quota mode: none.",
    "nvidia-nvswitch{n1}: open (major=510)",
    "pcieport 0000:{bus:02x}:01.0: AER: Corrected error received: 0000:{bus:02x}:00.0",
    "systemd-journald[{pid}]: /dev/kmsg buffer overrun, some messages lost.",
    "nvidia-fabricmanager[{pid}]: Successfully configured all the available GPUs and NVSwitches",
    "docker0: port {n1}(veth{pid:x}) entered forwarding state",
)
NCCL_INFO = (
    "{host}:{pid}:{pid} [{rank}] NCCL INFO Channel {ch:02d}/32 :    0   1   2   3   4   5   6   7",
    "{host}:{pid}:{tid} [{rank}] NCCL INFO Channel {ch:02d}/0 : {rank}[{rank}] -> {peer}[{peer}] via P2P/CUMEM/read",
    "{host}:{pid}:{tid} [{rank}] NCCL INFO Connected all rings",
    "{host}:{pid}:{tid} [{rank}] NCCL INFO NVLS multicast support is available on dev {rank}",
    "{host}:{pid}:{tid} [{rank}] NCCL INFO comm 0x{addr:x} rank {rank} nRanks 8 nNodes 1 localRanks 8 localRank {rank} "
    "MNNVL 0",
    "{host}:{pid}:{tid} [{rank}] NCCL INFO Trees [0] {peer}/-1/-1->{rank}->{prev} [1] {peer}/-1/-1->{rank}->{prev}",
    "{host}:{pid}:{tid} [{rank}] NCCL INFO threadThresholds 8/8/64 | 64/8/64 | 512 | 512",
    "{host}:{pid}:{tid} [{rank}] NCCL INFO 32 coll channels, 32 collnet channels, 16 nvls channels, 32 p2p channels",
)

NCCL_INIT = (  # each rank's first lines; only rank 0 prints the NCCL version
    "Bootstrap : Using eth0:10.1.0.7<0>",
    "cudaDriverVersion 12040",
    "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
    "Using network Socket",
    "NCCL version 2.19.3+cuda12.3",
)

FLOOR_DMESG = r"""
import collections, json, re, sys
text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
xid = re.compile(r"NVRM: Xid \(PCI:(?P<pci>[0-9a-fA-F:.]+)\): (?P<xid>\d+), (?P<rest>[^\n]*)")
events = [(m.group("pci").lower(), int(m.group("xid")), m.group("rest")) for m in xid.finditer(text)]
print(json.dumps({"items": len(events), "groups": len(collections.Counter((p, x) for p, x, _ in events))}))
"""
FLOOR_NCCL = r"""
import json, re, sys
text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
row = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)"
                 r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s*$", re.M)
rows = [(int(m[1]), float(m[8]), int(m[9]) + int(m[13])) for m in row.finditer(text)]
print(json.dumps({"items": len(rows), "peak": max(b for _, b, _ in rows), "wrong": sum(w for _, _, w in rows)}))
"""
FLOOR_FAILURES = r"""
import collections, json, re, sys
text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
failure = re.compile(r"^(?:([\w.-]+):\s*)?Test (?:NCCL|CUDA) failure [\w./-]+:\d+\s*'?([^'\n]*)'?", re.M)
groups = collections.Counter((m[1], m[2]) for m in failure.finditer(text))
print(json.dumps({"items": sum(groups.values()), "groups": len(groups)}))
"""
FAILURES = (  # what an aborted nccl-tests run prints per rank, the file and line of common.cu that raised it
    ("NCCL", 958, "invalid usage (run with NCCL_DEBUG=WARN for details)"),
    ("NCCL", 1032, "unhandled system error (run with NCCL_DEBUG=INFO for details)"),
    ("NCCL", 1032, "remote process exited or there was a network error"),
    ("CUDA", 892, "an illegal memory access was encountered"),
)


def kernel_log(path: Path, size: int, rng: random.Random) -> None:
    """The fixture's boot lines, then filler with its Xid lines (and their continuation lines) every ~50 lines."""
    lines = (FIXTURES / "dmesg-xid-h100-node.txt").read_text().splitlines()
    boot = [line for line in lines if "Xid" not in line and not line.startswith(" ")][:5]
    events = [line.split("] ", 1)[1] for line in lines if "NVRM: Xid" in line]
    stamp, written, n = 0.0, 0, 0
    with path.open("w") as fh:
        for line in boot:
            fh.write(line + "\n")
        while written < size:
            stamp += rng.random() * 0.5
            n += 1
            pick = rng.random()
            if pick < 0.02:
                text = events[n % len(events)]
            elif pick < 0.021:
                text = SEGFAULT.format(pid=rng.randrange(1, 99999))
            else:
                text = rng.choice(KERNEL_FILLER).format(bus=rng.randrange(256), pid=rng.randrange(1, 99999),
                                                        sec=1700000000 + n, ms=n % 1000, n=n, n1=n % 8)
            line = f"[{stamp:12.6f}] {text}\n"
            fh.write(line)
            written += len(line)


def nccl_tests_log(path: Path, size: int, rng: random.Random) -> None:
    """A soak loop's log: per run what nccl-tests 2.17+ prints around the fixture's header and devices (its
    version, ``Collective test starting/concluded: all_reduce_perf``), 8 ranks' NCCL INFO lines (the NCCL
    version among them), the table, the trailer. Every chunk of it names ``version`` and ``_perf``.

    Each run's times vary by about 2 % from the fixture's (and its bandwidths and average with them), as
    the runs of a real soak loop do: a parser that remembers figures it has read is not flattered by
    tables repeated byte for byte."""
    lines = (FIXTURES / "nccl-tests-all_reduce-8xh100.txt").read_text().splitlines(keepends=True)
    split = next(i for i, line in enumerate(lines) if "out-of-place" in line)
    head = ("# nccl-tests version 2.17.1 nccl-headers=21903 nccl-library=21903\n"
            "# Collective test starting: all_reduce_perf\n" + "".join(lines[:split]))
    titles = "".join(lines[split:split + 3])
    rows = [line.split() for line in lines[split + 3:] if line[:1] == " "]
    trailer = "".join(line for line in lines[split + 3:] if line[:1] != " " and "Avg bus" not in line)
    written, runs = 0, 0
    with path.open("w") as fh:
        while written < size:
            runs += 1
            block = [f"gpu-node-07:{41230 + rank}:{41230 + rank} [{rank}] NCCL INFO {line}"
                     for rank in range(8) for line in NCCL_INIT[: None if rank == 0 else -1]]
            for _ in range(400):
                rank = rng.randrange(8)
                block.append(rng.choice(NCCL_INFO).format(
                    host="gpu-node-07", pid=41230 + rank, tid=41300 + rng.randrange(64), rank=rank,
                    ch=rng.randrange(32), peer=(rank + 1) % 8, prev=(rank - 1) % 8, addr=rng.getrandbits(40)))
            text = head + "\n".join(block) + "\n" + titles + _table(rows, trailer, rng)
            fh.write(text)
            written += len(text)


def nccl_failures_log(path: Path, size: int, rng: random.Random) -> None:
    """A soak loop whose every nccl-tests run aborted: per run, each of 64 ranks on 8 hosts prints its
    ``Test NCCL failure`` line (one of :data:`FAILURES`, mostly the run's own, now and then another) and the
    `` .. <host> pid <pid>: Test failure`` line after it, with the run's pids."""
    written, run = 0, 0
    with path.open("w") as fh:
        while written < size:
            run += 1
            usual = rng.choice(FAILURES)
            lines = []
            for rank in range(64):
                host, pid = f"gpu-node-{rank // 8:02d}", 40000 + run * 64 + rank
                kind, line, message = usual if rng.random() < 0.9 else rng.choice(FAILURES)
                lines.append(f"{host}: Test {kind} failure common.cu:{line} '{message}'\n"
                             f" .. {host} pid {pid}: Test failure common.cu:{line}\n")
            text = "".join(lines)
            fh.write(text)
            written += len(text)


def _table(rows: list[list[str]], trailer: str, rng: random.Random) -> str:
    """The fixture's rows (8 ranks, all_reduce: busbw = 1.75 algbw) with each time off by ~2 %, then its
    trailer with the run's own average bus bandwidth."""
    out, busbw = [], []
    for size, count, kind, redop, root, *figures in rows:
        cells = []
        for time_us in (float(figures[0]), float(figures[4])):
            time_us *= 1 + rng.gauss(0, 0.02)
            algbw = int(size) / time_us / 1e3
            busbw.append(round(algbw * 1.75, 2))
            cells.append(f"{time_us:8.2f} {algbw:7.2f} {algbw * 1.75:7.2f} {0:6d}")
        out.append(f"{size:>12}  {count:>12}  {kind:>8}  {redop:>6}  {root:>6} {cells[0]} {cells[1]}\n")
    average = f"# Out of bounds values : 0 OK\n# Avg bus bandwidth    : {sum(busbw) / len(busbw):.6g} \n"
    return "".join(out) + trailer.replace("# Out of bounds values : 0 OK\n", average, 1) \
        + "# Collective test concluded: all_reduce_perf\n"


Baseline = tuple[str, dict[str, str]] | None  # see against
PARTS = ("kernel", "nccl", "failures", "run")
Run = tuple[float, float, float, int]  # wall s, CPU s (user + system), peak RSS MiB, exit status
Command = tuple[list[str], dict[str, str] | None]  # argv, environment (None: this one)


def measure(argv: list[str], out: Path, env: dict[str, str] | None = None) -> Run:
    """One child's wall and CPU seconds, peak RSS and exit status, its stdout into ``out``.

    CPU time is reported beside wall time because on a shared machine the wall time
    measures the neighbours as much as the command.
    """
    with out.open("wb") as stdout:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.DEVNULL, cwd=ROOT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode


def alternate(commands: dict[str, Command], repeat: int, tmp: Path) -> dict[str, list[Run]]:
    results: dict[str, list[Run]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, (argv, env) in commands.items():
            results[name].append(measure(argv, tmp / f"{_file(name)}.out", env))
    return results


def _file(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def against(ref: str | None, tmp: Path) -> tuple[str, dict[str, str]] | None:
    """``ref``'s ``src/`` exported (``git archive``) and the environment that runs it instead of the working
    tree (``PYTHONPATH`` comes before the editable install), or None without ``--against``."""
    if ref is None:
        return None
    return f" @{ref}", on_src(os.environ, checkout_src("bench_parse", ref, tmp / "against"))


def with_baseline(ours: dict[str, list[str]], floor: dict[str, list[str]],
                  baseline: tuple[str, dict[str, str]] | None) -> dict[str, Command]:
    """Our commands, each followed by the same command on ``--against``'s tree when given, then the floors."""
    commands: dict[str, Command] = {}
    for name, argv in ours.items():
        commands[name] = (argv, None)
        if baseline is not None:
            commands[name + baseline[0]] = (argv, baseline[1])
    return commands | {name: (argv, None) for name, argv in floor.items()}


def report(title: str, size: int, results: dict[str, list[Run]], floor: str) -> None:
    mb = size / 1e6
    base_wall = statistics.median(r[0] for r in results[floor])
    base_cpu = statistics.median(r[1] for r in results[floor])
    print(f"\n{title} ({mb:.0f} MB), medians of {len(results[floor])}")
    width = max(30, *map(len, results))
    print(f"  {'command':{width}} {'wall s':>7} {'MB/s':>6} {'x floor':>7} {'CPU s':>6} {'MB/CPU-s':>8} {'x floor':>7}"
          f" {'RSS MiB':>8}  wall runs (s)")
    for name, runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        rss = max(r[2] for r in runs)
        codes = sorted({r[3] for r in runs})
        print(f"  {name:{width}} {wall:7.2f} {mb / wall:6.1f} {wall / base_wall:7.2f} {cpu:6.2f} {mb / cpu:8.1f}"
              f" {cpu / base_cpu:7.2f} {rss:8.0f}  {' '.join(f'{r[0]:.2f}' for r in runs)}  exit {codes}")


def compare(results: dict[str, list[Run]], baseline: tuple[str, dict[str, str]] | None) -> None:
    """Per command, the baseline tree's median CPU and wall over ours (> 1: we are faster)."""
    if baseline is None:
        return
    for name, runs in results.items():
        if (theirs := results.get(name + baseline[0])) is not None:
            cpu, wall = ([statistics.median(r[i] for r in rs) for rs in (theirs, runs)] for i in (1, 0))
            print(f"  {name}: {cpu[0] / cpu[1]:.2f}x less CPU, {wall[0] / wall[1]:.2f}x less wall than{baseline[0]}")


def agree(tmp: Path, name: str, floor: str, count: Callable[[Any], int]) -> None:
    ours = json.loads((tmp / f"{_file(name)}.out").read_text())
    theirs = json.loads((tmp / f"{_file(floor)}.out").read_text())
    print(f"  items: parse {count(ours['record'])}, floor {theirs['items']}"
          f" -> {'agree' if count(ours['record']) == theirs['items'] else 'DIFFER'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=float, default=100.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--kernel-log-mb", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--against", metavar="REF",
                    help="also time this git ref's tree (e.g. HEAD~3), each command right after ours")
    ap.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS), help="the parts to run (default: all)")
    args = ap.parse_args()
    rng = random.Random(args.seed)  # noqa: S311 - reproducible filler, not cryptography
    size = int(args.size_mb * 1e6)
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        dmesg, nccl, small = tmp / "dmesg.log", tmp / "nccl-tests.log", tmp / "kernel-small.log"
        failures = tmp / "nccl-tests-failures.log"
        kernel_log(dmesg, size if "kernel" in args.only else 0, rng)
        nccl_tests_log(nccl, size if "nccl" in args.only else 0, rng)
        nccl_failures_log(failures, size if "failures" in args.only else 0, rng)
        kernel_log(small, int(args.kernel_log_mb * 1e6) if "run" in args.only else 0, rng)
        baseline = against(args.against, tmp)
        print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; python {sys.version.split()[0]}")
        if "kernel" in args.only:
            kernel_part(dmesg, baseline, args.repeat, tmp)
        if "nccl" in args.only:
            nccl_part(nccl, baseline, args.repeat, tmp)
        if "failures" in args.only:
            failures_part(failures, baseline, args.repeat, tmp)
        if "run" in args.only:
            run_part(small, baseline, args.repeat, tmp)
    return 0


def kernel_part(dmesg: Path, baseline: Baseline, repeat: int, tmp: Path) -> None:
    log_part("kernel log (dmesg)", dmesg, FLOOR_DMESG, lambda r: sum(int(c["count"]) for c in r["xid_counts"]),
             baseline, repeat, tmp)


def nccl_part(nccl: Path, baseline: Baseline, repeat: int, tmp: Path) -> None:
    log_part("nccl-tests log", nccl, FLOOR_NCCL, lambda r: int(r.get("rows_total", -1)), baseline, repeat, tmp)


def log_part(title: str, log: Path, floor: str, items: Callable[[Any], int], baseline: Baseline,
             repeat: int, tmp: Path) -> None:
    """``parse`` and ``judge`` of ``log`` against the regex ``floor``, alternated; ``items`` counts what
    parse found, for the check that both saw the same."""
    results = alternate(with_baseline({"parse": [*CLI, "parse", str(log)],
                                       "judge --format json": [*CLI, "judge", str(log), "--format", "json"]},
                                      {"regex floor": [sys.executable, "-c", floor, str(log)]}, baseline),
                        repeat, tmp)
    report(title, log.stat().st_size, results, "regex floor")
    compare(results, baseline)
    agree(tmp, "parse", "regex floor", items)


def failures_part(failures: Path, baseline: Baseline, repeat: int, tmp: Path) -> None:
    """The aborted soak loop: besides time and memory, the exact count and the number of findings judge made."""
    results = alternate(with_baseline({"parse": [*CLI, "parse", str(failures)],
                                       "judge --format json": [*CLI, "judge", str(failures), "--format", "json"]},
                                      {"regex floor": [sys.executable, "-c", FLOOR_FAILURES, str(failures)]},
                                      baseline), repeat, tmp)
    report("nccl-tests log of aborted runs (failure lines only)", failures.stat().st_size, results, "regex floor")
    compare(results, baseline)
    agree(tmp, "parse", "regex floor", lambda r: int(r.get("errors_total", len(r["errors"]))))
    for name in results:
        if name.startswith("judge") and (tmp / f"{_file(name)}.out").stat().st_size:
            findings = json.loads((tmp / f"{_file(name)}.out").read_text())["findings"]
            counted = sum(int(f["observed"] or 1) for f in findings if f["check_id"] == "nccl_tests.correctness")
            print(f"  {name}: {len(findings)} findings, {counted} failure lines counted in them")


def run_part(small: Path, baseline: Baseline, repeat: int, tmp: Path) -> None:
    base = [*CLI, "run", "--replay", str(SNAPSHOT), "--format", "json", "--no-history"]
    results = alternate(with_baseline({"run --kernel-log big": [*base, "--kernel-log", str(small)]},
                                      {"run --kernel-log 1 KB fixture": [
                                          *base, "--kernel-log", str(FIXTURES / "dmesg-xid-h100-node.txt")]},
                                      baseline), repeat, tmp)
    report("run --replay with a saved kernel log", small.stat().st_size, results, "run --kernel-log 1 KB fixture")
    compare(results, baseline)
    big, tiny = results["run --kernel-log big"], results["run --kernel-log 1 KB fixture"]
    extra = [statistics.median(r[i] for r in big) - statistics.median(r[i] for r in tiny) for i in (0, 1)]
    print(f"  the {small.stat().st_size / 1e6:.0f} MB log adds {extra[0]:.2f} s wall, {extra[1]:.2f} s CPU to the run")


if __name__ == "__main__":
    sys.exit(main())
