#!/usr/bin/env bash
# On the timing node: one evaluation server per GPU, each with its own build cache (the worker's
# device lock lives there, and every server sees its GPU as device 0), so candidates are timed on
# GPUs nothing else uses.
#
# The quiet window (docs/timing.md: no build or trace runs while a time is taken) stays machine-wide:
# every server shares one window folder, so one server's nvcc never runs beside another's timing.
# That serialises the timed phase across the node's GPUs (correctness, profiles and builds still
# overlap); set STITCHCUDA_TIMING_WINDOW=per-gpu to give each server its own window instead (more
# timing throughput, launch-bound timings exposed to the other servers' builds).
#
# Usage: bash rl/verl/eval_servers.sh [FIRST_PORT=8600] [GPUS=8]   (stops when interrupted)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
first=${1:-8600}; gpus=${2:-8}
root=${STITCHCUDA_CACHE_ROOT:-/tmp/stitchcuda-cache}
window=${STITCHCUDA_TIMING_WINDOW:-$root/window}
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" PATH="/usr/local/cuda/bin:$PATH"
mkdir -p "$root"
pids=()
for ((i = 0; i < gpus; i++)); do
  own_window=$window
  [[ $window == per-gpu ]] && own_window="$root/gpu$i/window"
  mkdir -p "$root/gpu$i"
  [[ $own_window == off ]] || mkdir -p "$own_window"
  CUDA_VISIBLE_DEVICES=$i STITCHCUDA_CACHE="$root/gpu$i" STITCHCUDA_TIMING_WINDOW="$own_window" \
    python3 -m rl.eval_server --host "${BIND:-0.0.0.0}" --port $((first + i)) &
  pids+=($!)
done
trap 'kill "${pids[@]}" 2>/dev/null' INT TERM EXIT
wait
