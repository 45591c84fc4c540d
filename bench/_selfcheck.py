"""What every bench checks before it prints a number: its setup imports, its subprocesses ran.

A bench run with a Python that lacks the package used to time subprocesses that failed at
once and print their ratio as a result. Now a missing import, or a subprocess that did not
do what it was timed for, ends the bench with one ``<bench>: cannot measure: ...`` line on
stderr and exit 2, never with a figure.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

__all__ = ["Ran", "checkout_src", "child_env", "fail", "on_src", "require", "timed"]

REPO = Path(__file__).resolve().parents[1]
EXIT = 2


def child_env(tmp: Path) -> dict[str, str]:
    """The environment a bench's children run in: this checkout's src first, no stub or
    gpu-preflight settings inherited from the caller, bytecode cached in ``tmp``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("FAKE_NVML_", "GPU_PREFLIGHT_")) and k != "PYTHONDONTWRITEBYTECODE"}
    path = os.pathsep.join(p for p in (str(REPO / "src"), env.get("PYTHONPATH")) if p)
    env.update(PYTHONPYCACHEPREFIX=str(tmp / "pycache"), PYTHONPATH=path)
    return env


def fail(bench: str, why: str, detail: str = "") -> NoReturn:
    """Stop the bench: one line saying why it cannot measure, then the detail (a child's stderr)."""
    print(f"{bench}: cannot measure: {why}", file=sys.stderr)
    if detail.strip():
        print("\n".join(detail.strip().splitlines()[-15:]), file=sys.stderr)
    raise SystemExit(EXIT)


def require(bench: str, *modules: str) -> None:
    """Each module imports in this interpreter (the bench's subprocesses use the same one)."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            ours = name.split(".")[0] in ("gpu_preflight", "torch")
            hint = (f"install the project into it (from the checkout: pip install '.[torch]'), or run the bench with "
                    f"{REPO / '.venv/bin/python'}") if ours else "install it"
            fail(bench, f"{sys.executable} cannot import {name} ({exc}); {hint}")


@dataclass(frozen=True)
class Ran:
    """A finished subprocess: exit code, what it wrote, how long it took."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float


def timed(bench: str, cmd: Sequence[str], *, what: str, ok: Callable[[Ran], bool] | None = None,
          timeout: float | None = None, env: Mapping[str, str] | None = None) -> Ran:
    """Run ``cmd`` as the benches time it (output to files, not pipes: nothing reads while it runs),
    in ``env`` (else this process's environment), then stop the bench unless it exited 0 (or ``ok``
    accepts it)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(list(cmd), stdout=out, stderr=err, check=False, timeout=timeout, env=env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            fail(bench, f"{what} did not run: {exc}")
        seconds = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        ran = Ran(proc.returncode, out.read(), err.read(), seconds)
    if not (ok(ran) if ok is not None else ran.returncode == 0):
        fail(bench, f"{what} failed (exit {ran.returncode}): {' '.join(cmd)}", ran.stderr or ran.stdout)
    return ran


def checkout_src(bench: str, rev: str, dest: Path) -> Path:
    """``src/`` of git revision ``rev`` extracted under ``dest`` (for a bench that times this tree
    against another revision); returns the ``src`` directory to put first on ``PYTHONPATH``."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "src"], capture_output=True, check=False)
    if archive.returncode != 0:
        fail(bench, f"cannot check out {rev}: {archive.stderr.decode(errors='replace').strip()}")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest / "src"


def on_src(env: Mapping[str, str], src: Path) -> dict[str, str]:
    """``env`` running the package from ``src`` (another revision's, :func:`checkout_src`) instead of
    this checkout's: ``src`` first on ``PYTHONPATH``, this checkout's ``src`` left out."""
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(REPO / "src")]
    return {**env, "PYTHONPATH": os.pathsep.join([str(src), *rest])}
