"""Where a run's report goes and how it is shown: the typed form of the ``run`` output flags.

The CLI builds one from argparse; a library user builds one directly. Publishing and the
history read these fields, never a command line's namespace, so they can be called by
code that has no command line at all.
"""

from __future__ import annotations

import os

import msgspec

__all__ = ["DEFAULT_REPORT_NAME", "OutputOptions", "check_report_name"]

DEFAULT_REPORT_NAME = "report.json"


def check_report_name(name: str) -> str:
    """``name`` when it is a bare file name for the report in ``--report-dir``; else ``ValueError``.

    A separator or a ``..`` would put the report outside the directory the run was asked
    to write (and outside what the bundle publishes), so such names are refused, as are
    names the directory's own files use.
    """
    if not name or name in (".", "..") or "/" in name or (os.sep != "/" and os.sep in name) or "\0" in name:
        raise ValueError(f"must be a bare file name (no directory, no '/'), got {name!r}")
    if name in ("report.html", "artifacts", "ddp_training_result.json"):
        raise ValueError(f"{name!r} is a name the report directory uses for something else")
    if len(name.encode()) > 255:
        raise ValueError("must be at most 255 bytes long")
    return name


class OutputOptions(msgspec.Struct, frozen=True):
    """What to write, print and publish after a run (``run``'s output flags).

    ``history`` None: the config decides (and replays of other nodes' data are not filed).
    ``outputs`` are ``--output`` URLs, already validated (:func:`~gpu_preflight.outputs.args.output_target`).
    """

    report_dir: str | None = None
    report_name: str = DEFAULT_REPORT_NAME
    pretty: bool = False
    format: str = "console"
    verbose: bool = False
    quiet: bool = False
    outputs: tuple[str, ...] = ()
    mlflow_uri: str | None = None
    prom_textfile: str | None = None
    history: bool | None = None
    history_db: str | None = None
    cluster_name: str | None = None

    def __post_init__(self) -> None:
        check_report_name(self.report_name)
