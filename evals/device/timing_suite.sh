#!/usr/bin/env bash
# On the H200 (device tool): one resumable slice of a full-suite eval with every baseline mode,
# for issue 12's agreement and throughput numbers. Run it again until it says "complete"; then run
# it for the second eval (NAME=b) the same way, and it prints the agreement of the two.
#
#   bash evals/device/timing_suite.sh NAME [JOBS] [extra run args...]      (NAME: a or b)
#
# State that must survive between device calls lives in .device/timing/ (carry it: the tool's
# carry list [".whl", ".device/timing"]); after each call copy $OUT/state/ back over it:
#   rm -rf .device/timing && cp -r FILES_AT/state .device/timing
# The baseline cache (.device/timing/baselines.json) is shared by both evals: eval b reuses eval a's
# torch.compile baselines, as the issue's "once cached" throughput asks.
set -u
name=${1:?usage: timing_suite.sh NAME [JOBS] [run args...]}; shift
jobs=${1:-12}; shift || true
state=.device/timing
mkdir -p "$state" "$OUT/state"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
export STITCHCUDA_CACHE=${STITCHCUDA_CACHE:-/tmp/sc-cache} STITCHCUDA_BASELINE_CACHE=$PWD/$state/baselines.json
export STITCHCUDA_PROFILERS=${STITCHCUDA_PROFILERS:-torch}
work=/tmp/timing-eval/$name
mkdir -p "$work"
# resume from whichever results file is longer: this warm machine's or the carried one
if [ -f "$state/$name.results.jsonl" ] && [ "$(wc -l < "$state/$name.results.jsonl")" -gt "$(cat "$work/results.jsonl" 2>/dev/null | wc -l)" ]; then
    cp "$state/$name.results.jsonl" "$work/results.jsonl"
fi
cmd=(python3 -m graph.cli eval evals/suite --out "$work" --jobs "$jobs" ${ONLY:+--only "$ONLY"}
     --baseline-modes eager,default,max-autotune-no-cudagraphs,reduce-overhead -- --max-iterations 3 "$@")
echo "STITCHCUDA_PROFILERS=$STITCHCUDA_PROFILERS stitchcuda eval evals/suite --jobs $jobs ${ONLY:+--only '$ONLY' }--baseline-modes eager,default,max-autotune-no-cudagraphs,reduce-overhead -- --max-iterations 3 $*" > "$OUT/state/suite.command"
started=$(date +%s)
timeout "${EVAL_TIMEOUT:-540}" "${cmd[@]}" > "$OUT/$name.eval.log" 2>&1
rc=$?
echo "slice: $(( $(date +%s) - started )) s, exit $rc (124: the slice's time ran out; run again to resume)"
tail -5 "$OUT/$name.eval.log"
cp "$work/results.jsonl" "$OUT/state/$name.results.jsonl" 2>/dev/null
for f in "$state"/*.results.jsonl; do [ -f "$f" ] && [ ! -f "$OUT/state/$(basename "$f")" ] && cp "$f" "$OUT/state/"; done
[ -f "$state/baselines.json" ] && cp "$state/baselines.json" "$OUT/state/"
[ -f "$work/table.md" ] && cp "$work/table.md" "$OUT/$name.table.md"
total=$(python3 -c "from evals.runner import discover; print(len(discover(['evals/suite'])))")
done_count=$(python3 -c "from evals.benchmarks.agreement import read_records; print(len(read_records(__import__('pathlib').Path('$work/results.jsonl'))))" 2>/dev/null || echo 0)
echo "$name: $done_count of $total problems recorded"
[ "$done_count" -ge "$total" ] && echo "$name: complete"
python3 -m evals.benchmarks.agreement "$work/results.jsonl" || true
if [ -f "$OUT/state/a.results.jsonl" ] && [ -f "$OUT/state/b.results.jsonl" ]; then
    python3 -m evals.benchmarks.agreement "$OUT/state/a.results.jsonl" "$OUT/state/b.results.jsonl" || true
    python3 -m evals.benchmarks.scaling "$OUT/state/a.results.jsonl" --problems 250 || true
    python3 -m evals.benchmarks.scaling "$OUT/state/b.results.jsonl" --problems 250 || true
fi
