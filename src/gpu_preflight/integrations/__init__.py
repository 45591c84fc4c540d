"""Integrations with the schedulers and platforms clusters run on (Slurm, Kubernetes, SageMaker).

Each module turns a gpu-preflight verdict into that platform's own action (a drain, a
label, a taint) and keeps the platform's tooling behind argv-only, time-limited calls.
"""
