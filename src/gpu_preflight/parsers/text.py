"""Reading tool transcripts: the conventions every text parser shares.

Saved outputs rarely hold only what the tool printed. People paste the command line
(``$ dcgmi diag -r 2``, ``ubuntu@host:~$ nvidia-smi nvlink -s``), elide the middle
(``...``, ``[...]``), and capture scripts append ``rc=0``. Tools print "not available"
in a dozen spellings (``N/A``, ``[N/A]``, ``Requested functionality has been
deprecated``). These helpers recognise all of that in one place, so each parser only
states what its own format means, and a reading that is not there becomes ``None`` —
never a fake zero.
"""

from __future__ import annotations

import re

from .errors import ParseError

__all__ = [
    "ContentGate", "PasteReader", "chunk_lines", "is_elision", "is_noise", "is_not_available", "is_prompt", "prepare",
    "strip_ansi",
    "to_bool", "to_float", "to_int",
]

_NOT_AVAILABLE = frozenset({
    "", "n/a", "na", "-", "none", "unknown", "unknown error", "not available", "not supported",
    "not applicable", "requested functionality has been deprecated", "insufficient permissions",
    "gpu is lost", "err!", "<unknown>",
    "not found",  # nvidia-smi's CUDA Version where no CUDA driver is installed (a vGPU or ESXi host)
})
# A conda or virtualenv shell prefixes its prompt with the environment's name: "(base) user@host:~$ ".
_ENV = r"(?:\([\w.-]+\)\s+)?"
_PROMPT = re.compile(r"^\s*" + _ENV + r"(?:[\w.-]+@[\w.-]+:[^\s$#]*)?\$\s+\S")
# A root shell's prompt is '#', which tool output uses too (nccl-tests' '# nThread 1', dmon's '# gpu   pwr'):
# a '#' line is a prompt only when a command this tool reads the output of follows it ('# nvidia-smi -q',
# 'root@gpu-7:~# dcgmi diag -r 1', '[root@node ~]# sudo ibstat'; a paste may join its words with '_').
_ROOT_PROMPT = re.compile(r"^\s*" + _ENV + r"(?:[\w.-]+@[\w.-]+:[^\s$#]*|\[[^\]\n]+\])?#\s*(?:sudo\s+)?(?:[\w./-]*/)?"
                          r"(?:nvidia-smi|dcgmi|nvvs|ibstat|ibstatus|ibv_devinfo|ibv_devices|lspci|dmesg|journalctl"
                          r"|fi_info|fi_pingpong|ib_(?:read|write|send)_(?:bw|lat)|\w+_perf)(?=[\s_]|$)")
# A prompt with no command after it: the shell waiting once the pasted output ended ('$', 'user@host:~$',
# '[root@node ~]#'), never a bare '#' (nccl-tests prints those in its header).
_IDLE_PROMPT = re.compile(r"^\s*" + _ENV + r"(?:[\w.-]+@[\w.-]+:[^\s$#]*[$#]|\[[^\]\n]+\][$#]|\$)\s*$")
# The command pasted alone on its line above its output ('nvidia-smi pmon', 'sudo dcgmi diag -r 1'): the
# program, then nothing, an option or one of its subcommands; never a sentence that starts with its name.
_BARE_COMMAND = re.compile(
    r"^\s*(?:sudo\s+)?(?:[\w./-]*/)?(?:nvidia-smi|dcgmi)(?:\s+(?:-\S+|topo|nvlink|pmon|dmon|mig|vgpu|drain"
    r"|clocks|conf-compute|c2c|gpm|discovery|diag|health|group|fieldgroup|config|policy|stats|introspect|profile"
    r"|modules|version)(?:\s.*)?)?\s*$")
# lspci alone, or with its options first (``sudo lspci -s 2f:00.0 -vv | grep -E 'LnkCap:|LnkSta:'``).
_BARE_LSPCI = re.compile(r"^\s*(?:sudo\s+)?(?:[\w./-]*/)?lspci(?:\s+-\S+(?:\s.*)?)?\s*$")
_RC = re.compile(r"^\s*rc=-?\d+\s*$")
_SNIP = re.compile(r"^[\[(<]?\s*(?:\.+\s*)?snip(?:ped)?(?:\s*\.+)?\s*[\])>]?$", re.IGNORECASE)
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_TRUE = frozenset({"yes", "enabled", "enable", "active", "on", "true", "supported"})
_FALSE = frozenset({"no", "disabled", "disable", "not active", "off", "false"})

# What a paste puts around a tool's lines, which no tool prints itself (see PasteReader): terminal colours
# (ANSI CSI and OSC sequences), Markdown fences, and one prefix repeated on every line. The prefixes, in
# the order they nest ("> 2024-03-01T12:00:00Z gpu-7: ..."): e-mail / GitHub quoting; an ISO date and time
# (journald -o short-iso, kubectl logs --timestamps, CI runners); a launcher's rank tag (torchrun's
# "[rank3]:", Open MPI's "[1,0]<stdout>:", Horovod's "[0]<stderr>:", srun -l's "3: "); a host tag (pdsh,
# clush, ansible: "gpu-7: "; a message's level, "Error: " on every line, is no host); a container tag
# (docker compose, stern: "trainer-0  | ").
_ANSI_SEQ = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_FENCE = re.compile(r"^[>\s]*(?:```|~~~)[\w+.-]*\s*$")


def strip_ansi(text: str) -> str:
    """``text`` without its terminal colour and control sequences: a paste's, and a streamed kernel log's read
    without the paste reader (``dmesg --color=always`` splits ``NVRM: `` from ``Xid`` with them)."""
    return _ANSI_SEQ.sub("", text) if "\x1b" in text else text
_PASTE_PREFIXES = (  # in nesting order: a paste's quoting holds a log's date, which holds a launcher's tag...
    re.compile(r"^(?:>[ \t]?)+"),
    re.compile(r"^\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?[ \t]"),
    re.compile(r"^(?:\[rank\d+\]:|\[\d+,\d+\]<std(?:out|err)>:|\[\d{1,5}\](?:<std(?:out|err)>)?:?(?=[ \t])"
               r"|\d{1,5}:(?=[ \t]))[ \t]?"),
    re.compile(r"^(?!(?i:error|warning|warn|info|debug|note|notice|fatal|critical|hint|caused by|usage):)"
               r"[A-Za-z][\w.-]*:[ \t]"),
    re.compile(r"^[A-Za-z][\w.-]*[ \t]*\|[ \t]?"),
)
_QUOTE = _PASTE_PREFIXES[0]  # quoting, like colours and fences, is never a tool's own: always read past
# A container tag that is one literal on every line of a paste says nothing a tool printed: always read past
# too. Not a host tag ("NVRM: " starts every line of a bare driver paste) nor a launcher's rank tag (a one-rank
# log's "[rank0]:" names the rank its parser reports).
_CONTAINER_TAG = _PASTE_PREFIXES[4]
_PREFIX_SHARE = 0.6  # a prefix on fewer lines is content (a "provider: efa" key), not a paste's decoration
_PREFIX_SAMPLE = 500  # lines of a head a prefix is looked for on


def prepare(kind: str, text: str, *, allow_empty: bool = False) -> list[str]:
    """The lines of ``text``, after refusing what no tool prints: binary data, or nothing.

    ``allow_empty`` is for tools whose empty output is an answer (``nvidia-smi nvlink
    -s`` on a GPU without NVLink prints nothing).
    """
    if "\x00" in text:
        raise ParseError(kind, "binary data (NUL bytes), not tool output")
    lines = text.splitlines()
    if not allow_empty and not any(line.strip() and not is_noise(line) for line in lines):
        raise ParseError(kind, "empty input")
    return lines


class ContentGate:
    """:func:`prepare`'s two refusals for a stream: binary data, or no tool output at all.

    Feed every chunk to :meth:`check` (a NUL byte anywhere refuses the input, as in
    :func:`prepare`); lines are only inspected until the first one that is output, so
    the gate costs nothing after the first chunk of a real log.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.seen = False

    def check(self, chunk: bytes) -> None:
        if b"\x00" in chunk:
            raise ParseError(self.kind, "binary data (NUL bytes), not tool output")
        if not self.seen and chunk.strip():
            self.seen = any(line.strip() and not is_noise(line) for line in chunk_lines(chunk))

    def finish(self) -> None:
        if not self.seen:
            raise ParseError(self.kind, "empty input")


class PasteReader:
    """What a paste put around a tool's lines (see :data:`_PASTE_PREFIXES`), learnt from its head.

    A prefix counts when it starts most lines (:data:`_PREFIX_SHARE`): on every line it is a
    decoration of the paste, and read as content it hides the tool's own line starts from
    every sniffer (or, as torch's ``[rank3]:``, passes for evidence of another tool). Text
    outside Markdown fences is the poster's prose, not the tool's. :meth:`of` learns all
    that from a text (a file's head); :meth:`read` removes it, line by line, from that text
    or from the chunks of the same file in order (it remembers whether it is inside a
    fence), so a log streamed in chunks is read past what its head showed.
    """

    def __init__(self, ansi: bool, fenced: bool, prefixes: tuple[re.Pattern[str], ...], tabs: bool = False,
                 fixed: int = 0) -> None:
        self.ansi = ansi
        self.fenced = fenced
        self.prefixes = prefixes
        self.tabs = tabs  # expand tabs to the terminal's 8-column stops (an editor's or unexpand's tabs for spaces)
        self.fixed = fixed  # the leading prefixes no tool prints: quoting, or one literal on every line
        self._inside = False

    @property
    def idle(self) -> bool:
        """Whether the paste has no decoration to remove: :meth:`read` then returns the text itself."""
        return not (self.ansi or self.fenced or self.prefixes or self.tabs)

    @classmethod
    def of(cls, text: str) -> PasteReader:
        """The decorations of the paste ``text``, outermost prefix first."""
        ansi = "\x1b" in text
        if ansi:
            text = _ANSI_SEQ.sub("", text)
        lines = text.splitlines()
        fenced = ("```" in text or "~~~" in text) and _has_fenced_block(lines)
        if fenced:
            lines = cls(False, True, ())._lines(lines)
        prefixes: list[re.Pattern[str]] = []
        fixed = 0
        for _ in range(len(_PASTE_PREFIXES)):  # a prefix on most lines shows on most of the first few hundred
            body = [line for line in lines[:_PREFIX_SAMPLE] if line.strip() and not is_noise(line)]
            found = next((p for p in _PASTE_PREFIXES
                          if body and sum(1 for line in body if p.match(line)) >= _PREFIX_SHARE * len(body)), None)
            if found is None:
                break
            literals = {m.group(0).strip() for line in body if (m := found.match(line))}
            if fixed == len(prefixes) and (found is _QUOTE or (found is _CONTAINER_TAG and len(literals) == 1
                                                                and len(body) > 1)):
                fixed += 1
            prefixes.append(found)
            lines = [found.sub("", line, count=1) for line in lines]
        return cls(ansi, fenced, tuple(prefixes), "\t" in text, fixed)

    def peeled(self) -> list[PasteReader]:
        """The readers to try, most removed first: this one, then one prefix fewer each time (the innermost
        kept), to the one that removes only what no tool prints (colours, fences, quoting).

        A tool's own line start can take a tag's shape (journalctl -o short-iso starts each
        record with its date, torch's log its ``[rank3]:``), so the reader that removes every
        prefix is not the only one to ask. At each step the tabs are expanded first, then kept:
        some tools print tabs (``topo -m`` separates its columns with them, ``lspci -vvv``
        indents with them), while a parser that reads nesting from the depth of spaces loses it
        to an editor's tabs.
        """
        tabs = (True, False) if self.tabs else (False,)
        return [PasteReader(self.ansi, self.fenced, self.prefixes[:n], expand, min(n, self.fixed))
                for n in range(len(self.prefixes), self.fixed - 1, -1) for expand in tabs]

    def fresh(self) -> PasteReader:
        """The same decorations, read from a text's start (outside any fence)."""
        return PasteReader(self.ansi, self.fenced, self.prefixes, self.tabs, self.fixed)

    def read(self, text: str) -> str:
        """``text`` with this paste's decorations removed (``text`` itself when there are none)."""
        if self.idle:
            return text
        if self.ansi:
            text = _ANSI_SEQ.sub("", text)
        return "\n".join(self._lines(text.splitlines())) + "\n"

    def _lines(self, lines: list[str]) -> list[str]:
        if self.fenced:
            kept = []
            for line in lines:
                if _FENCE.match(line):
                    self._inside = not self._inside
                elif self._inside:
                    kept.append(line)
            lines = kept
        for prefix in self.prefixes:
            lines = [prefix.sub("", line, count=1) for line in lines]
        return [line.expandtabs(8) for line in lines] if self.tabs else lines


def _has_fenced_block(lines: list[str]) -> bool:
    """Whether a Markdown fence opens before a line of text (to its closing fence or the end): a stray run
    of backticks at a log's end is no fence."""
    opened = False
    for line in lines:
        if _FENCE.match(line):
            opened = not opened
        elif opened and line.strip():
            return True
    return False


def chunk_lines(chunk: bytes) -> list[str]:
    """The lines of a chunk of whole lines, decoded as :func:`~gpu_preflight.boundedio.read_text` decodes a log."""
    return chunk.decode("utf-8", errors="replace").splitlines()


def is_prompt(line: str) -> bool:
    """A pasted shell command line: ``$ cmd``, ``user@host:~$ cmd`` (after a conda/venv ``(base)`` too), or a
    root shell's ``# nvidia-smi ...``; or the prompt alone, the shell waiting after the output (``$``)."""
    return (("$" in line and bool(_PROMPT.match(line))) or ("#" in line and bool(_ROOT_PROMPT.match(line)))
            or (("$" in line or "#" in line) and bool(_IDLE_PROMPT.match(line))))


def is_elision(line: str) -> bool:
    """A line an author put in place of omitted output: ``...``, ``[...]``, ``…``, ``[snip]``, ``<snip>``."""
    text = line.strip()
    return text in ("...", "[...]", "…") or ("snip" in text.lower() and bool(_SNIP.match(text)))


def is_command(line: str) -> bool:
    """A pasted shell command line, with its prompt (:func:`is_prompt`) or without one: ``nvidia-smi pmon``,
    ``dcgmi diag -r 1`` or ``sudo lspci -s 2f:00.0 -vv | grep ...`` alone on its line above the output it printed."""
    return is_prompt(line) or (("nvidia-smi" in line or "dcgmi" in line) and bool(_BARE_COMMAND.match(line))) or (
        "lspci" in line and bool(_BARE_LSPCI.match(line)))


def is_noise(line: str) -> bool:
    """A line that is not tool output: a pasted command, an elision, a capture script's ``rc=N``."""
    return is_command(line) or is_elision(line) or ("rc=" in line and bool(_RC.match(line)))


def is_not_available(value: str | None) -> bool:
    """Whether a printed value means "no reading" (``N/A``, ``[N/A]``, ``[Not Supported]``...)."""
    if value is None:
        return True
    return value.strip().strip("[]").strip().lower() in _NOT_AVAILABLE


def to_float(value: str | None) -> float | None:
    """The first number in a printed value (``"81559 MiB"`` → 81559.0), ``None`` when not available."""
    if is_not_available(value):
        return None
    assert value is not None
    m = _NUMBER.search(value)
    if m is None:
        return None
    number = float(m.group(0))
    return number if number == number and abs(number) != float("inf") else None


def to_int(value: str | None) -> int | None:
    """The integer in a printed value (``"16x"`` → 16, ``"0x1F"`` → 31); ``None`` when not available."""
    if is_not_available(value):
        return None
    assert value is not None
    text = value.strip()
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", text):
        return int(text, 16)
    number = to_float(text)
    if number is None or number != int(number):
        return None
    return int(number)


def to_bool(value: str | None) -> bool | None:
    """``Yes``/``Enabled``/``Active``/``On`` → True, their opposites → False, anything else → None."""
    if value is None:
        return None
    text = value.strip().strip("[]").strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None
