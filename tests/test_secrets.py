"""No planted secret reaches anything gpu-preflight prints, stores or serves.

Secrets are planted where a site really has them: fabric-looking environment variables
(``FI_EFA_PASSWORD``, ``OFI_NCCL_TOKEN``), cloud and MLflow credentials, and a password and
token in an MLflow tracking URI. A real run then writes everything it can (JSON on stdout,
the console on stderr, ``--report-dir``, the history database, the Prometheus textfile, a
real MLflow store with its artifacts) and every byte of it is searched; so are the health
server's ``/status`` and ``/metrics``.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_preflight.engine import RunOptions
from gpu_preflight.redact import MASK, looks_secret, redact_env, redact_text
from gpu_preflight.server import create_gpu_healthcheck_server

GP = Path(sys.executable).parent / "gpu-preflight"
SECRETS = {
    "FI_EFA_PASSWORD": "planted-secret-7f3",
    "OFI_NCCL_TOKEN": "planted-ofi-token-91",
    "FI_EFA_SECRET_KEY": "planted-efa-key-22",
    "OFI_NCCL_API_KEY": "planted-api-key-38",
    "FI_EFA_CREDENTIALS": "planted-creds-55",
    "FI_EFA_UNKNOWN_KNOB": "planted-unlisted-60",  # not secret-looking, but not a known variable either
    "MLFLOW_TRACKING_PASSWORD": "planted-mlflow-pw-47",
    "AWS_SECRET_ACCESS_KEY": "planted-aws-secret-12",
}
URI_PASSWORD = "planted-uri-pw-83"
URI_TOKEN = "planted-uri-token-64"


def planted() -> list[str]:
    return [*SECRETS.values(), URI_PASSWORD, URI_TOKEN]


def leaks(text: str | bytes) -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    return [s for s in planted() if s.encode() in data]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_full_run_stores_and_prints_no_planted_secret(tmp_path: Path) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {**os.environ, **SECRETS, "FI_EFA_USE_DEVICE_RDMA": "1",
           "GPU_PREFLIGHT_OUTPUTS__TIMEOUT_S": "120",  # importing mlflow takes ~9 s on the loaded CI VM
           "GPU_PREFLIGHT_OUTPUTS__MLFLOW_ARTIFACT_LOCATION": (tmp_path / "mlartifacts").as_uri()}
    env.pop("MLFLOW_TRACKING_URI", None)
    secret_uri = f"http://alice:{URI_PASSWORD}@127.0.0.1:{closed_port()}/?token={URI_TOKEN}"
    proc = subprocess.run(
        [str(GP), "run", "--node-only", "--format", "json", "--report-dir", str(tmp_path / "out"),
         "--history-db", str(tmp_path / "hist" / "history.sqlite"), "--prom-textfile", str(tmp_path / "m.prom"),
         "--output", f"mlflow+sqlite:///{tmp_path / 'mlflow.db'}", "--mlflow-uri", secret_uri],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1, 2), proc.stderr
    report = json.loads(proc.stdout)
    recorded = report["nodes"]["node_0"]["network"]["environment"]
    assert recorded["FI_EFA_USE_DEVICE_RDMA"] == "1"  # the allow-list still records tuning variables
    assert not any(k in recorded for k in SECRETS)
    assert "MLflow run" in proc.stderr and f"alice:{MASK}@127.0.0.1" in proc.stderr  # both targets tried
    assert leaks(proc.stdout) == [] and leaks(proc.stderr) == []
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"report.json", "report.html", "history.sqlite", "m.prom", "mlflow.db"} <= names, names
    assert any("mlartifacts" in p.parts for p in files)  # the MLflow artifacts were searched too
    assert {str(p.relative_to(tmp_path)): leaks(p.read_bytes()) for p in files if leaks(p.read_bytes())} == {}


def get(port: int, path: str) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        return conn.getresponse().read()
    finally:
        conn.close()


def test_the_health_server_serves_no_planted_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("FI_EFA_USE_DEVICE_RDMA", "1")
    server = create_gpu_healthcheck_server(lambda: 0.0, 0, 30, enable_gpu_monitoring=False,
                                           options=RunOptions(include=["fabric.*"], probe_timeout_s=20))
    server.start()
    try:
        assert server.wait_for_tick(0, 60), "monitor did not tick"
        status = get(server.port, "/status")
        assert b"FI_EFA_USE_DEVICE_RDMA" in status  # the fabric facts are there
        assert leaks(status) == [] and leaks(get(server.port, "/metrics")) == []
    finally:
        server.stop()


@pytest.mark.parametrize("text, shown", [
    ("mlflow+http://alice:pw1@host:5000/x", f"mlflow+http://alice:{MASK}@host:5000/x"),
    ("s3://bucket/p/?X-Amz-Signature=abc&X-Amz-Date=1", f"s3://bucket/p/?X-Amz-Signature={MASK}&X-Amz-Date=1"),
    ("ConnectionError: https://u:p@h/api?token=t unreachable", f"ConnectionError: https://u:{MASK}@h/api?token={MASK} "
                                                              "unreachable"),
    ("set FI_EFA_PASSWORD=x and FI_EFA_TX_SIZE=8", f"set FI_EFA_PASSWORD={MASK} and FI_EFA_TX_SIZE=8"),
    ("http://host:5000/no/credentials", "http://host:5000/no/credentials"),
    ("postgresql://mlflow@db/mlflow", "postgresql://mlflow@db/mlflow"),
])
def test_redact_text(text: str, shown: str) -> None:
    assert redact_text(text) == shown


def test_secret_looking_names_and_env_values() -> None:
    assert all(looks_secret(n) for n in ("FI_EFA_PASSWORD", "OFI_NCCL_TOKEN", "api_key", "MY_SECRET", "DB_PWD"))
    assert not any(looks_secret(n) for n in ("FI_EFA_USE_DEVICE_RDMA", "NCCL_SOCKET_IFNAME", "FI_PROVIDER"))
    assert redact_env({"A_TOKEN": "t", "FI_PROVIDER": "efa", "NCCL_NET": "https://u:p@h/"}) == {
        "A_TOKEN": MASK, "FI_PROVIDER": "efa", "NCCL_NET": f"https://u:{MASK}@h/"}
