#!/usr/bin/env bash
# Install everything the test suite needs and run it (this is what CI runs, via .ci/run).
# Works on a fresh Debian 12 with Python 3.11, as root (apt) or as a user who already
# has the system packages below.
set -euo pipefail
cd "$(dirname "$0")/.."

# Under CI the real-world corpus layer must run: say so now, not after the install and the tests.
CORPUS=${GPU_PREFLIGHT_CORPUS:-../shared/corpus}
if [ ! -f "$CORPUS/MANIFEST.md" ]; then
  case "${CI:-}" in
    1|true|TRUE|True|yes) echo "CI=true but corpus not found at $CORPUS: set GPU_PREFLIGHT_CORPUS" >&2; exit 1 ;;
    *) echo "corpus not found at $CORPUS: its tests are skipped (set GPU_PREFLIGHT_CORPUS=/path/to/corpus)" >&2 ;;
  esac
fi

# System packages: gcc builds the stub libnvidia-ml.so.1 the NVML tests drive pynvml with;
# iproute2 (ip, tc) builds the network-namespace hosts of the multi-node tests; prometheus
# gives promtool and a real server for the /metrics tests; Slurm and munge run a real
# controller and daemons for the drain/resume tests (the tests start and stop them);
# libfabric-bin gives the real fi_info and fi_pingpong (tcp provider) of the fabric tests.
PKGS=(gcc libc6-dev python3-venv iproute2 prometheus slurm-wlm munge slurm-client slurmctld slurmd libfabric-bin chromium fonts-dejavu-core)
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})) && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The tests get their own environment: the README's first command installs gpu-preflight into
# .venv without torch (a node check in 0.2 s); installing torch and the test extras there would
# change what that command does. VENV overrides the location.
PY=${PYTHON:-python3}
VENV=${VENV:-.venv-test}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
echo "test.sh: installing gpu-preflight with its test, torch, k8s and sagemaker extras into $VENV (a few minutes the first time)" >&2
"$VENV/bin/pip" install -q --disable-pip-version-check -e '.[test,torch,k8s,sagemaker]'
echo "test.sh: ruff, mypy, then pytest" >&2
"$VENV/bin/ruff" check src tests bench
"$VENV/bin/mypy"
exec "$VENV/bin/python" -m pytest -q "$@"
