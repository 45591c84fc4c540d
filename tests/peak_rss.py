"""Peak memory of one ``gpu-preflight`` command, as the command itself saw it.

``ru_maxrss`` (``wait4``, ``RUSAGE_CHILDREN``) cannot be used: Linux carries the high-water
mark across ``exec``, so a child forked from a pytest process that has grown to 600 MB
reports 600 MB whatever it does. The command's own ``VmHWM`` (per address space, new at
``exec``) is read at its exit instead.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_WRAP = (
    "import atexit, runpy, sys\n"
    "report = sys.argv.pop(1)\n"
    "def hwm():\n"
    "    with open('/proc/self/status') as fh:\n"
    "        kb = next(line.split()[1] for line in fh if line.startswith('VmHWM:'))\n"
    "    with open(report, 'w') as out:\n"
    "        out.write(kb)\n"
    "atexit.register(hwm)\n"
    "sys.argv = ['gpu-preflight', *sys.argv[1:]]\n"
    "runpy.run_module('gpu_preflight', run_name='__main__')\n"
)


def peak_rss(args: list[str], scratch: Path, stdout: Path | None = None) -> tuple[int, float]:
    """Run ``gpu-preflight *args``; return its exit code and its peak RSS in MiB.

    ``scratch`` is a directory for the figure; stdout goes to ``stdout`` (else nowhere).
    """
    report = scratch / f"vmhwm-{len(list(scratch.glob('vmhwm-*')))}.txt"
    with (stdout.open("wb") if stdout else open("/dev/null", "wb")) as out:
        proc = subprocess.run([sys.executable, "-c", _WRAP, str(report), *args], stdout=out,
                              stderr=subprocess.PIPE, timeout=600, check=False)
    if not report.is_file():
        raise AssertionError(f"gpu-preflight {' '.join(args)} left no peak figure: {proc.stderr.decode()[-2000:]}")
    return proc.returncode, int(report.read_text()) / 1024
