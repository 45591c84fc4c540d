"""The shipped Slurm files stay in step with the code: example config, script syntax.

slurm.conf.fragment itself is loaded by the live test cluster (tests/slurm_cluster.py), so a
setting Slurm rejects, or a path the tests no longer substitute, fails there.
"""

from __future__ import annotations

import subprocess
import tomllib
import typing
from pathlib import Path

import pytest

from gpu_preflight.config.fields import setting_fields
from gpu_preflight.config.loader import coerce
from gpu_preflight.config.slurm_schema import SlurmConfig

DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "slurm"


def test_example_site_file_lists_every_setting_with_its_default() -> None:
    section = tomllib.loads((DEPLOY / "site.toml").read_text())["slurm"]
    hints = typing.get_type_hints(SlurmConfig)
    assert list(section) == [f.name for f in setting_fields(SlurmConfig)]
    defaults = SlurmConfig()
    for key, value in section.items():
        assert coerce(value, hints[key]) == getattr(defaults, key), key


@pytest.mark.parametrize("script", sorted(p.name for p in DEPLOY.iterdir() if p.suffix in (".sh", ".sbatch")))
def test_scripts_parse(script: str) -> None:
    shell = "bash" if script.endswith(".sbatch") else "sh"
    done = subprocess.run([shell, "-n", str(DEPLOY / script)], capture_output=True, text=True, timeout=30,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert (DEPLOY / script).stat().st_mode & 0o111, f"{script} is not executable"


def test_sbatch_scripts_offer_both_launch_modes_and_pyxis() -> None:
    for name in ("single-node.sbatch", "multi-node.sbatch"):
        text = (DEPLOY / name).read_text()
        assert "torchrun" in text and "--gpus-per-task=1" in text and "--container-image=" in text, name
    assert '--node_rank="$SLURM_NODEID"' in (DEPLOY / "multi-node.sbatch").read_text()
