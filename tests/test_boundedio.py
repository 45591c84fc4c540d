"""The bounded reader refuses what would block or exhaust memory, with one line naming the path."""

from __future__ import annotations

import io
import json
import os
import sys
import threading
from pathlib import Path

import pytest

from gpu_preflight import boundedio
from gpu_preflight.boundedio import InputError, iter_lines, load_json, parse_json, read_bytes, read_text


def _one_line(exc: pytest.ExceptionInfo[InputError]) -> str:
    text = str(exc.value)
    assert "\n" not in text and text
    return text


def test_regular_file_is_read_whole(tmp_path: Path) -> None:
    f = tmp_path / "out.txt"
    f.write_bytes(b"abc\r\ndef\n")
    assert read_bytes(f, limit=100) == b"abc\r\ndef\n"
    assert list(iter_lines(f, limit=100)) == ["abc", "def"]


@pytest.mark.parametrize("path, kind", [("/dev/zero", "character device"), ("/dev/urandom", "character device"),
                                        ("/", "directory")])
def test_non_regular_paths_are_refused_before_reading(path: str, kind: str) -> None:
    with pytest.raises(InputError) as exc:
        read_bytes(path, limit=1 << 30)
    assert kind in _one_line(exc) and path in str(exc.value)
    with pytest.raises(InputError):
        list(iter_lines(path, limit=1 << 30))


def test_fifo_without_a_writer_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    outcome: list[BaseException | bytes] = []
    worker = threading.Thread(target=lambda: outcome.append(_catch(lambda: read_bytes(fifo, limit=10))), daemon=True)
    worker.start()
    worker.join(5)
    assert not worker.is_alive(), "reading a FIFO blocked"
    assert isinstance(outcome[0], InputError) and "FIFO" in str(outcome[0])


def _catch(fn: object) -> BaseException | bytes:
    try:
        return fn()  # type: ignore[operator,no-any-return]
    except BaseException as exc:
        return exc


def test_missing_file_names_the_path_and_the_reason(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        read_bytes(tmp_path / "nope", limit=10, what="config file")
    assert "nope: cannot read config file: No such file or directory" in _one_line(exc)


def test_size_limit_refuses_one_byte_over_and_accepts_the_limit(tmp_path: Path) -> None:
    f = tmp_path / "big"
    f.write_bytes(b"x" * 1024)
    assert len(read_bytes(f, limit=1024)) == 1024
    with pytest.raises(InputError) as exc:
        read_bytes(f, limit=1023)
    assert "more than the 1023 bytes accepted" in _one_line(exc)
    with pytest.raises(InputError):
        list(iter_lines(f, limit=1023))


def test_a_line_without_end_is_bounded(tmp_path: Path) -> None:
    f = tmp_path / "one-line"
    f.write_bytes(b"y" * 300)
    assert list(iter_lines(f, limit=300)) == ["y" * 300]
    with pytest.raises(InputError):
        list(iter_lines(f, limit=299))


def test_stdin_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"z" * 2000)))
    with pytest.raises(InputError) as exc:
        read_bytes("-", limit=1999)
    assert "standard input" in _one_line(exc)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"z" * 2000)))
    assert read_bytes("-", limit=2000) == b"z" * 2000


def test_utf16_is_named_and_invalid_utf8_is_refused_when_strict(tmp_path: Path) -> None:
    f = tmp_path / "site.toml"
    f.write_bytes("[evidence]\n".encode("utf-16"))
    with pytest.raises(InputError) as exc:
        read_text(f, limit=100, what="config file")
    assert "config file is UTF-16 text; save it as UTF-8" in _one_line(exc)
    f.write_bytes(b"ok \xff here")
    with pytest.raises(InputError) as exc:
        read_text(f, limit=100)
    assert "not UTF-8 text (invalid byte at offset 3)" in _one_line(exc)
    assert read_text(f, limit=100, strict=False) == "ok \ufffd here"


def test_utf8_bom_is_dropped(tmp_path: Path) -> None:
    f = tmp_path / "bom.json"
    f.write_bytes(b"\xef\xbb\xbf{\"a\": 1}")
    assert load_json(f, limit=100) == {"a": 1}


def test_deep_json_is_refused_before_decoding_and_shallow_json_decodes() -> None:
    deep = "[" * 5000 + "]" * 5000
    with pytest.raises(InputError) as exc:
        parse_json(deep, "deep.json")
    assert "nests 5000 levels deep (at most 64 accepted)" in _one_line(exc)
    limit = boundedio.JSON_MAX_DEPTH
    assert parse_json("[" * limit + "]" * limit) is not None
    with pytest.raises(InputError):
        parse_json("[" * (limit + 1) + "]" * (limit + 1))


def test_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps({"log": "[" * 500 + '\\"{{' * 100, "v": [[1]]})
    assert boundedio.nesting_depth(text) == 3
    assert parse_json(text)["v"] == [[1]]


def test_depth_scan_is_linear_on_hostile_text() -> None:
    hostile = "[" + '\\"' * 200_000 + "[" * 100
    assert boundedio.nesting_depth(hostile) == 1


def test_invalid_json_is_one_line() -> None:
    with pytest.raises(InputError) as exc:
        parse_json("{\n\"a\": }", "x.json", what="report")
    assert _one_line(exc).startswith("x.json: report is not valid JSON")
