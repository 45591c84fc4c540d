"""Probes gather facts through backends; they never judge. Each registers with ``@probe``."""
