"""``python -m gpu_preflight`` runs the command line."""

from .cli.main import program

program()
