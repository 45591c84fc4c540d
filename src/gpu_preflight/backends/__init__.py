"""Backends: the only code that touches NVML, /proc, /sys and subprocesses."""
