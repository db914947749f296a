#!/usr/bin/env bash
# On the H200 (device tool): install the carried wheels, then `stitchcuda eval` over the built-in
# suite with parallel builds (GPU work is serialised by the worker's lock). Writes under $OUT.
# Usage: [EVAL_ARGS="--baseline-modes eager"] [ONLY=regex] bash evals/device/suite_run.sh [JOBS] [extra run args...]
set -u
jobs=${1:-8}; shift || true
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/usr/local/cuda/bin:$PATH STITCHCUDA_CACHE=${STITCHCUDA_CACHE:-/tmp/sc-cache} PYTHONUNBUFFERED=1
python3 -c "import torch,inspect; from torch.utils.cpp_extension import load_inline as l; print('torch', torch.__version__, torch.cuda.get_device_name(), 'no_implicit_headers:', 'no_implicit_headers' in inspect.signature(l).parameters)"
mkdir -p "$OUT/eval"
timeout "${EVAL_TIMEOUT:-420}" python3 -m graph.cli eval evals/suite --out "$OUT/eval" --jobs "$jobs" ${ONLY:+--only "$ONLY"} ${EVAL_ARGS:-} -- "$@" 2>&1 | tee "$OUT/eval.log" | tail -60
for f in results.jsonl summary.json table.md; do [ -f "$OUT/eval/$f" ] && mv "$OUT/eval/$f" "$OUT/"; done
tar czf "$OUT/runs.tgz" --exclude='checkpoints.sqlite*' -C "$OUT/eval" runs && rm -rf "$OUT/eval"
