"""Node checks: one theme per module; each check registers itself with ``@check``.

A check's docstring is its user documentation (``gpu-preflight checks explain ID``).
"""
