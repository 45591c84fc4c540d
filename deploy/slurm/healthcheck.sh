#!/bin/sh
# Slurm HealthCheckProgram for gpu-preflight (see slurm.conf.fragment), installed as
# /etc/slurm/gpu-preflight-healthcheck.sh, owned by root, mode 0755.
#
# slurmd runs it as root every HealthCheckInterval on every node (and once at slurmd start-up),
# kills it after 60 s and ignores its exit code. It gets SLURMD_NODENAME and nothing else: no PATH,
# no SLURM_CONF, so both are set here. It never runs a check: it reads this node's last result
# (written by the prolog/epilog, the refresh timer or `gpu-preflight run --report-dir`) and
# answers in about 0.1 s; on a failing result it drains the node with "gpu-preflight: <checks>",
# on a passing result taken after our own drain it resumes it, and it leaves every other drain alone.
#
# Remove --apply to watch what it would do (the commands are logged, nothing changes).
export PATH=/usr/local/bin:/usr/bin:/bin
export SLURM_CONF=${SLURM_CONF:-/etc/slurm/slurm.conf}
LOG=/var/log/gpu-preflight/healthcheck.log
GPU_PREFLIGHT=${GPU_PREFLIGHT:-/opt/gpu-preflight/bin/gpu-preflight}
mkdir -p "${LOG%/*}"

{
  printf '%s ' "$(date -Is)"
  "$GPU_PREFLIGHT" slurm healthcheck --apply --config /etc/gpu-preflight/site.toml
} >>"$LOG" 2>&1
exit 0
