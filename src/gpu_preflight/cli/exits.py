"""Exit codes of every command, and the argument parser that keeps usage errors off exit 2.

Prologs, drain hooks and CI read exit 2 as "this node failed": a typo in a flag, an unknown
profile or an unreadable input file judged no node, so it is exit 3 (could not judge), the
same as a run that could not measure anything. Every command imports these; none defines
its own.

A run stopped by a signal has no verdict and is none of 0-3: it exits 128 + the signal's
number, 130 for SIGINT (Ctrl-C) and 143 for SIGTERM (``scancel``, a pod's deletion, a
launcher stopping its workers), what a shell reports for a command the signal killed, after
one line on stderr and with none of its temporaries left (:mod:`gpu_preflight.interrupts`).
``serve`` is the exception: SIGINT and SIGTERM are its normal way to stop, exit 0.
"""

from __future__ import annotations

import argparse
import signal
from typing import NoReturn

from ..interrupts import exit_code

__all__ = ["EXIT_ERROR", "EXIT_SIGINT", "EXIT_SIGTERM", "EXIT_USAGE", "Parser"]

EXIT_ERROR = 3
EXIT_USAGE = EXIT_ERROR
EXIT_SIGINT = exit_code(signal.SIGINT)  # 130
EXIT_SIGTERM = exit_code(signal.SIGTERM)  # 143


class Parser(argparse.ArgumentParser):
    """``argparse`` with usage errors as exit 3 and one line: the error and where the help is.

    The full usage of ``run`` is a dozen lines; in a prolog's log the one line that says
    what was wrong is what an operator needs.

    ``add_subparsers`` builds subcommand parsers of the parser's own class, so one
    instance at the top makes every subcommand behave the same.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")
