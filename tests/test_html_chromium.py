"""The HTML report in a real browser: Debian's headless Chromium loads each page from file://,
and the page must log nothing to the console (no script error, no failed resource) and paint
what we drew. Screenshots are kept under test-artifacts/html/ for people to look at.

Console capture: with ``--enable-logging=stderr --v=0`` Chromium writes every console
message of the page — ``console.*`` calls, uncaught exceptions, blocked or failed loads — as
an ``INFO:CONSOLE`` line. That needs no DevTools client (the stdlib has no WebSocket) and
sees the same events; a control page with a thrown error proves the detector works.
Chromium is a CI dependency (scripts/test.sh installs it): its absence fails these tests.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.report.html import render_html
from gpu_preflight.report.scores import add_scores

from .conftest import REPO
from .large_report import finding, large_report
from .report_data import cluster_report, h200_report, node_only_report, self_launched_report

ARTIFACTS = Path(os.environ.get("GPU_PREFLIGHT_TEST_ARTIFACTS", REPO / "test-artifacts")) / "html"
WIDTH, HEIGHT = 1400, 2000
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0", f"--window-size={WIDTH},{HEIGHT}"]
CONSOLE = re.compile(r":INFO:CONSOLE[^\]]*\] (.*)")


@pytest.fixture(scope="module")
def chromium() -> str:
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail("chromium not found: install Debian's 'chromium' (scripts/test.sh does) or set CHROMIUM")
    return path


def load(chromium: str, page: Path, screenshot: Path) -> list[str]:
    """Open the page headless, save a screenshot, return the page's console messages."""
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    screenshot.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="gp-chromium-") as profile:
        proc = subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={screenshot}",
                               page.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert screenshot.is_file(), proc.stderr[-2000:]
    return [m.group(1) for m in map(CONSOLE.search, proc.stderr.splitlines()) if m]


def png_pixels(path: Path, max_rows: int | None = None) -> tuple[int, int, list[bytes]]:
    """Width, height and the first ``max_rows`` RGB rows of an 8-bit non-interlaced PNG (Chromium's)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    height = depth = color = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert depth == 8 and color in (2, 6), (depth, color)
    bpp = 4 if color == 6 else 3
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(min(height, max_rows or height)):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line) if bpp == 3 else bytes(b for j in range(0, stride, 4) for b in line[j:j + 3]))
        prev = line
    return width, height, rows


def colour(hex_colour: str) -> bytes:
    return bytes.fromhex(hex_colour.lstrip("#"))


def pixels_of(row: bytes) -> set[bytes]:
    return {row[i:i + 3] for i in range(0, len(row), 3)}


def test_the_console_detector_sees_an_uncaught_error(chromium: str, tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><body><p>x</p><script>console.warn("w"); nope();</script></body></html>')
    messages = load(chromium, page, tmp_path / "broken.png")
    assert any("Uncaught ReferenceError" in m for m in messages), messages


CASES: dict[str, Any] = {
    "node-only-h200": (node_only_report, "#2e7d32"),  # PASS: the recorded H200 host, healthy (host checks SKIP)
    "node-fail-h200": (lambda: h200_report(None, nvmlDeviceGetCurrentClocksEventReasons=8), "#c62828"),
    "cluster-self-launched-cpu": (self_launched_report, None),
    "cluster-3-nodes": (lambda: add_scores(cluster_report(node_fabric=[450.0, 450.0, 380.0],
                                                            links=[48.0, 30.0])), "#e0a800"),
    "cluster-40-nodes": (lambda: add_scores(cluster_report(nodes=40, node_fabric=[450.0 - n for n in range(40)])),
                         None),
    "cluster-2000-nodes": (lambda: large_report(2000, planted=[
        finding(17, "gpu.thermal", "FAIL", "n00017/gpu0", "at_slowdown", 91, 87, "°C"),
        *(finding(n, "system.shm", "WARN", f"n{n:05d}", "small", 64, 1024, "MiB") for n in range(100, 400))]),
        "#c62828"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_report_renders_cleanly_in_chromium(chromium: str, name: str, tmp_path: Path) -> None:
    build, banner = CASES[name]
    report = build()
    page = tmp_path / f"{name}.html"
    page.write_text(render_html(ClusterReport.of(report)), encoding="utf-8")
    shot = ARTIFACTS / f"{name}.png"
    assert load(chromium, page, shot) == []
    width, height, rows = png_pixels(shot, max_rows=600)  # banner, scores, advice: enough, and decoding is slow
    assert (width, height) == (WIDTH, HEIGHT)
    expected = banner or {"PASS": "#2e7d32", "WARN": "#e0a800", "FAIL": "#c62828", "ERROR": "#8e24aa"}[
        report["cluster_summary"]["overall_status"]]
    assert colour(expected) in pixels_of(rows[5]), "the verdict banner was not painted in its status colour"
    assert len(set().union(*(pixels_of(r) for r in rows[::20]))) > 50, "the page looks blank"
