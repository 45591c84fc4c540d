"""A site config's content is copied nowhere: not beside the bytecode, not in anything a run writes.

An earlier version kept every TOML text it parsed in ``__pycache__/bytecache.<tag>.toml``
(mode 0644 whatever the umask), so a site's 0600 ``--config`` holding an MLflow URL with a
password could be read by any user, and stayed there after the config was rotated. Now no
configuration text is kept, and the file such a version left behind is removed at start-up
when it is ours (a regular file of this user; never a link, never another user's file).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_preflight import bytecache

from .conftest import H200_DUMP

PACKAGE = Path(bytecache.__file__).resolve().parent
PASSWORD = "planted-site-config-pw-5e1"
TAG = sys.implementation.cache_tag


def _prefixed(prefix: Path, directory: Path) -> Path:
    """Where ``PYTHONPYCACHEPREFIX=prefix`` puts the bytecode of modules in ``directory``."""
    return prefix / str(directory).lstrip(os.sep)


def _holding(root: Path, secret: bytes) -> list[str]:
    return sorted(str(p) for p in root.rglob("*") if p.is_file() and not p.is_symlink() and secret in p.read_bytes())


def test_a_site_configs_password_is_kept_nowhere_and_an_old_copy_is_removed(tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text(f'# tracking server: mlflow+http://alice:{PASSWORD}@mlflow.internal:5000\n'
                    f'[outputs]\nmlflow_artifact_location = "s3://alice:{PASSWORD}@bucket/artifacts"\n'
                    '[gpu]\nexpected_count = 8\n')
    site.chmod(0o600)
    prefix = tmp_path / "pyc"
    stale = _prefixed(prefix, PACKAGE) / f"bytecache.{TAG}.toml"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"an older version's copy: " + PASSWORD.encode())
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPYCACHEPREFIX=str(prefix), HOME=str(home), TMPDIR=str(tmp_path), XDG_DATA_HOME=str(home / "data"))
    env.pop("LD_LIBRARY_PATH", None)
    for _ in range(2):  # the second run finds a cache the first one wrote
        proc = subprocess.run(
            [sys.executable, "-m", "gpu_preflight", "run", "--replay", str(H200_DUMP), "--check", "gpu.*",
             "--config", str(site), "--report-dir", str(tmp_path / "report"), "--history", "--history-db",
             str(tmp_path / "history.sqlite")], env=env, capture_output=True, timeout=300)
        assert proc.returncode in (0, 1, 2), proc.stderr.decode()
        assert PASSWORD.encode() not in proc.stdout + proc.stderr
    assert not stale.exists()
    written = _holding(tmp_path, PASSWORD.encode())
    assert written == [str(site)]
    assert (tmp_path / "report" / "report.json").is_file() and (tmp_path / "history.sqlite").is_file()
    assert list(prefix.rglob(f"bytecache.{TAG}.methods")) or bytecache.METHODS is None  # the method cache still works
    assert _holding(PACKAGE, PASSWORD.encode()) == []


def test_only_our_own_regular_stale_files_are_removed(tmp_path: Path) -> None:
    ours = tmp_path / f"bytecache.{TAG}.toml"
    ours.write_text("old copy")
    other_python = tmp_path / "bytecache.cpython-312.toml"
    other_python.write_text("old copy")
    victim = tmp_path / "victim.toml"
    victim.write_text("someone's file")
    link = tmp_path / "bytecache.cpython-399.toml"
    link.symlink_to(victim)
    directory = tmp_path / "bytecache.cpython-398.toml"
    directory.mkdir()
    methods = tmp_path / f"bytecache.{TAG}.methods"
    methods.write_bytes(b"kept methods")
    removed = bytecache.remove_stale({str(tmp_path)})
    assert sorted(removed) == sorted([str(ours), str(other_python)])
    assert link.is_symlink() and victim.read_text() == "someone's file"
    assert directory.is_dir() and methods.read_bytes() == b"kept methods"
    assert bytecache.remove_stale({str(tmp_path)}) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_another_users_stale_file_is_left_alone(tmp_path: Path) -> None:
    theirs = tmp_path / f"bytecache.{TAG}.toml"
    theirs.write_text("not ours to remove")
    os.chown(theirs, 65534, 65534)
    assert bytecache.remove_stale({str(tmp_path)}) == []
    assert theirs.exists()


def test_a_missing_or_unlistable_directory_is_skipped(tmp_path: Path) -> None:
    assert bytecache.remove_stale({str(tmp_path / "missing"), str(tmp_path / "file")}) == []
    (tmp_path / "file").write_text("x")
    assert bytecache.remove_stale({str(tmp_path / "file")}) == []
