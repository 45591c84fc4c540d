"""Benchmark: a live node check on 8 GPUs against gpumedic and a bare pynvml read, on the NVML stub.

All three read the same 8-GPU node: the stub ``libnvidia-ml.so.1`` (tests/nvml_stub, built
here with gcc) fed the recorded H200 dump widened to 8 GPUs. Commands alternate round by
round, so a noisy host slows each alike; medians and ratios are printed.

* ours: ``gpu-preflight run --node-only --no-history --format json`` (every node check,
  the host's real kernel log, fabric and PCIe probes; no history database write);
* gpumedic: ``gpumedic scan --json``, installed from PyPI into its own venv under the cache
  directory (``--gpumedic-venv``); where it cannot be installed its line says so and the
  ratio is left out;
* floor: ``python -c 'import pynvml'`` + nvmlInit + name, temperature, memory and ECC of
  each GPU: what any NVML-based tool pays before judging anything.

Besides wall time, each command's CPU time (user + system, its own children included, from
``getrusage``) is reported with its median and ratio: on a shared, loaded machine the wall
time of a short command swings 2-3x from round to round while its CPU time barely moves.
The target is judged on wall time.

Bytecode is cached (``PYTHONPYCACHEPREFIX`` in a temporary directory), as for an installed
package, even where the environment sets ``PYTHONDONTWRITEBYTECODE``. Target (issue 30; 1.5x
since issue 16): ours within 2x gpumedic's time.

On a GPU machine ``--live`` reads the real GPUs instead of the stub, and
``--gpumedic-module`` runs ``python -m gpumedic`` from this interpreter's environment
(for a machine that cannot reach PyPI, with the wheel installed beside).

``--against REV`` adds our run from another git revision (its ``src/`` extracted from git),
alternated with the others, and prints this tree's ratio to it: how a change moved the live
node check, in the same rounds as the peer.

    python bench/bench_node_live.py [--rounds 15] [--gpumedic-venv DIR] [--live] [--gpumedic-module]
                                    [--against REV]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from _selfcheck import Ran, checkout_src, child_env, fail, on_src, require, timed

REPO = Path(__file__).resolve().parents[1]
DUMP = REPO / "tests/fixtures/captured/h200-580.159.04/nvml_capture.json"
GPUMEDIC = "gpumedic[nvidia]==0.1.0"
TARGET = 2.0
FLOOR = ("import pynvml\npynvml.nvmlInit()\n"
         "for i in range(pynvml.nvmlDeviceGetCount()):\n"
         "    h = pynvml.nvmlDeviceGetHandleByIndex(i)\n"
         "    pynvml.nvmlDeviceGetName(h); pynvml.nvmlDeviceGetTemperature(h, 0); pynvml.nvmlDeviceGetMemoryInfo(h)\n"
         "    pynvml.nvmlDeviceGetTotalEccErrors(h, 1, 0)\n"
         "pynvml.nvmlShutdown()\n")


BENCH = "bench_node_live"


def judged(key: str) -> Callable[[Ran], bool]:
    """A run that reached a verdict: exit 0-2 and a JSON report holding ``key`` on stdout."""

    def ok(ran: Ran) -> bool:
        try:
            return ran.returncode in (0, 1, 2) and key in json.loads(ran.stdout)
        except ValueError:
            return False

    return ok


def gpumedic(venv: Path) -> tuple[Path | None, str]:
    """The gpumedic executable in ``venv`` (created and filled from PyPI when missing), or why not."""
    exe = venv / "bin" / "gpumedic"
    if exe.exists():
        return exe, "installed"
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, text=True)
        proc = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", GPUMEDIC], capture_output=True, text=True,
                              timeout=600, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"cannot create a venv for it: {exc}"
    if proc.returncode != 0 or not exe.exists():
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"pip install {GPUMEDIC!r} failed: {last}"
    return exe, "installed now"


def stub(tmp: Path) -> Path:
    """Build the stub library and its 8-GPU data file in ``tmp``; returns the data file."""
    sys.path.insert(0, str(REPO))
    from tests.nvml_stub.gpus import widen
    from tests.nvml_stub.stub import build_stub, write_stub_data

    build_stub(tmp)
    data = tmp / "nvml.txt"
    write_stub_data(widen(json.loads(DUMP.read_text()), 8), data)
    return data


def cpu_timed(cmd: list[str], *, what: str, ok: Callable[[Ran], bool] | None,
              env: dict[str, str]) -> tuple[Ran, float]:
    """:func:`timed`, plus the CPU seconds (user + system) the command and its children used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    ran = timed(BENCH, cmd, what=what, ok=ok, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ran, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--gpumedic-venv", type=Path,
                    default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gpu-preflight-bench"
                    / "gpumedic-venv")
    ap.add_argument("--live", action="store_true", help="read this machine's GPUs, not the stub")
    ap.add_argument("--gpumedic-module", action="store_true", help="run `python -m gpumedic` from this environment")
    ap.add_argument("--against", metavar="REV", help="also time our run from this git revision, alternated")
    args = ap.parse_args()
    require(BENCH, "gpu_preflight", "pynvml", "psutil")
    medic_cmd: list[str] | None
    if args.gpumedic_module:
        found = subprocess.run([sys.executable, "-c", "import gpumedic"], capture_output=True, check=False)
        medic_cmd = [sys.executable, "-m", "gpumedic"] if found.returncode == 0 else None
        how = "importable here" if medic_cmd else "not importable by this python"
    else:
        medic, how = gpumedic(args.gpumedic_venv)
        medic_cmd = [str(medic)] if medic else None
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        env = child_env(tmp)
        if not args.live:
            data = stub(tmp)
            env.update(LD_LIBRARY_PATH=f"{tmp}:{env.get('LD_LIBRARY_PATH', '')}".rstrip(":"), FAKE_NVML_DATA=str(data))
        ours = [sys.executable, "-m", "gpu_preflight", "run", "--node-only", "--no-history", "--format", "json"]
        cmds = {"ours": ours, "floor": [sys.executable, "-c", FLOOR]}
        accept = {"ours": judged("findings"), "floor": None, "gpumedic": judged("node_verdict")}
        if medic_cmd is not None:
            cmds["gpumedic"] = [*medic_cmd, "scan", "--json"]
        envs = {name: env for name in cmds}
        if args.against:
            old = f"ours@{args.against}"
            src = checkout_src(BENCH, args.against, tmp / "against")
            cmds[old], accept[old] = ours, accept["ours"]
            envs[old] = {**on_src(env, src), "PYTHONPYCACHEPREFIX": str(tmp / "pycache-against")}
        first = timed(BENCH, cmds["ours"], what="our live node check", ok=accept["ours"], env=env)
        gpus = sum(1 for f in json.loads(first.stdout)["findings"] if f["check_id"] == "gpu.thermal")
        if gpus == 0:
            fail(BENCH, "our node check read no GPU", first.stderr)
        for name, cmd in cmds.items():  # warm the page cache and write the bytecode
            timed(BENCH, cmd, what=name, ok=accept[name], env=envs[name])
        times: dict[str, list[float]] = {name: [] for name in cmds}
        cpu: dict[str, list[float]] = {name: [] for name in cmds}
        codes: dict[str, set[int]] = {name: set() for name in cmds}
        load0 = os.getloadavg()[0]
        for r in range(args.rounds):
            names = list(cmds)
            for name in names[r % len(names):] + names[: r % len(names)]:  # rotate who goes first
                ran, used = cpu_timed(cmds[name], what=name, ok=accept[name], env=envs[name])
                times[name].append(ran.seconds)
                cpu[name].append(used)
                codes[name].add(ran.returncode)
        load1 = os.getloadavg()[0]
    med = {name: statistics.median(t) for name, t in times.items()}
    cpu_med = {name: statistics.median(t) for name, t in cpu.items()}
    print(f"machine: {os.cpu_count()} CPUs, load average {load0:.1f} -> {load1:.1f}; "
          f"{'live' if args.live else 'stub'}: {gpus} GPUs "
          f"(our run exit {first.returncode}); {args.rounds} alternated rounds, medians")
    for name in ("ours", *[n for n in med if n.startswith("ours@")], "gpumedic", "floor"):
        if name in med:
            spread = f"{min(times[name]) * 1000:.0f}-{max(times[name]) * 1000:.0f}"
            print(f"{name:9s} median {med[name] * 1000:7.1f} ms  (range {spread} ms, exit {sorted(codes[name])}); "
                  f"CPU median {cpu_med[name] * 1000:6.1f} ms")
        else:
            print(f"{name:9s} skipped: {how}")
    print(f"ours/floor     {med['ours'] / med['floor']:.2f}x  (CPU {cpu_med['ours'] / cpu_med['floor']:.2f}x)")
    for name in (n for n in med if n.startswith("ours@")):
        print(f"ours/{name.removeprefix('ours@')}  {med['ours'] / med[name]:.2f}x  "
              f"(CPU {cpu_med['ours'] / cpu_med[name]:.2f}x): this tree against that revision")
    if "gpumedic" not in med:
        print(f"ours/gpumedic  not measured (gpumedic {how}); target <= {TARGET}x")
        return 0
    ratio = med["ours"] / med["gpumedic"]
    print(f"ours/gpumedic  {ratio:.2f}x  (target <= {TARGET}x: {'met' if ratio <= TARGET else 'missed'}; "
          f"CPU {cpu_med['ours'] / cpu_med['gpumedic']:.2f}x); "
          f"gpumedic/floor {med['gpumedic'] / med['floor']:.2f}x")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
