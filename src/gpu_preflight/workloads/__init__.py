"""Workloads that run under torch.distributed: collectives, GEMM, memory, training smoke.

torch is imported inside the functions, never at import time of this package.
"""
