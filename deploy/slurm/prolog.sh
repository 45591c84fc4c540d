#!/bin/sh
# Slurm Prolog for gpu-preflight: quick node checks before a job starts on the node.
# Install as /etc/slurm/prolog.d/50-gpu-preflight.sh (with Prolog=/etc/slurm/prolog.d/* in
# slurm.conf), root-owned, mode 0755. Runs as root on every node of the job (at allocation with
# PrologFlags=Alloc).
#
# Exit 0: the job runs. Exit 1: gpu-preflight found the node failing and drained it with
# "gpu-preflight: <checks>"; Slurm then keeps its drain (and our reason), and requeues the job
# (held: `scontrol release <jobid>` once it may run again). The circuit breaker applies: when too
# much of the cluster is already out, the failure is logged and the job runs (exit 0).
# A configuration mistake never fails jobs: it is logged and the prolog exits 0.
#
# Cost: about 0.4-0.7 s on a node (NVML reads, /proc, /sys; no GPU work), hard-capped by
# slurm.prolog_timeout_s (default 20 s; a hang there is treated as a failing node).
export PATH=/usr/local/bin:/usr/bin:/bin
LOG=/var/log/gpu-preflight/prolog.log
GPU_PREFLIGHT=${GPU_PREFLIGHT:-/opt/gpu-preflight/bin/gpu-preflight}
mkdir -p "${LOG%/*}"

# Optional: only on GPU partitions, e.g.
# case "$SLURM_JOB_PARTITION" in gpu*) ;; *) exit 0 ;; esac

printf '%s job %s: ' "$(date -Is)" "$SLURM_JOB_ID" >>"$LOG"
exec "$GPU_PREFLIGHT" slurm prolog --apply --config /etc/gpu-preflight/site.toml >>"$LOG" 2>&1
