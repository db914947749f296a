#!/usr/bin/env bash
# On the H200 (device tool): the reward of every candidate in tests/candidates through the full GPU
# rule path (strict verification, timing, dynamic hack checks). Writes $OUT/anti_hacking.{md,json};
# exit 1 when a cheat earns more than 0 or an honest program is not above every cheat of its problem.
# Needs the graph's wheels in .whl/ (bash evals/device/fetch_wheels.sh on the CPU side).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/usr/local/cuda/bin:$PATH STITCHCUDA_CACHE=${STITCHCUDA_CACHE:-/tmp/sc-cache} PYTHONUNBUFFERED=1
python3 -m rl.anti_hacking tests/candidates --rule gpu --workers "${WORKERS:-6}" --out "$OUT" 2>&1 | tail -80
