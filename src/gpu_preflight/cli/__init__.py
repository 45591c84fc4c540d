"""Command-line interface (``gpu-preflight``)."""
