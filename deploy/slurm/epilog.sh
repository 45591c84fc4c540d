#!/bin/sh
# Slurm Epilog for gpu-preflight: the same quick node checks after a job, so a GPU the job broke
# (Xid, ECC, a fallen-off GPU) is drained before the next job lands on it. Install as
# /etc/slurm/epilog.d/50-gpu-preflight.sh (Epilog=/etc/slurm/epilog.d/*), root-owned, mode 0755.
#
# Exit 1 after gpu-preflight drained the node (Slurm keeps the node drained; the finished job is
# not affected). Exit 0 otherwise, in dry run, and when the circuit breaker refuses the drain.
export PATH=/usr/local/bin:/usr/bin:/bin
LOG=/var/log/gpu-preflight/epilog.log
GPU_PREFLIGHT=${GPU_PREFLIGHT:-/opt/gpu-preflight/bin/gpu-preflight}
mkdir -p "${LOG%/*}"

printf '%s job %s: ' "$(date -Is)" "$SLURM_JOB_ID" >>"$LOG"
exec "$GPU_PREFLIGHT" slurm epilog --apply --config /etc/gpu-preflight/site.toml >>"$LOG" 2>&1
