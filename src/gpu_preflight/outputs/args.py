"""The ``run`` flags that choose where a report goes (argparse only: cheap to import).

``--output`` names targets by URL so one flag covers every store and a site file can list
them (``outputs.urls``); an unknown scheme is a usage error when the command line is
parsed, not a surprise after a twenty-minute run.
"""

from __future__ import annotations

import argparse

from ..safeio import SQLITE_MAX_PATH, length_problem

__all__ = ["add_output_arguments", "database_path", "output_target"]



def database_path(text: str) -> str:
    """Validate a history database path (``--history-db``, ``history --db``): one SQLite can open.

    A path longer than SQLite accepts (or than PATH_MAX) used to crash the run after its
    verdict, when the history was filed; it is a usage error before anything runs.
    """
    problem = length_problem(text, limit=SQLITE_MAX_PATH) if text else "the path is empty"
    if problem:
        shown = f"{text[:60]!r}..." if len(text) > 60 else repr(text)
        raise argparse.ArgumentTypeError(f"history database {shown}: {problem}")
    return text


def output_target(text: str) -> str:
    """Validate an ``--output`` URL: ``s3://bucket[/prefix/|/key.json]``, ``mlflow`` or ``mlflow+URI``."""
    if text.startswith("s3://"):
        if not text[len("s3://"):].split("/", 1)[0]:
            raise argparse.ArgumentTypeError(f"{text!r}: an S3 URL needs a bucket, e.g. s3://bucket/prefix/")
        return text
    if text == "mlflow" or (text.startswith("mlflow+") and len(text) > len("mlflow+")):
        return text
    raise argparse.ArgumentTypeError(
        f"unsupported output {text!r}: use s3://bucket/prefix/, mlflow (MLFLOW_TRACKING_URI) or mlflow+URI")


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the publishing and history flags to ``gpu-preflight run``."""
    g = parser.add_argument_group("outputs and history")
    g.add_argument("--output", action="append", default=[], type=output_target, metavar="URL",
                   help="also publish the report (repeatable): s3://bucket/prefix/ (report.json, report.html, "
                        "artifacts; '{job}' expands to the job name), s3://bucket/key.json, mlflow, mlflow+URI")
    g.add_argument("--mlflow-uri", metavar="URI",
                   help="log the run to this MLflow tracking URI (http://host:5000, sqlite:///path/mlflow.db)")
    g.add_argument("--prom-textfile", metavar="PATH",
                   help="write Prometheus metrics to PATH (a .prom file in node_exporter's textfile directory)")
    hist = g.add_mutually_exclusive_group()
    hist.add_argument("--history", dest="history", action="store_true", default=None,
                      help="append the run to the history store (default; also for --replay runs when given)")
    hist.add_argument("--no-history", dest="history", action="store_false",
                      help="neither compare with nor append to the history store")
    g.add_argument("--history-db", metavar="PATH", type=database_path,
                   help="history database (default: $GPU_PREFLIGHT_HISTORY or ~/.local/share/gpu-preflight/"
                        "history.sqlite)")
    g.add_argument("--cluster-name", metavar="NAME",
                   help="name the run is filed under in the history (default: $SLURM_CLUSTER_NAME or 'default')")
