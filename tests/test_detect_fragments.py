"""Detection survives the ways people paste (issue 27, "Detection that survives fragments and versions").

Data augmentation over texts whose kind we know: every field case outside the held-out
quarter (``bench/bench_field.py``; a held-out case is never opened here) and the
in-repository fixtures under ``tests/fixtures/evidence``. From each, deterministic variants
that people actually produce (a seed per file name, so a failure names a reproducible text):

* decorations, which keep every line of the tool: GitHub / e-mail quoting, a date, host,
  launcher-rank or container tag on every line, CRLF line ends, terminal colours, tabs for
  spaces (what ``unexpand -a`` or an editor does), trailing blanks, Markdown fences (bare,
  or with a language and the poster's prose around them), a shell prompt line before it.
  The detected kind must stay the same, and a case whose thread concluded FAIL or WARN must
  not be judged PASS through the real ``judge`` path;
* cuts (head, tail, a middle excerpt) and kernel messages copied without their stamps: the
  kind stays the same, or the fragment holds nothing its kind's parser and judges can give a
  verdict on. A cut may drop the very line that failed, so its verdict is not asserted;
* two tools' outputs concatenated: the product reads one tool per text, so the kind is the
  one whose sniffer is surer of the concatenation, never a third;
* negatives: prose, a shell history, a traceback or a chat that name the tools stay
  unrecognised, decorated or not (a tag on every line is no evidence).
"""

from __future__ import annotations

import random
import re
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from bench_field import Case, Outcome, judge, load_cases

from gpu_preflight.evidence import evidence_config, judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import SNIFF_WINDOW, detect_kind, get_parser
from gpu_preflight.parsers.errors import ParseError
from gpu_preflight.parsers.text import PasteReader

EVIDENCE = Path(__file__).resolve().parent / "fixtures" / "evidence"
MAX_LINES = 150  # a longer text is taken by its head: the variants of its first 150 lines are pastes too
NOT_PASSING = ("FAIL", "WARN")


def _head(text: str) -> str:
    return "\n".join(text.splitlines()[:MAX_LINES]) + "\n"


def _known() -> list[tuple[str, str, str, Case | None]]:
    """(name, text, detected kind, field case or None) for every text whose kind we know."""
    known: list[tuple[str, str, str, Case | None]] = []
    for case in load_cases():
        if case.held_out or case.expect == "UNRECOGNISED":
            continue
        text = _head(case.path.read_text(encoding="utf-8", errors="replace"))
        if (kind := detect_kind(text)) is not None:
            known.append((case.name, text, kind, case))
    for path in sorted(EVIDENCE.rglob("*")):
        if path.is_file() and path.suffix != ".md":
            text = _head(path.read_text(encoding="utf-8", errors="replace"))
            if (kind := detect_kind(text)) is not None:
                known.append((str(path.relative_to(EVIDENCE)), text, kind, None))
    return known


KNOWN = _known()


def _rng(name: str, variant: str) -> random.Random:
    return random.Random(zlib.crc32(f"{variant}:{name}".encode()))


def _lines(fn: Callable[[int, str], str]) -> Callable[[str, random.Random], str]:
    return lambda text, rng: "".join(fn(i, line) + "\n" for i, line in enumerate(text.splitlines()))


def _colour(i: int, line: str) -> str:
    """A terminal's colours: a whole line in bold green, or its first number in yellow."""
    return f"\x1b[1;32m{line}\x1b[0m" if i % 3 == 0 else re.sub(r"(\d+)", "\x1b[33m\\1\x1b[0m", line, count=1)


def _unexpand(line: str) -> str:
    """What ``unexpand -a`` does: blanks that end at an 8-column tab stop become a tab."""
    out = []
    for i in range(0, len(line), 8):
        seg = line[i:i + 8]
        kept = seg.rstrip(" ")
        out.append(kept + "\t" if len(seg) == 8 and len(seg) - len(kept) >= 2 else seg)
    return "".join(out)


DECORATIONS: dict[str, Callable[[str, random.Random], str]] = {
    "quote": _lines(lambda i, line: f"> {line}" if line else ">"),
    "quote_nested": _lines(lambda i, line: f"> > {line}"),
    "iso_date": _lines(lambda i, line: f"2024-03-{1 + i % 28:02d}T12:{i % 60:02d}:0{i % 10}.123Z {line}"),
    "host_tag": _lines(lambda i, line: f"gpu-node-07: {line}"),
    "rank_tag": _lines(lambda i, line: f"[rank3]: {line}"),
    "pod_tag": _lines(lambda i, line: f"trainer-worker-0-7f9c4  | {line}"),
    "crlf": lambda text, rng: text.replace("\n", "\r\n"),
    "ansi": _lines(_colour),
    "tabs": _lines(lambda i, line: _unexpand(line)),
    "trailing_blanks": _lines(lambda i, line: line + " " * (1 + i % 3)),
    "fence": lambda text, rng: f"```\n{text}```\n",
    "fence_prose": lambda text, rng: f"Here is the output:\n\n```text\n{text}```\n\nAny ideas what is wrong?\n",
    "prompt": lambda text, rng: f"$ {rng.choice(['nvidia-smi', 'dcgmi diag -r 3', 'dmesg -T', 'ibstat'])}\n{text}",
    "prompt_host": lambda text, rng: f"ubuntu@ip-10-0-0-1:~$ sudo ./run-check --all\n{text}",
}


def _cut(name: str, text: str, how: str) -> str | None:
    """A head cut (the first 1..n/8 lines dropped), a tail cut, or the middle three fifths; ``None`` when the
    text is too short to cut."""
    lines = text.splitlines()
    n = len(lines)
    k = _rng(name, how).randint(1, max(1, n // 8))
    if how == "head_cut" and n >= 8:
        kept = lines[k:]
    elif how == "tail_cut" and n >= 8:
        kept = lines[:n - k]
    elif how == "middle" and n >= 12:
        kept = lines[n // 5:n - n // 5]
    else:
        return None
    return "\n".join(kept) + "\n"


def _verdict_as(kind: str, text: str) -> str:
    """The worst status the judges give ``text`` read as ``kind`` (ERROR when its parser refuses it)."""
    try:
        record = get_parser(kind).parse(text)
    except ParseError:
        return "ERROR"
    config, _ = evidence_config(record)
    return Status.worst(f.status for f in judge_text(text, config, kind=kind)).value


def test_the_augmentation_has_material() -> None:
    """Vacuous otherwise: the field corpus and the fixtures give texts of most kinds."""
    assert len(KNOWN) >= 200
    assert len({kind for _, _, kind, _ in KNOWN}) >= 15


@pytest.mark.parametrize("decoration", sorted(DECORATIONS))
def test_a_decorated_paste_keeps_its_kind(decoration: str) -> None:
    wrong = []
    for name, text, kind, _ in KNOWN:
        variant = DECORATIONS[decoration](text, _rng(name, decoration))
        if (got := detect_kind(variant)) != kind:
            wrong.append(f"{name}: {kind} -> {got}")
    assert wrong == []


@pytest.mark.parametrize("how", ["head_cut", "tail_cut", "middle"])
def test_a_cut_paste_keeps_its_kind_or_holds_nothing_of_it(how: str) -> None:
    """A fragment that lost its kind must have lost every record its kind is judged on, too."""
    wrong = []
    for name, text, kind, _ in KNOWN:
        fragment = _cut(name, text, how)
        if fragment is None or (got := detect_kind(fragment)) == kind:
            continue
        if (verdict := _verdict_as(kind, fragment)) not in ("SKIP", "ERROR"):  # it still holds records of its kind
            wrong.append(f"{name}: {kind} -> {got}, though read as {kind} it is {verdict}")
    assert wrong == []


# The kernel log's own line prefixes (plain, -T, journalctl, /dev/kmsg, --decode): a message copied without
# them ("journalctl -o cat", an issue body quoting the lines) is the same kernel log.
_KERNEL_STAMP = re.compile(r"^(?:\[\s*\d+\.\d+\]\s?|\[[A-Z][a-z]{2} [A-Z][a-z]{2} +\d+ [\d:]+ \d{4}\]\s?"
                           r"|[A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d \S+ kernel: ?"
                           r"|\d{4}-\d\d-\d\dT[\d:.,]+(?:Z|[+-][\d:]+)? \S+ kernel: ?|\d{1,3},\d+,\d+,[-+c][^;]*;"
                           r"|(?:kern|user|daemon)\s*:\s*\w+\s*: (?:\S+ )?)")


def test_kernel_messages_without_their_stamps_are_still_a_kernel_log() -> None:
    """Or hold nothing the kernel-log judges give a verdict on (a bridge's 'entered disabled state' alone)."""
    wrong = []
    for name, text, kind, _ in KNOWN:
        bare = "".join(_KERNEL_STAMP.sub("", line) + "\n" for line in text.splitlines())
        if kind != "dmesg" or bare == text or (got := detect_kind(bare)) == kind:
            continue
        if got is not None or (verdict := _verdict_as(kind, bare)) not in ("SKIP", "ERROR"):
            wrong.append(f"{name}: {kind} -> {got}" + ("" if got else f" though read as {kind} it is {verdict}"))
    assert wrong == []


def test_a_decorated_failure_is_never_judged_pass(tmp_path: Path) -> None:
    """Through the real ``judge`` path (streamed kinds included): one decoration per FAIL/WARN case, by seed
    (all of them over the corpus; every decoration on every case takes a minute)."""
    passed = []
    cases = [(name, text, case) for name, text, _, case in KNOWN if case is not None and case.expect in NOT_PASSING]
    assert len(cases) >= 100
    for name, text, case in cases:
        whole = case.path.read_text(encoding="utf-8", errors="replace")
        if len(whole.splitlines()) > MAX_LINES and _judged_as_given(tmp_path, case, text).exit_code == 0:
            continue  # a long log whose failing lines lie past its head: the head alone is a clean log
        for decoration in _rng(name, "verdict").sample(sorted(DECORATIONS), 1):
            path = tmp_path / f"{decoration}-{case.path.name}"
            path.write_bytes(DECORATIONS[decoration](text, _rng(name, decoration)).encode())
            outcome = judge(Case(case.family, path, case.source, case.concluded, case.expect, case.expect_check,
                                 case.expect_profile))
            if outcome.exit_code == 0:
                passed.append(f"{decoration} {name}: expected {case.expect}, judged PASS")
    assert passed == []


def _judged_as_given(tmp_path: Path, case: Case, text: str) -> Outcome:
    """``text`` judged through the real path under its case's profile."""
    path = tmp_path / f"as-given-{case.path.name}"
    path.write_text(text, encoding="utf-8")
    return judge(Case(case.family, path, case.source, case.concluded, case.expect, case.expect_check,
                      case.expect_profile))


def _surest(kind: str, text: str) -> int:
    """How sure ``kind``'s sniffer is of ``text`` read past any of its paste's decorations, or as given."""
    head = text[:SNIFF_WINDOW]
    readings = [reader.read(head) for reader in PasteReader.of(head).peeled()] + [head]
    return max(get_parser(kind).sniff(reading) for reading in readings)


def test_two_tools_in_one_paste_are_read_as_the_surer_one() -> None:
    """One tool per text: the kind is the one whose sniffer is surer of the whole paste, never a third kind (a
    csv header after another tool's output is no header: the other tool is then the surer; one device's lspci
    link lines are no fragment once another tool's lines follow them: neither is sure, and the paste is unread)."""
    wrong = []
    for name, text, kind, _ in KNOWN:
        rng = _rng(name, "concatenated")
        other_name, other, other_kind, _ = rng.choice([k for k in KNOWN if k[2] != kind])
        both = text + other if rng.random() < 0.5 else other + text
        scores = {k: _surest(k, both) for k in (kind, other_kind)}
        best = max(scores.values())
        surer: set[str | None] = {k for k, score in scores.items() if score == best and score > 0} or {None}
        if (got := detect_kind(both)) not in surer:  # neither sure of the whole: no kind, never a third
            wrong.append(f"{name} + {other_name}: {scores} -> {got}")
    assert wrong == []


NEGATIVES = {
    "readme": """# Cluster health checks

Run `nvidia-smi` on every node before a job, then `dcgmi diag -r 3` for a deeper check.
NCCL jobs that hang usually need `NCCL_DEBUG=INFO`; nccl-tests' all_reduce_perf measures bandwidth.
Check the fabric with ibstat, ibv_devinfo and fi_info -p efa; kernel messages are in dmesg,
where an Xid names the GPU fault (Xid 79: the GPU fell off the bus; Xid 48: a double-bit ECC error).
The table lists Driver Version, CUDA Version and Memory-Usage for each GPU.
""",
    "shell_history": """  501  nvidia-smi
  502  nvidia-smi -q | less
  503  dcgmi diag -r 1
  504  ibstat
  505  NCCL_DEBUG=INFO torchrun --nproc_per_node 8 train.py
  506  dmesg -T | grep -i xid
  507  ./build/all_reduce_perf -b 8 -e 8G -f 2 -g 8
  508  ib_write_bw -d mlx5_0 --report_gbits
  509  lspci | grep -i nvidia
""",
    "traceback": """Traceback (most recent call last):
  File "train.py", line 12, in <module>
    main()
  File "train.py", line 8, in main
    model = load("checkpoints/last.pt")
  File "/opt/app/model.py", line 41, in load
    raise FileNotFoundError(path)
FileNotFoundError: checkpoints/last.pt
""",
    "chat": """> Did you run nvidia-smi on the node?
yes, nvidia-smi shows all 8 GPUs and dcgmi diag passes, but NCCL still hangs at init
> what does dmesg say?
nothing about Xid, and ibstat shows the ports Active
""",
    "markdown_heading": """# ib_write_bw

## Usage
Run ib_write_bw on the server, then on the client with the server's address.
""",
}


@pytest.mark.parametrize("negative", sorted(NEGATIVES))
def test_prose_that_names_the_tools_stays_unrecognised(negative: str) -> None:
    text = NEGATIVES[negative]
    assert detect_kind(text) is None
    detected = {d: kind for d in DECORATIONS
                if (kind := detect_kind(DECORATIONS[d](text, _rng(negative, d)))) is not None}
    assert detected == {}


def test_a_text_without_decorations_is_read_as_given() -> None:
    """The very same object: outputs of texts recognised before stay byte-identical."""
    text = "GPU 0: NVIDIA H100 (UUID: GPU-1)\nGPU 1: NVIDIA H100 (UUID: GPU-2)\n"
    reader = PasteReader.of(text)
    assert reader.idle and reader.read(text) is text


def test_a_prefix_on_few_lines_is_content() -> None:
    """A key on one line of five (fi_info's ``provider: efa``) is the tool's, not a host tag; a level is no host."""
    fi_info = "provider: efa\n    fabric: efa\n    domain: rdmap0s6-rdm\n    version: 2.0\n    type: FI_EP_RDM\n"
    assert PasteReader.of(fi_info).idle
    errors = "Error: unable to establish a connection\nError: Unable to connect to host engine\n"
    assert PasteReader.of(errors).idle


def test_a_stream_is_read_past_the_same_decorations_chunk_by_chunk() -> None:
    """The fence state carries across chunks: prose after the closing fence is dropped in a later chunk too."""
    text = "Output:\n```\n> [  1.0] NVRM: Xid 79\n> [  2.0] NVRM: Xid 48\n```\nthanks\n"
    whole = PasteReader.of(text).read(text)
    reader = PasteReader.of(text)
    chunked = "".join(reader.read(chunk) for chunk in ("Output:\n```\n> [  1.0] NVRM: Xid 79\n",
                                                        "> [  2.0] NVRM: Xid 48\n```\nthanks\n"))
    assert whole == chunked == "[  1.0] NVRM: Xid 79\n[  2.0] NVRM: Xid 48\n"


def test_a_tag_the_tool_prints_itself_is_kept_for_its_parser() -> None:
    """journalctl -o short-iso starts each record with its date: read as given, not stripped to a bare message."""
    journal = "".join(f"2025-01-02T15:20:1{i}+0800 node-7 kernel: NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen "
                      f"off the bus.\n" for i in range(3))
    assert detect_kind(journal) == "dmesg"
    record = get_parser("dmesg").parse(journal)
    assert detect_kind("".join(f"gpu-node-7: {line}\n" for line in journal.splitlines())) == "dmesg"
    assert record == get_parser("dmesg").parse("".join(f"gpu-node-7: {line}\n" for line in journal.splitlines()))


def test_a_driver_prefix_on_every_line_is_the_tools_own() -> None:
    """A bare driver paste starts every line with ``NVRM: ``, the shape of a host tag: it is read as given."""
    bare = ("NVRM: GPU at PCI:0000:18:00: GPU-5c1b7f1e-0000-0000-0000-000000000000\n"
            "NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus.\n"
            "NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.\n")
    assert detect_kind(bare) == "dmesg"
    assert {event.xid for event in get_parser("dmesg").parse(bare).xid_events} == {79}
