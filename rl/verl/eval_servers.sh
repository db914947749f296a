#!/usr/bin/env bash
# On the timing node: one evaluation server per GPU, each with its own build cache (the worker's
# device lock lives there), so candidates are timed on GPUs nothing else uses.
# Usage: bash rl/verl/eval_servers.sh [FIRST_PORT=8600] [GPUS=8]   (stops when interrupted)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
first=${1:-8600}; gpus=${2:-8}
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" PATH="/usr/local/cuda/bin:$PATH"
pids=()
for ((i = 0; i < gpus; i++)); do
  CUDA_VISIBLE_DEVICES=$i STITCHCUDA_CACHE="${STITCHCUDA_CACHE_ROOT:-/tmp/stitchcuda-cache}/gpu$i" \
    python3 -m rl.eval_server --host "${BIND:-0.0.0.0}" --port $((first + i)) &
  pids+=($!)
done
trap 'kill "${pids[@]}" 2>/dev/null' INT TERM EXIT
wait
