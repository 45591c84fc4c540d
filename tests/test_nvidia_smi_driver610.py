"""Driver 610 renamed nvidia-smi's version fields; both text forms must still yield driver and CUDA.

The table banner reads ``KMD Version`` / ``CUDA UMD Version`` instead of ``Driver Version`` /
``CUDA Version``; ``-q`` keeps the old keys with a bracketed deprecation note after the value
and adds the new keys. Real captures (utkuozdemir/nvidia_gpu_exporter, field corpus) are used.
"""

from __future__ import annotations

from pathlib import Path

from gpu_preflight.parsers.detect import parse_text

FIELD = Path(__file__).parent / "fixtures" / "field" / "nvidia-smi"


def test_table_banner_with_kmd_version() -> None:
    for name, driver in (("exporter-table-rtx2080s-610.57.04-idle.txt", "610.57.04"),
                         ("exporter-table-win-rtx2080s-610.62-load.txt", "610.62")):
        kind, record = parse_text((FIELD / name).read_text())
        assert kind == "nvidia-smi-table"
        assert (record.driver_version, record.cuda_version) == (driver, "13.3")
        assert len(record.gpus) == 1


def test_q_header_prefers_the_new_keys_over_the_deprecated_ones() -> None:
    kind, record = parse_text((FIELD / "exporter-q-rtx2080s-610.57.04-load.txt").read_text())
    assert kind == "nvidia-smi-q"
    assert (record.driver_version, record.cuda_version) == ("610.57.04", "13.3")


def test_q_deprecated_key_alone_loses_its_note() -> None:
    text = (FIELD / "exporter-q-rtx2080s-610.57.04-load.txt").read_text()
    lines = [line for line in text.splitlines() if not line.startswith(("KMD Version", "CUDA UMD Version"))]
    _, record = parse_text("\n".join(lines) + "\n")
    assert (record.driver_version, record.cuda_version) == ("610.57.04", "13.3")
