"""A site config's content is copied nowhere: not beside the bytecode, not in anything a run writes.

An earlier version kept every TOML text it parsed in ``__pycache__/bytecache.<tag>.toml``
(mode 0644 whatever the umask), so a site's 0600 ``--config`` holding an MLflow URL with a
password could be read by any user, and stayed there after the config was rotated. Nothing
is kept beside the bytecode any more (that cache went with the standard library's dataclasses):
two runs with a site config leave its text nowhere but in the site's own file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gpu_preflight

from .conftest import H200_DUMP

PACKAGE = Path(gpu_preflight.__file__).resolve().parent
PASSWORD = "planted-site-config-pw-5e1"


def _holding(root: Path, secret: bytes) -> list[str]:
    return sorted(str(p) for p in root.rglob("*") if p.is_file() and not p.is_symlink() and secret in p.read_bytes())


def test_a_site_configs_password_is_kept_nowhere(tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text(f'# tracking server: mlflow+http://alice:{PASSWORD}@mlflow.internal:5000\n'
                    f'[outputs]\nmlflow_artifact_location = "s3://alice:{PASSWORD}@bucket/artifacts"\n'
                    '[gpu]\nexpected_count = 8\n')
    site.chmod(0o600)
    prefix = tmp_path / "pyc"
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPYCACHEPREFIX=str(prefix), HOME=str(home), TMPDIR=str(tmp_path), XDG_DATA_HOME=str(home / "data"))
    env.pop("LD_LIBRARY_PATH", None)
    for _ in range(2):  # the second run starts from the bytecode the first one wrote
        proc = subprocess.run(
            [sys.executable, "-m", "gpu_preflight", "run", "--replay", str(H200_DUMP), "--check", "gpu.*",
             "--config", str(site), "--report-dir", str(tmp_path / "report"), "--history", "--history-db",
             str(tmp_path / "history.sqlite")], env=env, capture_output=True, timeout=300)
        assert proc.returncode in (0, 1, 2), proc.stderr.decode()
        assert PASSWORD.encode() not in proc.stdout + proc.stderr
    written = _holding(tmp_path, PASSWORD.encode())
    assert written == [str(site)]
    assert (tmp_path / "report" / "report.json").is_file() and (tmp_path / "history.sqlite").is_file()
    assert list(prefix.rglob("*.pyc"))  # bytecode was written there: the prefix was used
    assert _holding(PACKAGE, PASSWORD.encode()) == []

