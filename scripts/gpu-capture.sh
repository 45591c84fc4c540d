#!/usr/bin/env bash
# Run gpu-preflight's real GPU path on a GPU machine and record what it prints.
# Used with the device tool: outputs go to $OUT (at most 8 files), then under
# tests/fixtures/captured/<gpu>-<driver>/. Needs torch + nvidia-ml-py on that machine.
# SKIP_HW=1 leaves out the hardware tests and the GEMM bench (recorded once already).
set -u
OUT=${OUT:-gpu-capture}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
LOG=$OUT/log.txt
step() { echo "=== $* ===" | tee -a "$LOG"; }
step "nvidia-smi -L"; nvidia-smi -L >>"$LOG" 2>&1
step "snapshot"; python3 -m gpu_preflight snapshot >"$OUT/snapshot.json" 2>>"$LOG"; echo "rc=$?" >>"$LOG"
step "node-only run (timed)"
/usr/bin/time -f "wall %e s" python3 -m gpu_preflight run --node-only --format json \
  >"$OUT/node_only_report.json" 2>>"$LOG"; echo "rc=$?" >>"$LOG"
python3 -m gpu_preflight run --node-only -v 2>>"$LOG" >/dev/null
step "self-launched run: GEMM, memory, training, stack on every GPU"
timeout 400 /usr/bin/time -f "wall %e s" python3 -m gpu_preflight run --format json --timeout-s 120 \
  >"$OUT/cluster_report.json" 2>>"$LOG"; echo "rc=$?" >>"$LOG"
if [ "${SKIP_HW:-0}" != 1 ]; then
  step "hardware tests (--run-gpu)"
  GPU_PREFLIGHT_CAPTURE_DIR=/tmp/gpcap timeout 300 python3 -m pytest tests/test_gpu_hardware.py --run-gpu -q \
    -p no:cacheprovider >>"$LOG" 2>&1; echo "rc=$?" >>"$LOG"
  step "bench: GEMM bf16 8192 vs bare matmul"; timeout 120 python3 bench/bench_gemm.py --n 8192 --dtype bf16 \
    --iters 20 --rounds 5 >>"$LOG" 2>&1
fi
step "bench: node run on the replayed H200 dump vs import psutil, pynvml"
timeout 120 python3 bench/bench_node_run.py --repeat 9 >>"$LOG" 2>&1
step "bench: rank 0 aggregating 1,000 and 10,000 synthetic 8-GPU nodes"
timeout 120 python3 bench/bench_aggregate.py --nodes 1000 >>"$LOG" 2>&1
timeout 240 python3 bench/bench_aggregate.py --nodes 10000 >>"$LOG" 2>&1
step "done"
