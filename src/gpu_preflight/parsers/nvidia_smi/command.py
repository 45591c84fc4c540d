"""What a pasted ``nvidia-smi`` command line says about the output under it.

People paste the command with its output (``[root@dx01 ~]# nvidia-smi -i 0 -q``,
``$ nvidia-smi --query-gpu=index,name --format=csv,noheader``), and some of what the output
means is only on that line: ``-i``/``--id`` makes nvidia-smi report only the GPUs named (by
index, UUID, PCI bus id or board serial; several joined by commas), so a ``-q`` that says
``Attached GPUs : 4`` and shows one GPU listed what was asked, not a cut report; and
``--format=csv,noheader`` prints rows without the line naming their columns (as does a paste that
left the header out), which only
``--query-gpu=<fields>`` on the command line names.
Only a line that is a pasted command is read (a shell prompt, or the command alone on its line),
never a mention of nvidia-smi in a tool's own output.
"""

from __future__ import annotations

import re

from ..text import is_command

_AT = re.compile(r"(?:^|[\s#$])(?:sudo\s+)?(?:[\w./-]*/)?nvidia-smi(?=\s|$)")
# --query-gpu, and the per-row queries whose CSV the same reader reads (remapped rows, compute apps, retired pages)
_QUERY = re.compile(r"(?:^|\s)--query-(?:gpu|remapped-rows|compute-apps|accounted-apps|retired-pages)[=\s]+"
                    r"(?P<fields>[^\s|;&<>]+)")
_FORMAT = re.compile(r"(?:^|\s)--format[=\s]+(?P<options>[^\s|;&<>]+)")
_ID = re.compile(r"(?:^|\s)(?:-i|--id)(?:[\s=]+|(?=[0-9]))(?P<ids>[^\s|;&<>]+)")


def smi_commands(text: str) -> list[str]:
    """The pasted nvidia-smi command lines of a text, from ``nvidia-smi`` on (prompt and ``sudo`` dropped)."""
    commands = []
    for line in text.splitlines():
        if "nvidia-smi" not in line or not is_command(line):
            continue
        if m := _AT.search(line):
            commands.append(line[line.index("nvidia-smi", m.start()):].strip())
    return commands


def selected_ids(text: str) -> list[str] | None:
    """The GPU ids the pasted nvidia-smi command(s) selected with ``-i``/``--id``, in order; ``None``
    when no command is pasted or one of them selected nothing (it reports every GPU)."""
    commands = smi_commands(text)
    if not commands:
        return None
    ids: list[str] = []
    for command in commands:
        m = _ID.search(command)
        if m is None:
            return None
        ids.extend(i for i in m.group("ids").split(",") if i and i not in ids)
    return ids or None


def query_fields(text: str) -> list[str] | None:
    """The ``--query-gpu`` (or ``--query-remapped-rows``, ``--query-compute-apps``...) fields of the one
    pasted nvidia-smi command (``--format=csv``): the names of
    its CSV's columns in order, which rows printed without their header line need (``noheader``, or a
    paste that left the header out). ``None`` when no such command is pasted, or more than one is
    (whose rows would be whose is not said)."""
    commands = smi_commands(text)
    if len(commands) != 1:
        return None
    query, form = _QUERY.search(commands[0]), _FORMAT.search(commands[0])
    if query is None or form is None:
        return None
    options = [o.strip().lower() for o in form.group("options").strip("'\"").split(",")]
    if "csv" not in options:
        return None
    fields = [f.strip().lower() for f in query.group("fields").strip("'\"").split(",")]
    return fields if all(fields) else None
