#!/usr/bin/env bash
# On the H200 (device tool): offline-policy graph runs over evals/suite whose coder turns become the
# skill datasets. On a GPU the runs verify, profile and optimise, so they record skill-2 turns
# (fix and optimise, with the verifier's feedback) and verified reference programs.
# Needs the graph's wheels in .whl/ (bash evals/device/fetch_wheels.sh on the CPU side).
# Usage: bash rl/device/collect_turns.sh [JOBS=8]          writes $OUT/rl-dataset and $OUT/rl-runs.tgz
set -u
jobs=${1:-8}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/usr/local/cuda/bin:$PATH STITCHCUDA_CACHE=${STITCHCUDA_CACHE:-/tmp/sc-cache} PYTHONUNBUFFERED=1
mkdir -p "$OUT/rl-runs"
timeout "${EVAL_TIMEOUT:-480}" python3 -m graph.cli eval evals/suite --out "$OUT/rl-runs" --jobs "$jobs" \
  --no-baselines ${ONLY:+--only "$ONLY"} -- --max-iterations "${ITERATIONS:-4}" 2>&1 | tail -40
python3 -m graph.cli rl dataset "$OUT/rl-runs/runs" --out "$OUT/rl-dataset"
tar czf "$OUT/rl-runs.tgz" --exclude='checkpoints.sqlite*' --exclude='profiles' -C "$OUT/rl-runs" runs
